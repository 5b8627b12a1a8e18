#!/usr/bin/env python3
"""Documents per second: the local backend's batched decoding against llama.cpp's server with
parallel slots, on the same GGUF, the same prompts and the same documents, scored by the same
code. Writes its section of docs/benchmarks.md.

    python3 scripts/throughput.py --llama-server /path/to/llama-server --docs 100 --parallel 1,4,8

Both sides run `filings --mode constrained` (contract `ReleaseGuidance`, greedy, at most 160 new
tokens) over the same generated releases with N documents in flight:

- local: `filings --concurrency N` (the batch runner with N in flight; the backend decodes them
  in one batch, `LocalOptions::max_batch` = N), the contract's token mask every step;
- llama.cpp: `llama-server --parallel N` (N slots, continuous batching, `-t` threads), asked
  through `filings --backend openai --server-mode json_object_schema --concurrency N
  --timeout 3600` (the same batch runner, the same messages; llama.cpp's grammar from the
  contract's strict schema; the long timeout so that no request is abandoned and resent).

Seconds are the batch runner's (first request sent to last answer; model loading excluded).
llama-server is not part of this repository: build it from the llama.cpp sources that the
`llama-cpp-python` sdist on PyPI vendors (`pip download --no-deps --no-binary llama-cpp-python
llama-cpp-python==0.3.36`, then `cmake -B build -DLLAMA_BUILD_SERVER=ON -DGGML_NATIVE=ON
-DLLAMA_CURL=OFF vendor/llama.cpp && cmake --build build --target llama-server`). The server
listens on 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START, END = "<!-- throughput:start -->", "<!-- throughput:end -->"
MODELS = {
    "qwen2.5-coder-0.5b": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "smollm2-135m": "SmolLM2-135M-Instruct.Q4_1.gguf",
}
SUMMARY = re.compile(r"^constrained\s+(\d+) documents, (\d+) valid, ([0-9.]+) s")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    log("$ " + shlex.join(cmd))
    return subprocess.run(cmd, cwd=ROOT, text=True, **kw)


def cache_dir() -> Path:
    if os.environ.get("CONTRACT_CACHE"):
        return Path(os.environ["CONTRACT_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "contract"


def target_dir() -> Path:
    out = run(["cargo", "metadata", "--format-version", "1", "--no-deps"],
              stdout=subprocess.PIPE, check=True).stdout
    return Path(json.loads(out)["target_directory"])


def filings_run(filings: Path, args: list[str]) -> dict:
    """Runs filings; returns the batch runner's seconds, documents, and the table row."""
    p = run([str(filings), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise RuntimeError(f"filings failed ({p.returncode}): {p.stderr[-2000:]}")
    seconds = docs = None
    for line in p.stderr.splitlines():
        m = SUMMARY.match(line.strip())
        if m:
            docs, seconds = int(m.group(1)), float(m.group(3))
    if seconds is None:
        raise RuntimeError(f"no batch summary in filings' output: {p.stderr[-2000:]}")
    row = next((l for l in p.stdout.splitlines() if l.startswith("| constrained |")), "")
    cells = [c.strip() for c in row.strip("|").split("|")]
    figures = {l.split(":")[0]: l.split(":", 1)[1].strip()
               for l in p.stdout.splitlines() if re.match(r"^(mean batch|decode tokens/s):", l)}
    return {"seconds": seconds, "docs": docs, "valid": cells[2] if len(cells) > 3 else "?",
            "correct": cells[3] if len(cells) > 3 else "?", "figures": figures}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(server: Path, gguf: Path, parallel: int, threads: int, ctx: int, log_path: Path):
    port = free_port()
    cmd = [str(server), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port),
           "--parallel", str(parallel), "-c", str(ctx * parallel), "-t", str(threads),
           "--cont-batching", "--no-webui"]
    log("$ " + shlex.join(cmd))
    out = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.time() + 300
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama-server exited ({proc.returncode}); see {log_path}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc, port, cmd
        except OSError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise RuntimeError("llama-server did not become healthy in 300 s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llama-server", type=Path, required=True)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b", choices=sorted(MODELS))
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=4242)
    ap.add_argument("--parallel", default="1,4,8")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=2048, help="context per slot for llama-server")
    ap.add_argument("--server-timeout", type=int, default=3600,
                    help="seconds a request to llama-server may take before the runner abandons"
                    " and retries it (with the default 120 s, 8 slots prefilling 650-token"
                    " prompts on 2 cores time out, are cancelled and resent, and never finish)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/contract-throughput"))
    ap.add_argument("--filings", type=Path, help="a built filings binary (else cargo builds it)")
    ap.add_argument("--no-write", action="store_true", help="print, do not touch benchmarks.md")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    gguf = cache_dir() / "models" / MODELS[args.model]
    filings = args.filings
    if filings is None:
        run(["cargo", "build", "--release", "-p", "examples", "--bin", "filings"], check=True)
        filings = target_dir() / "release" / "filings"
    docs = args.work / "docs.jsonl"
    run([str(filings), "--docs", str(args.docs), "--seed", str(args.seed),
         "--write-docs", str(docs)], check=True)
    if not gguf.exists():
        # The first local run fetches the catalogue model.
        filings_run(filings, ["--mode", "constrained", "--input", str(docs), "--model",
                              args.model, "--concurrency", "1", "--docs", "1"])
    load_before = subprocess.run(["uptime"], text=True, capture_output=True).stdout.strip()
    results = []
    for n in [int(x) for x in args.parallel.split(",")]:
        common = ["--mode", "constrained", "--input", str(docs), "--concurrency", str(n)]
        local = filings_run(filings, [*common, "--model", str(gguf),
                                      "--output", str(args.work / f"local-{n}.jsonl")])
        proc, port, server_cmd = serve(args.llama_server, gguf, n, args.threads, args.ctx,
                                       args.work / f"server-{n}.log")
        try:
            server = filings_run(filings, [
                *common, "--backend", "openai", "--base-url", f"http://127.0.0.1:{port}/v1",
                "--model-name", args.model, "--server-mode", "json_object_schema",
                "--timeout", str(args.server_timeout),
                "--output", str(args.work / f"server-{n}.jsonl")])
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        results.append({"n": n, "local": local, "server": server,
                        "server_cmd": shlex.join(server_cmd)})
        log(f"N={n}: local {local['docs'] / local['seconds']:.3f} docs/s, "
            f"llama.cpp {server['docs'] / server['seconds']:.3f} docs/s")
    load_after = subprocess.run(["uptime"], text=True, capture_output=True).stdout.strip()

    md = [
        START,
        "## Throughput: batched local decoding against llama.cpp's server",
        "",
        "Written by `scripts/throughput.py` (do not edit by hand; rerun it). Both sides in the "
        "same run, on this machine.",
        "",
        f"- date: {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- command: `python3 scripts/throughput.py {shlex.join(sys.argv[1:])}`",
        f"- model: `{gguf.name}`; {args.docs} releases (seed {args.seed}), mode `constrained`"
        " (contract `ReleaseGuidance`), greedy, at most 160 new tokens",
        f"- llama.cpp: `{results[0]['server_cmd'].replace(str(gguf), 'MODEL') if results else ''}`"
        " (N slots, continuous batching), asked through the same batch runner"
        f" (`--backend openai --server-mode json_object_schema --timeout {args.server_timeout}`)",
        f"- load before: `{load_before}`",
        f"- load after: `{load_after}`",
        "",
        "| documents in flight (N) | local docs/s | llama.cpp docs/s | local / llama.cpp |"
        " local valid, correct | llama.cpp valid, correct | local mean batch |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lo, sv = r["local"], r["server"]
        a, b = lo["docs"] / lo["seconds"], sv["docs"] / sv["seconds"]
        md.append(f"| {r['n']} | {a:.3f} | {b:.3f} | {a / b:.2f}x | {lo['valid']}, "
                  f"{lo['correct']} | {sv['valid']}, {sv['correct']} | "
                  f"{lo['figures'].get('mean batch', '1')} |")
    md += ["", END]
    text = "\n".join(md) + "\n"
    print(text)
    if not args.no_write:
        path = ROOT / "docs" / "benchmarks.md"
        old = path.read_text()
        if START in old and END in old:
            head, rest = old.split(START, 1)
            new = head + text.rstrip("\n") + rest.split(END, 1)[1]
        else:
            new = old.rstrip("\n") + "\n\n" + text
        path.write_text(new)
        log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
