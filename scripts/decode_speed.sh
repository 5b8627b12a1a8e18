#!/bin/bash
# Prefill and decode tokens/s, single document: this crate's CPU engine (the `local_speed` bench,
# stage `raw`, format `fast`) against llama.cpp's `llama-bench` on the same GGUF files, 2 threads,
# 256 prompt tokens then 64 generated, alternated ROUNDS times (the machine's speed drifts; compare
# rounds pairwise). Our 64 tokens decode after the 256 of the prompt, llama-bench's `tg64` from an
# empty context, so llama-bench also runs `tg64 @ d256` (`-d 256`: the 64 tokens after a context
# of 256, the depth ours run at). Issue 17, goal 1; the figures are in docs/benchmarks.md.
#
#   scripts/decode_speed.sh /path/to/llama-bench [ROUNDS]
#
# llama-bench is built like llama-server (see scripts/throughput.py) with `--target llama-bench`.
# The models: the catalogue's SmolLM2 and Qwen2.5-Coder files in ~/.cache/contract/models (the
# main command and the tests fetch them on first use).
set -euo pipefail
BENCH=${1:?usage: scripts/decode_speed.sh /path/to/llama-bench [ROUNDS]}
ROUNDS=${2:-3}
cd "$(dirname "$0")/.."
if [ -z "${CARGO_TARGET_DIR:-}" ] && [ -d /work/target ]; then export CARGO_TARGET_DIR=/work/target; fi
OURS=$(cargo bench -p contract-backends --bench local_speed --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "local_speed" and m.get("executable"):
        print(m["executable"])')
MODELS=${CONTRACT_MODELS:-$HOME/.cache/contract/models}
for round in $(seq 1 "$ROUNDS"); do
  for f in SmolLM2-135M-Instruct.Q4_1.gguf qwen2.5-coder-0.5b-instruct-q4_k_m.gguf; do
    echo "=== round $round $f ours $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    FORMATS=fast STAGES=raw RUNS=3 PREFILL=256 DECODE=64 "$OURS" --model "$MODELS/$f" 2>&1 \
      | grep -E '^\| fast' || true
    echo "=== round $round $f llama-bench $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    "$BENCH" -m "$MODELS/$f" -p 256 -n 64 -t 2 -r 3 2>&1 | grep -E 'pp256|tg64' || true
    echo "=== round $round $f llama-bench at depth 256 $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    "$BENCH" -m "$MODELS/$f" -p 0 -n 64 -d 256 -t 2 -r 3 2>&1 | grep -E 'tg64' || true
  done
done
