#!/usr/bin/env python3
"""Figures against the peers, measured on this machine in one run, written to docs/benchmarks.md.

    python3 -m venv /path/to/venv
    /path/to/venv/bin/python scripts/peers.py --install        # pip installs the pinned peers
    /path/to/venv/bin/python scripts/peers.py --skip-e2e       # the fast parts only
    /path/to/venv/bin/python scripts/peers.py --only validation  # one part; its subsection is replaced

Four comparisons, each against the peers a user would otherwise reach for:

1. validation: `Guidance::from_json` (Rust) vs Pydantic 2 `model_validate_json` and msgspec
   (`msgspec.json.Decoder` into a `msgspec.Struct`), the same contract and the same 10,000
   documents (written by contract-core's `from_json` bench), the same verdicts compared; then
   again with each refused document's errors read (kind, location, message), as the output
   ladder reads them;
2. output recovery: the ladder (`contract_core::parse::recover`) vs the `json-repair` package on
   the json-repair test suites in testdata/json-repair (or the folder `--data` names): recovered,
   and recovered correctly;
3. tokens: `signature()` vs the compact JSON Schema, with the default model's tokenizer;
4. end to end: the local backend (`filings --mode constrained,rules`) vs llama.cpp
   (llama-cpp-python, `response_format` json_object + schema, and free) on the same GGUF, the
   same messages and the same documents, scored by the same code (`filings --replies`).

The Rust side is `examples/src/bin/peers.rs` and `examples/src/bin/filings.rs`; this script
builds them with cargo (release), runs the peers in this interpreter, and replaces the text
between `<!-- peers:start -->` and `<!-- peers:end -->` in docs/benchmarks.md. A peer that is
not installed, or a part that fails, is reported as such in the output and the section.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The external data sets (`--data`): the repository's copy unless another folder is named.
DATA = ROOT / "testdata"
REQUIREMENTS = ROOT / "scripts" / "peers_requirements.txt"
START, END = "<!-- peers:start -->", "<!-- peers:end -->"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    log("$ " + shlex.join(cmd))
    return subprocess.run(cmd, cwd=ROOT, text=True, check=True, **kw)


def capture(cmd: list[str], **kw) -> str:
    return run(cmd, stdout=subprocess.PIPE, **kw).stdout


class Skip(Exception):
    """A part that cannot run here; its message goes into the report."""


# ---------------------------------------------------------------------------------------------
# Setup: peers from PyPI, the Rust binaries, the machine.


def install() -> None:
    """Pip-installs the pinned peers into this interpreter; llama-cpp-python (a long source
    build) last and on its own, so a failed build leaves the other peers installed."""
    pins = [l.strip() for l in REQUIREMENTS.read_text().splitlines()]
    pins = [p for p in pins if p and not p.startswith("#")]
    quick = [p for p in pins if not p.startswith("llama-cpp-python")]
    slow = [p for p in pins if p.startswith("llama-cpp-python")]
    run([sys.executable, "-m", "pip", "install", *quick])
    if slow:
        env = dict(os.environ)
        env.setdefault("CMAKE_ARGS", "-DGGML_NATIVE=ON")
        try:
            run([sys.executable, "-m", "pip", "install", *slow], env=env)
        except subprocess.CalledProcessError as e:
            log(f"llama-cpp-python did not install ({e}); the end-to-end part will say so")


def version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def target_dir() -> Path:
    meta = json.loads(capture(["cargo", "metadata", "--format-version", "1", "--no-deps"]))
    return Path(meta["target_directory"])


def build(filings: bool) -> tuple[Path, Path]:
    """The release binaries; `filings` only when the end-to-end part needs it."""
    bins = ["--bin", "peers"] + (["--bin", "filings"] if filings else [])
    run(["cargo", "build", "--release", "-p", "examples", *bins])
    release = target_dir() / "release"
    return release / "peers", release / "filings"


def machine() -> dict:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = subprocess.run(["uptime"], text=True, capture_output=True).stdout.strip()
    except OSError:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    try:
        rustc = subprocess.run(["rustc", "--version"], text=True, capture_output=True).stdout.strip()
    except OSError:
        rustc = "?"
    return {"cpu": cpu, "cores": os.cpu_count(), "load": load, "rustc": rustc}


# ---------------------------------------------------------------------------------------------
# 1. Validation throughput.


def pydantic_guidance(exact: bool):
    """`examples::Guidance` in Pydantic 2: the same ranges, nullability, unknown fields refused,
    amounts not read from strings, and the two cross-field rules as a model validator.

    Integers: Pydantic's strict `int` refuses `3.0`, which the contract accepts (an integral
    number), and its lax `int` reads `"3"`, which the contract refuses. `exact=False` uses the
    lax `int` (the same verdicts on the bench's documents, which hold no numeric strings);
    `exact=True` adds a before-validator that refuses strings, the exact contract."""
    from typing import Annotated, Optional

    from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

    def no_string(v):
        if isinstance(v, str):
            raise ValueError("a number, not a string")
        return v

    ints = [BeforeValidator(no_string)] if exact else []
    Quarter = Annotated[(int, Field(ge=1, le=4), *ints)]
    Year = Annotated[(int, Field(ge=2018, le=2030), *ints)]
    Millions = Annotated[float, Field(gt=0, strict=True)]

    class Guidance(BaseModel):
        """Next-quarter revenue guidance stated in an earnings release."""

        model_config = ConfigDict(extra="forbid")
        quarter: Optional[Quarter]
        year: Optional[Year]
        low: Optional[Millions]
        high: Optional[Millions]

        @model_validator(mode="after")
        def rules(self):
            if (self.low is None) != (self.high is None):
                raise ValueError("both_or_neither(low, high)")
            if self.low is not None and self.high is not None and not self.low <= self.high:
                raise ValueError("low <= high")
            return self

    return Guidance


def msgspec_guidance():
    """`examples::Guidance` as a `msgspec.Struct`: the same ranges, nullability, unknown fields
    refused (`forbid_unknown_fields`), every field required, amounts not read from strings
    (msgspec's strict decoding), and the two cross-field rules in `__post_init__` (an exception
    there is a `ValidationError`).

    Integers: msgspec's `int` refuses `3.0`, which the contract accepts (an integral number), and
    its lax mode (`strict=False`) would read `"3"`, which the contract refuses. So an integer
    field is `int | float` with its range on both, and `__post_init__` refuses a float with a
    fraction and turns an integral one into an `int`: the exact contract.

    One difference outside the bench's documents: msgspec keeps the last of a key written twice,
    where the contract refuses it (so does Pydantic's model)."""
    from typing import Annotated, Optional, Union

    import msgspec
    from msgspec import Meta

    def integer(lo: int, hi: int):
        return Union[Annotated[int, Meta(ge=lo, le=hi)], Annotated[float, Meta(ge=lo, le=hi)]]

    def integral(name: str, v: float) -> int:
        if not v.is_integer():
            raise ValueError(f"`{name}` must be an integer")
        return int(v)

    Millions = Annotated[float, Meta(gt=0)]

    class Rules(msgspec.Struct):
        def __post_init__(self):
            if type(self.quarter) is float:
                self.quarter = integral("quarter", self.quarter)
            if type(self.year) is float:
                self.year = integral("year", self.year)
            if (self.low is None) != (self.high is None):
                raise ValueError("both_or_neither(low, high)")
            if self.low is not None and not self.low <= self.high:
                raise ValueError("low <= high")

    # `defstruct`, not a class body: this module's annotations are strings (`from __future__`)
    # that msgspec would resolve in the module's namespace, not in this function's.
    Guidance = msgspec.defstruct(
        "Guidance",
        [
            ("quarter", Optional[integer(1, 4)]),
            ("year", Optional[integer(2018, 2030)]),
            ("low", Optional[Millions]),
            ("high", Optional[Millions]),
        ],
        bases=(Rules,),
        forbid_unknown_fields=True,
    )
    return Guidance


class PyValidator:
    """One Python validator of the comparison: a function that raises `errors` on a refused
    document, and `read`, which reads what such an error says (each error's kind, location and
    message), as the Rust side reads each violation's kind, pointer and message."""

    def __init__(self, library: str, version: str, name: str, validate, errors, read):
        self.library, self.version, self.name = library, version, name
        self.validate, self.errors, self.read = validate, errors, read


def read_pydantic(e) -> list:
    """A Pydantic `ValidationError`'s errors: kind, location and message of each (its messages
    are formatted when read)."""
    return [(d["type"], d["loc"], d["msg"]) for d in e.errors(include_url=False, include_context=False, include_input=False)]


def python_validators() -> tuple[list[PyValidator], list[str]]:
    """The peers' validators of the same contract, and a note for each peer not installed."""
    found, missing = [], []
    if version("pydantic") is not None:
        from pydantic import ValidationError

        pv = f"{version('pydantic')} (pydantic-core {version('pydantic-core')})"
        for exact, name in ((False, "lax int"), (True, "strings refused by a before-validator")):
            model = pydantic_guidance(exact)
            found.append(PyValidator("Pydantic", pv, f"`model_validate_json`, {name}", model.model_validate_json, ValidationError, read_pydantic))
    else:
        missing.append("Pydantic is not installed (run with --install)")
    if version("msgspec") is not None:
        import msgspec

        decoder = msgspec.json.Decoder(msgspec_guidance())
        # A `ValidationError` is a `DecodeError`, as Pydantic's `ValidationError` covers bad JSON.
        found.append(PyValidator("msgspec", version("msgspec"), "`json.Decoder(Guidance).decode`, integers as int or float with an integral check",
                                 decoder.decode, msgspec.DecodeError, str))
    else:
        missing.append("msgspec is not installed (run with --install)")
    return found, missing


def bench_docs(work: Path) -> Path:
    """The 10,000 documents of contract-core's `from_json` bench (its generator, its seed)."""
    path = work / "guidance_docs.jsonl"
    env = dict(os.environ, BENCH_DOCS_OUT=str(path))
    run(
        ["cargo", "bench", "-p", "contract-core", "--bench", "from_json", "--", "Guidance::from_json"],
        env=env,
        stdout=sys.stderr,
    )
    if not path.is_file():
        raise Skip(f"the bench wrote no documents to {path}")
    return path


def time_python(v: PyValidator, lines: list[str], rounds: int, read: bool = False) -> tuple[float, list[bool]]:
    """The fastest of `rounds` rounds over `lines`, and each document's verdict; with `read`,
    each refused document's errors are read too (and no verdicts are kept: the run without
    `read` takes them)."""
    validate, errors, read_error = v.validate, v.errors, v.read
    verdicts = []
    for line in lines if not read else []:
        try:
            validate(line)
            verdicts.append(True)
        except errors:
            verdicts.append(False)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        if read:
            for line in lines:
                try:
                    validate(line)
                except errors as e:
                    read_error(e)
        else:
            for line in lines:
                try:
                    validate(line)
                except errors:
                    pass
        best = min(best, time.perf_counter() - start)
    return best, verdicts


def validation(peers: Path, docs: Path, rounds: int, repeats: int, work: Path) -> dict:
    """Rust and each Python validator take turns `repeats` times (each turn the fastest of
    `rounds` rounds), so a change in the machine's load does not fall on one side only; the
    fastest turn counts."""
    verdicts = work / "guidance_verdicts.txt"
    lines = [l for l in docs.read_text().splitlines() if l.strip()]
    validators, missing = python_validators()
    rust, rust_read, best, best_read, py_ok = None, None, {}, {}, {}
    for _ in range(max(repeats, 1)):
        turn = json.loads(
            capture([str(peers), "validate", str(docs), "--rounds", str(rounds), "--verdicts", str(verdicts)])
        )
        if rust is None or turn["best_seconds"] < rust["best_seconds"]:
            rust = turn
        turn = json.loads(capture([str(peers), "validate", str(docs), "--rounds", str(rounds), "--read-violations"]))
        if rust_read is None or turn["best_seconds"] < rust_read["best_seconds"]:
            rust_read = turn
        for i, v in enumerate(validators):
            seconds, py_ok[i] = time_python(v, lines, rounds)
            best[i] = min(best.get(i, float("inf")), seconds)
            seconds, _ = time_python(v, lines, rounds, read=True)
            best_read[i] = min(best_read.get(i, float("inf")), seconds)
    rust_ok = [l.strip() == "true" for l in verdicts.read_text().splitlines()]
    out = {"docs": len(lines), "rounds": rounds, "repeats": max(repeats, 1), "rust": rust, "rust_read": rust_read,
           "python": [], "missing": missing}
    for i, v in enumerate(validators):
        disagree = [j for j, (a, b) in enumerate(zip(rust_ok, py_ok[i])) if a != b]
        out["python"].append({
            "library": v.library,
            "version": v.version,
            "validator": v.name,
            "accepted": sum(py_ok[i]),
            "best_seconds": best[i],
            "docs_per_s": len(lines) / best[i],
            "ns_per_doc": best[i] * 1e9 / len(lines),
            "read_best_seconds": best_read[i],
            "read_docs_per_s": len(lines) / best_read[i],
            "read_ns_per_doc": best_read[i] * 1e9 / len(lines),
            "agree": len(lines) - len(disagree),
            "disagreements": [
                {"line": j + 1, "doc": lines[j], "rust": rust_ok[j], "python": py_ok[i][j]}
                for j in disagree[:5]
            ],
        })
    return out


# ---------------------------------------------------------------------------------------------
# 2. Output recovery.


def same_json(a, b) -> bool:
    """Equality of JSON values as serde_json sees it: 1 and 1.0 differ, true is not 1, object
    key order does not matter."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


MISSING = object()


def suite_cases(name: str, data: Path) -> list[dict]:
    """`{input, expected, kwargs}` per case of `data`/json-repair, expected read as
    tests/tests/ladder_data.rs reads it (MISSING when there is none: an error case, or an
    unparsable expected text)."""
    cases = []
    if name == "python":
        for c in json.loads((data / "json-repair" / "json_repair_py_cases.json").read_text()):
            expected = MISSING
            if c.get("expected_value") is not None:
                expected = c["expected_value"]
            elif c.get("expected_json") is not None:
                try:
                    expected = json.loads(c["expected_json"])
                except ValueError:
                    pass
            cases.append({"input": c.get("input") or "", "expected": expected, "kwargs": c.get("kwargs") or {}, "error": False})
    else:
        for c in json.loads((data / "json-repair" / "jsonrepair_js_cases.json").read_text()):
            expected = MISSING
            if isinstance(c.get("expected"), str):
                try:
                    expected = json.loads(c["expected"])
                except ValueError:
                    pass
            cases.append({"input": c.get("input") or "", "expected": expected, "kwargs": {}, "error": c.get("kind") == "error"})
    return cases


def json_repair_value(text: str, kwargs: dict):
    """What json_repair recovers from `text` as a value (MISSING when it gives up or raises).
    The case's own options are kept (the Python suite's tests set some), values are asked for."""
    import json_repair

    options = {k: v for k, v in kwargs.items() if k in ("skip_json_loads", "stream_stable")}
    try:
        value = json_repair.repair_json(text, return_objects=True, **options)
    except Exception:  # noqa: BLE001 - any failure is "not recovered"
        return MISSING
    return value


def shown_path(path: Path) -> str:
    """`path` as the report names it: relative to the repository when inside it."""
    path = path.resolve()
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def recovery(peers: Path, work: Path, data: Path) -> dict:
    have_repair = version("json-repair") is not None
    suites = {}
    for suite in ("python", "javascript"):
        cases = suite_cases(suite, data)
        inputs = work / f"ladder_{suite}.jsonl"
        inputs.write_text("".join(json.dumps({"input": c["input"]}) + "\n" for c in cases))
        results = [json.loads(l) for l in capture([str(peers), "ladder", str(inputs)]).splitlines() if l.strip()]
        if len(results) != len(cases):
            raise RuntimeError(f"peers ladder gave {len(results)} results for {len(cases)} cases")
        t = {
            "cases": len(cases),
            "object_expected": 0,
            "levels": {"strict": 0, "extracted": 0, "repaired": 0, "invalid": 0},
            "ladder_recovered": 0,
            "ladder_correct": 0,
            "repair_object": 0,
            "repair_any": 0,
            "repair_correct": 0,
            "repair_correct_any": 0,
            "any_expected": 0,
            "errors": 0,
            "errors_ladder": 0,
            "errors_repair": 0,
            "ladder_seconds": None,
            "repair_seconds": None,
        }
        repaired = []
        if have_repair:
            start = time.perf_counter()
            repaired = [json_repair_value(c["input"], c["kwargs"]) for c in cases]
            t["repair_seconds"] = time.perf_counter() - start
        for i, (case, res) in enumerate(zip(cases, results)):
            t["levels"][res["level"]] += 1
            recovered = res["level"] != "invalid"
            t["ladder_recovered"] += recovered
            t["errors"] += case["error"]
            t["errors_ladder"] += case["error"] and recovered
            expected = case["expected"]
            object_expected = isinstance(expected, dict)
            t["object_expected"] += object_expected
            t["any_expected"] += expected is not MISSING
            if object_expected and recovered and same_json(res["json"], expected):
                t["ladder_correct"] += 1
            if have_repair:
                value = repaired[i]
                # json_repair returns "" when it recovers nothing.
                t["repair_any"] += value is not MISSING and value != ""
                t["errors_repair"] += case["error"] and value is not MISSING and value != ""
                t["repair_object"] += isinstance(value, dict)
                if object_expected and isinstance(value, dict) and same_json(value, expected):
                    t["repair_correct"] += 1
                if expected is not MISSING and value is not MISSING and same_json(value, expected):
                    t["repair_correct_any"] += 1
        suites[suite] = t
    return {
        "suites": suites,
        "data": shown_path(data / "json-repair"),
        "json_repair": version("json-repair"),
        "missing": None if have_repair else "json-repair is not installed (run with --install)",
    }


# ---------------------------------------------------------------------------------------------
# 3. Tokens.


def tokens(peers: Path) -> dict:
    return json.loads(capture([str(peers), "tokens"]))


# ---------------------------------------------------------------------------------------------
# 4. End to end.


def summarize(label: str, rows: list[dict]) -> dict:
    """As `examples::filings::study::summarize`: valid, correct, levels, mean seconds."""
    rows = [r for r in rows if r.get("mode") == label]
    s = {"mode": label, "docs": len(rows), "valid": 0, "correct": 0, "scored": 0, "seconds": 0.0}
    levels = {"strict": 0, "extracted": 0, "repaired": 0, "invalid": 0}
    for r in rows:
        s["valid"] += r.get("valid") is True
        if isinstance(r.get("correct"), bool):
            s["scored"] += 1
            s["correct"] += r["correct"]
        levels[r.get("level") if r.get("level") in levels else "invalid"] += 1
        s["seconds"] += float(r.get("seconds") or 0.0)
    if rows:
        s["seconds"] /= len(rows)
    s["levels"] = levels
    return s


def read_rows(path: Path) -> list[dict]:
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def llama_replies(model_path: str, prompts: dict, schema, out: Path, threads: int, max_tokens: int) -> dict:
    # llama.cpp's OpenMP threads spin while they wait; on a machine shared with other work that
    # made it 2-4x slower here. Read when the library loads, so set before the import.
    os.environ.setdefault("OMP_WAIT_POLICY", ARGS.omp_wait_policy)
    from llama_cpp import Llama

    start = time.perf_counter()
    llm = Llama(model_path=model_path, n_threads=threads, n_ctx=2048, verbose=False)
    load = time.perf_counter() - start
    prompt_tokens, finish, same_prompt = [], {}, 0
    with out.open("w") as f:
        for doc in prompts["docs"]:
            kw = {}
            if schema is not None:
                kw["response_format"] = {"type": "json_object", "schema": schema}
            t0 = time.perf_counter()
            reply = llm.create_chat_completion(
                messages=doc["messages"], temperature=0, max_tokens=max_tokens, **kw
            )
            seconds = time.perf_counter() - t0
            choice = reply["choices"][0]
            raw = choice["message"].get("content") or ""
            prompt_tokens.append(reply.get("usage", {}).get("prompt_tokens", 0))
            same_prompt += prompt_tokens[-1] == doc.get("prompt_tokens")
            finish[choice.get("finish_reason")] = finish.get(choice.get("finish_reason"), 0) + 1
            f.write(json.dumps({"id": doc["id"], "raw": raw, "seconds": seconds}) + "\n")
            f.flush()
            log(f"  {doc['id']}: {seconds:.1f} s, {reply.get('usage', {}).get('completion_tokens')} tokens")
    return {
        "load_seconds": load,
        "mean_prompt_tokens": sum(prompt_tokens) / max(len(prompt_tokens), 1),
        "finish_reasons": finish,
        "same_prompt_tokens": same_prompt,
        "local_prompt_tokens": sum(d.get("prompt_tokens", 0) for d in prompts["docs"]) / max(len(prompts["docs"]), 1),
    }


def end_to_end(peers: Path, filings: Path, work: Path, args) -> dict:
    docs = work / "filings_docs.jsonl"
    run([str(filings), "--docs", str(args.docs), "--write-docs", str(docs)])
    prompts = json.loads(capture([str(peers), "prompts", str(docs)]))
    model_path = prompts["model"]
    out = {"docs": args.docs, "model": model_path, "weights": args.weights, "engines": [], "notes": []}

    local_rows = work / "local_rows.jsonl"
    run(
        [str(filings), "--docs", str(args.docs), "--mode", "constrained,rules", "--weights", args.weights,
         "--max-tokens", str(args.max_tokens), "--output", str(local_rows)],
        stdout=sys.stderr,
    )
    rows = read_rows(local_rows)
    for mode in ("constrained", "rules"):
        s = summarize(mode, rows)
        s["engine"] = f"contract local ({mode})"
        out["engines"].append(s)

    if version("llama-cpp-python") is None:
        out["llama_missing"] = "llama-cpp-python is not installed (run with --install; it builds llama.cpp from source)"
        return out
    out["llama_cpp_python"] = version("llama-cpp-python")
    runs = [("llama.cpp schema", prompts["strict_schema"])]
    if not args.no_free:
        runs.append(("llama.cpp free", None))
    for label, schema in runs:
        replies = work / f"replies_{label.replace(' ', '_').replace('.', '')}.jsonl"
        scored = replies.with_suffix(".scored.jsonl")
        try:
            info = llama_replies(model_path, prompts, schema, replies, args.threads, args.max_tokens)
        except Exception as e:  # noqa: BLE001 - reported, the other parts stand
            out["notes"].append(f"{label}: failed: {e!r}")
            log(traceback.format_exc())
            continue
        run([str(filings), "--docs", str(args.docs), "--replies", str(replies), "--label", label,
             "--output", str(scored)], stdout=sys.stderr)
        s = summarize(label, read_rows(scored))
        s["engine"] = label
        s.update(info)
        out["engines"].append(s)
    return out


# ---------------------------------------------------------------------------------------------
# Report.


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


SECTIONS = {
    "validation": "### Validation throughput",
    "recovery": "### Output recovery",
    "tokens": "### Prompt tokens: signature vs JSON Schema",
    "e2e": "### End to end: local backend vs llama.cpp",
}

INTRO = (
    "Written by `scripts/peers.py` (do not edit by hand; rerun it). Every figure below was "
    "measured on the same machine, and the figures of one subsection in the same run; a "
    "subsection rerun on its own (`--only`) gives its own date, command and load.\n"
)


def report(meta: dict, parts: dict) -> str:
    """The peers section; with `--only`, just the subsections of the parts that ran, each with
    the run's date, command and load (`write_section` puts them in place of the old ones)."""
    md = []
    only = meta.get("only")
    if not only:
        md.append("## Against the peers\n")
        md.append(INTRO)
        md.append(f"- date: {meta['date']}")
        md.append(f"- command: `{meta['command']}`")
        md.append(f"- machine: {meta['cpu']}, {meta['cores']} cores; {meta['rustc']}")
        md.append(f"- load before: `{meta['load_before']}`")
        md.append(f"- load after: `{meta['load_after']}`")
        md.append(f"- peers: {meta['peers']}\n")

    def section(name: str) -> bool:
        """Writes the heading of part `name` (and, with `--only`, the run it comes from);
        false when the part is not in this report."""
        if only and name not in only:
            return False
        md.append(SECTIONS[name] + "\n")
        if only:
            md.append(
                f"Rerun on its own: {meta['date']}, `{meta['command']}`; {meta['cpu']}, "
                f"{meta['cores']} cores; {meta['rustc']}; load before `{meta['load_before']}`, "
                f"after `{meta['load_after']}`; {meta['peers']}.\n"
            )
        return True

    v = parts.get("validation")
    if not section("validation"):
        pass
    elif isinstance(v, str):
        md.append(f"Not measured: {v}\n")
    elif v:
        r = v["rust"]
        md.append(
            f"The same {v['docs']:,} `Guidance` documents (about 60% valid; contract-core's "
            f"`from_json` bench writes them), one thread, fastest of {v['rounds']} rounds in each of "
            f"{v['repeats']} turns taken alternately by Rust and each Python validator, the fastest "
            "turn counting (the machine is shared with other work, so one turn alone can be far "
            "off). Each Python model states the same contract: ranges, nullable fields, every "
            "field required, unknown fields refused, amounts not read from strings, `low <= high` "
            "and `both_or_neither(low, high)` (Pydantic: a `model_validator`; msgspec: "
            "`__post_init__`; a `msgspec.json.Decoder` made once). Integers: the contract accepts "
            "`3.0` and refuses `\"3\"`. Pydantic comes in two variants: its lax `int` reads `\"3\"` "
            "(the documents hold no such case) and its strict `int` refuses `3.0`, so the exact "
            "contract needs a before-validator that refuses strings. msgspec's `int` refuses `3.0` "
            "and its lax mode reads `\"3\"`, so an integer field is `int | float` and "
            "`__post_init__` refuses a fraction.\n"
        )

        def table(header: str, rust: dict, key: str) -> None:
            """Rust's row, then each Python validator's figures under `key` ("" for the verdicts,
            "read_" with the violations read), with the accepted count for the verdicts."""
            accepted = lambda n: f" {n:,} |" if not key else ""
            md.append(f"| {header} |{' accepted |' if not key else ''} docs/s | ns/doc |")
            md.append("|---|---|---|" + ("---|" if not key else ""))
            md.append(
                f"| `Guidance::from_json` (Rust) |{accepted(rust['accepted'])} "
                f"{fmt_rate(rust['docs_per_s'])} | {rust['ns_per_doc']:.0f} |"
            )
            for p in v["python"]:
                md.append(
                    f"| {p['library']} {p['version']} {p['validator']} |{accepted(p['accepted'])} "
                    f"{fmt_rate(p[key + 'docs_per_s'])} | {p[key + 'ns_per_doc']:.0f} |"
                )
            md.append("")

        table("validator", r, "")
        for p in v["python"]:
            md.append(
                f"- vs {p['library']} ({p['validator']}): `from_json` has "
                f"{r['docs_per_s'] / p['docs_per_s']:.1f}x the throughput; the same verdict on "
                f"{p['agree']:,} of {v['docs']:,} documents."
            )
            for d in p["disagreements"]:
                md.append(f"  - line {d['line']}: Rust {d['rust']}, {p['library']} {d['python']}: `{d['doc']}`")
        rr = v.get("rust_read")
        if rr:
            md.append(
                "\nThe same runs, with each refused document's violations also read (each one's kind, "
                "pointer and message, as the output ladder reads them to write a retry; Pydantic: "
                "`errors(include_url=False, include_context=False, include_input=False)` and each "
                "error's type, location and message, which Pydantic formats when they are read; "
                "msgspec: `str` of its error, written when it is raised). For information: issue 17's "
                "goal 3 is measured on the verdicts alone, the table above.\n"
            )
            table("validator, violations read", rr, "read_")
            for p in v["python"]:
                md.append(
                    f"- vs {p['library']} ({p['validator']}), violations read: `from_json` has "
                    f"{rr['docs_per_s'] / p['read_docs_per_s']:.1f}x the throughput."
                )
        for m in v["missing"]:
            md.append(f"\nNot measured: {m}")
        md.append("")

    rec = parts.get("recovery")
    if not section("recovery"):
        pass
    elif isinstance(rec, str):
        md.append(f"Not measured: {rec}\n")
    elif rec:
        md.append(
            f"The json-repair test suites in `{rec['data']}` (inputs with the expected "
            "repair or an expected error): the ladder (`contract_core::parse::recover`, which "
            f"returns one JSON object or nothing) vs `json_repair` {rec['json_repair'] or '(not installed)'} "
            "(`repair_json(.., return_objects=True)` with the case's own options). *Recovered*: an "
            "object came back; *correct*: it equals the expected value (as JSON values: 1 and 1.0 "
            "differ), counted over the cases whose expected value is an object. The ladder "
            "repairs syntax only and refuses what a contract should not guess (a lone string, a "
            "truncated key, text that is not an object), so it recovers fewer cases by design; "
            "json_repair is a maximal repairer, and its suites are its own tests.\n"
        )
        md.append(
            "| suite | cases | object expected | ladder: strict / extracted / repaired / invalid | "
            "ladder recovered | ladder correct | json_repair recovered (object / any value) | json_repair correct |"
        )
        md.append("|---|---|---|---|---|---|---|---|")
        names = {"python": "json_repair (Python) tests", "javascript": "jsonrepair (JS) tests"}
        for suite, t in rec["suites"].items():
            lv = t["levels"]
            jr_rec = f"{t['repair_object']} / {t['repair_any']}" if rec["json_repair"] else "n/a"
            jr_ok = f"{t['repair_correct']}/{t['object_expected']}" if rec["json_repair"] else "n/a"
            md.append(
                f"| {names[suite]} | {t['cases']} | {t['object_expected']} | {lv['strict']} / {lv['extracted']} / "
                f"{lv['repaired']} / {lv['invalid']} | {t['ladder_recovered']} | "
                f"{t['ladder_correct']}/{t['object_expected']} | {jr_rec} | {jr_ok} |"
            )
        if rec["json_repair"]:
            md.append("")
            for suite, t in rec["suites"].items():
                md.append(
                    f"- {names[suite]}: json_repair's value equals the expected one on "
                    f"{t['repair_correct_any']}/{t['any_expected']} cases with any expected value "
                    "(arrays, strings and numbers included)."
                )
                if t["errors"]:
                    md.append(
                        f"  On its {t['errors']} cases where the reference implementation throws, the "
                        f"ladder recovered an object from {t['errors_ladder']} and json_repair returned "
                        f"a value for {t['errors_repair']}."
                    )
        else:
            md.append(f"\njson_repair not measured: {rec['missing']}")
        md.append("")

    tk = parts.get("tokens")
    if not section("tokens"):
        pass
    elif isinstance(tk, str):
        md.append(f"Not measured: {tk}\n")
    elif tk:
        md.append(
            f"Tokens by the tokenizer of `{Path(tk['model']).name}` (built from the GGUF, as "
            "llama.cpp builds it). Compact = `serde_json::to_string`, no whitespace.\n"
        )
        md.append("| contract | signature | compact JSON Schema | compact strict schema | schema / signature |")
        md.append("|---|---|---|---|---|")
        for c in tk["contracts"]:
            strict = c["strict_schema_tokens"] if c["strict_schema_tokens"] is not None else "none"
            md.append(
                f"| {c['contract']} | {c['signature_tokens']} | {c['schema_tokens']} | {strict} | "
                f"{c['schema_tokens'] / c['signature_tokens']:.1f}x |"
            )
        md.append("")

    e = parts.get("e2e")
    if not section("e2e"):
        pass
    elif isinstance(e, str):
        md.append(f"Not measured: {e}\n")
    elif e:
        md.append(
            f"The filings study's {e['docs']} generated earnings releases, contract "
            f"`ReleaseGuidance`, the same GGUF (`{Path(e['model']).name}`), the same chat "
            "messages (`peers prompts`: what the Extractor sends), greedy decoding, at most "
            f"{ARGS.max_tokens} new tokens, {ARGS.threads} threads for llama.cpp "
            f"(`OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', ARGS.omp_wait_policy)}`). Every reply "
            "is read by the same ladder (no repairs) and scored by the same code "
            "(`filings --replies`): *valid* = fills the contract, cross-field rules included; "
            "*correct* = the normalised guidance equals the truth. Seconds per document exclude "
            f"loading the model. The local backend holds its weights as `--weights {e['weights']}` "
            "(`auto`: on the CPU, the fast forward pass on the 4-bit weights as stored); llama.cpp computes on the same Q4_1 weights. "
            "`llama.cpp schema` sends `response_format: {type: json_object, schema: strict_schema()}` "
            "(its grammar covers the schema, not the cross-field rule); `llama.cpp free` sends "
            "no format.\n"
        )
        md.append("| engine | valid | correct | strict / extracted / repaired / invalid | s/doc |")
        md.append("|---|---|---|---|---|")
        for s in e["engines"]:
            lv = s["levels"]
            md.append(
                f"| {s['engine']} | {s['valid']}/{s['docs']} | {s['correct']}/{s['scored']} | "
                f"{lv['strict']} / {lv['extracted']} / {lv['repaired']} / {lv['invalid']} | {s['seconds']:.2f} |"
            )
        by = {s["engine"]: s for s in e["engines"]}
        md.append("")
        if "llama.cpp schema" in by and "contract local (rules)" in by:
            a, b = by["contract local (rules)"], by["llama.cpp schema"]
            if b["seconds"] > 0:
                md.append(
                    f"Seconds per document, local `rules` / llama.cpp schema: {a['seconds'] / b['seconds']:.2f}x."
                )
        for s in e["engines"]:
            if "load_seconds" in s:
                md.append(
                    f"- {s['engine']}: model loaded in {s['load_seconds']:.1f} s; "
                    f"{s['mean_prompt_tokens']:.1f} prompt tokens per document by llama.cpp's count, "
                    f"{s['local_prompt_tokens']:.1f} by the local backend's (the same count on "
                    f"{s['same_prompt_tokens']}/{s['docs']} documents); finish reasons {s['finish_reasons']}"
                )
        if e.get("llama_missing"):
            md.append(f"\nllama.cpp not measured: {e['llama_missing']}")
        for n in e["notes"]:
            md.append(f"- {n}")
        md.append("")
    return "\n".join(md).rstrip() + "\n"


def split_subsections(text: str) -> tuple[str, dict[str, str]]:
    """The text before the first `### ` heading, and each subsection by its heading line."""
    head, parts, current = [], {}, None
    for line in text.splitlines(keepends=True):
        if line.startswith("### "):
            current = line.rstrip("\n")
            parts[current] = ""
        if current is None:
            head.append(line)
        else:
            parts[current] += line
    return "".join(head), parts


def write_section(path: Path, text: str, only: list[str] | None = None) -> None:
    """Puts `text` between the markers of `path`; with `only`, `text` holds just those parts'
    subsections, which replace the old ones (the other subsections stay as they were)."""
    old = path.read_text() if path.is_file() else ""
    has_block = START in old and END in old and old.index(START) < old.index(END)
    if only and has_block:
        inner = old[old.index(START) + len(START) + 1: old.index(END)]
        head, parts = split_subsections(inner)
        head = "".join(INTRO if l.startswith("Written by `scripts/peers.py`") else l
                       for l in head.splitlines(keepends=True))
        _, new_parts = split_subsections(text)
        for heading, body in new_parts.items():
            parts[heading] = body if body.endswith("\n\n") else body.rstrip("\n") + "\n\n"
        text = head + "".join(parts[SECTIONS[name]] if SECTIONS[name] in parts else ""
                              for name in SECTIONS).rstrip("\n") + "\n"
    elif only:
        raise SystemExit(f"--only needs a peers section in {path} to put its subsections in; run without it first")
    block = f"{START}\n{text}{END}"
    if has_block:
        new = old[: old.index(START)] + block + old[old.index(END) + len(END):]
    elif old:
        new = old.rstrip() + "\n\n" + block + "\n"
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        new = f"# Benchmarks\n\n{block}\n"
    path.write_text(new)


ARGS = None


def main() -> int:
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--install", action="store_true", help="pip install scripts/peers_requirements.txt first")
    ap.add_argument("--skip-e2e", action="store_true", help="leave out the end-to-end comparison")
    ap.add_argument("--no-free", action="store_true", help="leave out llama.cpp without response_format")
    ap.add_argument("--docs", type=int, default=40, help="generated releases for the end-to-end part")
    ap.add_argument("--rounds", type=int, default=15, help="validation rounds (the fastest counts)")
    ap.add_argument("--repeats", type=int, default=3, help="validation turns, Rust and each Python validator alternating")
    ap.add_argument("--only", action="append", choices=list(SECTIONS),
                    help="run only this part (repeatable); its subsection replaces the old one in --output")
    ap.add_argument("--threads", type=int, default=2, help="llama.cpp threads")
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--omp-wait-policy", default="PASSIVE", help="OMP_WAIT_POLICY for llama.cpp (unless set)")
    ap.add_argument("--weights", default="auto", help="the local backend's --weights (auto, stored, f32, q8)")
    ap.add_argument("--validate-docs", type=Path, help="documents to validate (default: the bench's)")
    ap.add_argument("--output", type=Path, default=ROOT / "docs" / "benchmarks.md")
    ap.add_argument("--work", type=Path, help="scratch folder (default: <target>/peers)")
    ap.add_argument("--data", type=Path, default=DATA,
                    help="the external data sets, laid out as testdata/ (default: the repository's testdata/)")
    ARGS = args = ap.parse_args()
    if (not args.only or "recovery" in args.only) and not (args.data / "json-repair").is_dir():
        ap.error(f"--data: no json-repair folder in {args.data}")

    if args.install:
        install()
    meta = machine()
    meta["load_before"] = meta.pop("load")
    meta["date"] = dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    meta["command"] = shlex.join(["python3", "scripts/peers.py", *sys.argv[1:]])
    meta["peers"] = ", ".join(
        f"{d} {version(d) or 'not installed'}" for d in ("pydantic", "msgspec", "json-repair", "llama-cpp-python")
    ) + f"; Python {platform.python_version()}"

    only = args.only
    meta["only"] = only
    wanted = lambda name: not only or name in only  # noqa: E731
    peers, filings = build(wanted("e2e") and not args.skip_e2e)
    work = args.work or target_dir() / "peers"
    work.mkdir(parents=True, exist_ok=True)

    parts: dict = {}

    def part(name: str, f):
        log(f"\n== {name}")
        try:
            parts[name] = f()
        except Skip as e:
            parts[name] = str(e)
        except Exception as e:  # noqa: BLE001 - one failed part must not lose the others
            log(traceback.format_exc())
            parts[name] = f"failed: {e!r}"

    if wanted("tokens"):
        part("tokens", lambda: tokens(peers))
    if wanted("recovery"):
        part("recovery", lambda: recovery(peers, work, args.data))
    if wanted("validation"):
        part(
            "validation",
            lambda: validation(peers, args.validate_docs or bench_docs(work), args.rounds, args.repeats, work),
        )
    if not wanted("e2e"):
        pass
    elif args.skip_e2e:
        parts["e2e"] = "skipped (--skip-e2e)"
    else:
        part("e2e", lambda: end_to_end(peers, filings, work, args))

    meta["load_after"] = machine()["load"]
    text = report(meta, parts)
    print(text)
    write_section(args.output, text, only)
    log(f"wrote the peers section of {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
