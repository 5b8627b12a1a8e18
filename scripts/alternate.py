#!/usr/bin/env python3
"""Runs bench binaries in turn, several rounds, and prints each figure's median, min and max.

    python3 scripts/alternate.py [--rounds 10] BINARY [BINARY ...]

Each BINARY is a built bench that prints lines `NAME  N docs/s  X ns/doc` (contract-core's
`from_json` bench: `cargo bench -p contract-core --bench from_json --no-run` prints its path;
copy it aside before building the other version). The binaries run one after the other in every
round, under `flock -x /tmp/cpu.lock` (the lock the machine's builds take shared), so that a
change of load on a shared machine falls on all of them alike. Nothing is asserted.
"""

import argparse
import os
import re
import statistics
import subprocess
import time

LINE = re.compile(r"(.+?)\s+\d+ docs/s\s+([\d.]+) ns/doc")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("binaries", nargs="+")
    args = ap.parse_args()
    figures = {b: {} for b in args.binaries}
    print(f"start {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load {os.getloadavg()}")
    for _ in range(args.rounds):
        for binary in args.binaries:
            out = subprocess.run(
                ["flock", "-x", "/tmp/cpu.lock", binary], capture_output=True, text=True, check=True
            ).stdout
            for line in out.splitlines():
                m = LINE.match(line)
                if m:
                    figures[binary].setdefault(m.group(1).strip(), []).append(float(m.group(2)))
    print(f"end {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load {os.getloadavg()}")
    for binary, by_name in figures.items():
        print(binary)
        for name, ns in by_name.items():
            print(
                f"  {name:<46} median {statistics.median(ns):7.1f}  "
                f"min {min(ns):7.1f}  max {max(ns):7.1f}  ns/doc"
            )


if __name__ == "__main__":
    main()
