#!/usr/bin/env bash
# The GPU check of the local backend, in three steps printing one `name: value` a line:
#   1. probe   what the machine has: the GPU and its driver, and where the CUDA 13 libraries
#              the binaries link (libcudart, libcublas, libcublasLt, libcurand) are;
#   2. logits  GPU logits against the CPU's f32 reference (`device_check`): two tiny seeded
#              models made in memory, and SmolLM2 when its file is there (logits, greedy
#              generations against the CPU, decode speed);
#   3. main    the main job on the GPU (`filings --device cuda:0`, SmolLM2): routed mode (one
#              release at a time, the mask overlapped with the forward call), then grounded
#              mode with 8 releases decoded together in one batch (`--concurrency 8`): valid,
#              correct, s/doc, tokens/s, the mask's share of the generation time.
# Not part of CI. The binaries are built here (`scripts/cuda_build.sh`), the GPU machine only
# runs them: it reaches no registry, and only what the device tool carries (64 MiB a call) is
# there besides the work tree.
#
#   scripts/device_check.sh stage          # here: binaries and model parts into target/device/
#   scripts/device_check.sh                # on the GPU machine: probe, logits, main
#   scripts/device_check.sh probe logits   # some of the steps (the probe always runs)
#
# Through the device tool (`run`), machine kept warm between the calls, the paths as `stage`
# prints them (the binaries and the first model part fit one carry, the rest another):
#   call 1: carry [target/device/bin, target/device/model-1]   command: scripts/device_check.sh probe logits
#   call 2: carry [target/device/model-2]                      command: scripts/device_check.sh
# Paths carried by call 1 stay on a warm machine. A machine that went cold between the calls
# has lost them: call 2 then has no binaries, and says so. Without call 2 the check runs on the
# tiny models only (SmolLM2, 98 MB, fits no single carry; Qwen2.5-0.5B, 491 MB, none at all).
#
# Environment (all optional): DEVICE (default cuda:0), DOCS (main job's releases, default 20),
# MAIN_TIMEOUT (seconds the main job may take, default 240),
# BIN_DIR (the binaries: default, those carried in target/device/bin unpacked under $TMPDIR),
# MODEL (a GGUF file to use instead of the carried parts),
# CARGO_TARGET_DIR (for `stage`: where cuda_build.sh built, default ../target-cuda),
# CONTRACT_CACHE (for `stage`: the model cache, as in contract-backends/src/local/fetch.rs).

set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
STAGE=$ROOT/target/device
SCRATCH=${TMPDIR:-/tmp}/contract-device-check
BIN_DIR=${BIN_DIR:-$SCRATCH/bin}
DEVICE=${DEVICE:-cuda:0}
DOCS=${DOCS:-20}
MAIN_TIMEOUT=${MAIN_TIMEOUT:-240}
CARRY_MIB=64
MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

say() { printf '%s: %s\n' "$1" "$2"; }

stage() {
    set -e
    local target=${CARGO_TARGET_DIR:-$(dirname "$ROOT")/target-cuda}
    local cache=${CONTRACT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/contract}
    local model=${MODEL:-$cache/models/$MODEL_FILE}
    rm -rf "$STAGE"
    mkdir -p "$STAGE/bin" "$STAGE/stripped"
    for bin in filings device_check; do
        [ -x "$target/release/$bin" ] || { echo "error: no $target/release/$bin (run scripts/cuda_build.sh)" >&2; exit 1; }
        strip -o "$STAGE/stripped/$bin" "$target/release/$bin"
    done
    # Stripped, each binary is about 70 MB (half of it the CUDA kernels, in both): one xz
    # archive of the two (xz's window spans both) fits a carry with room for a model part.
    tar -C "$STAGE/stripped" -cf - filings device_check | xz -9 -T 2 >"$STAGE/bin/binaries.tar.xz"
    rm -rf "$STAGE/stripped"
    [ -f "$model" ] || { echo "error: no $model (run the tests once, or set MODEL)" >&2; exit 1; }
    local bin_bytes model_bytes tree_bytes first rest
    bin_bytes=$(du -cb "$STAGE/bin" | tail -n 1 | cut -f 1)
    model_bytes=$(stat -c %s "$model")
    # The work tree travels with every call and counts towards the same limit: the tracked
    # files and the untracked ones git does not ignore (about 2.4 MB).
    tree_bytes=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } |
        xargs -0 -r du -cb 2>/dev/null | awk '$2 == "total" { s += $1 } END { print s + 0 }')
    # What each carry has left beside the work tree (and the first beside the binaries), less
    # 1 MiB for the file system's view.
    rest=$(( (CARRY_MIB - 1) * 1048576 - tree_bytes ))
    first=$(( rest - bin_bytes ))
    [ "$first" -gt 0 ] || { echo "error: the binaries alone take $bin_bytes bytes" >&2; exit 1; }
    mkdir -p "$STAGE/model-1"
    head -c "$first" "$model" >"$STAGE/model-1/part"
    local offset=$first n=1
    while [ "$offset" -lt "$model_bytes" ]; do
        n=$((n + 1))
        mkdir -p "$STAGE/model-$n"
        tail -c +"$((offset + 1))" "$model" | head -c "$rest" >"$STAGE/model-$n/part"
        offset=$((offset + rest))
    done
    say "work tree bytes" "$tree_bytes"
    say "binaries bytes" "$bin_bytes"
    say "model bytes" "$model_bytes"
    say "model parts" "$n"
    say "call 1 carry" "target/device/bin target/device/model-1 ($(du -cb "$STAGE/bin" "$STAGE/model-1" | tail -n 1 | cut -f 1) bytes)"
    for i in $(seq 2 "$n"); do
        say "call $i carry" "target/device/model-$i ($(stat -c %s "$STAGE/model-$i/part") bytes)"
    done
}

# The directories that may hold CUDA libraries on this machine, most specific first.
lib_dirs() {
    local py
    for py in python3 python; do
        command -v "$py" >/dev/null 2>&1 || continue
        "$py" - <<'EOF' 2>/dev/null
import glob, os, site, sys
roots = list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()] + sys.path
seen = set()
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib"))) + [os.path.join(r, "torch", "lib")]:
        if os.path.isdir(d) and d not in seen:
            seen.add(d)
            print(d)
EOF
    done
    tr ':' '\n' <<<"${LD_LIBRARY_PATH:-}" | grep -v '^$'
    ls -d /usr/local/cuda*/lib64 /usr/local/cuda*/targets/x86_64-linux/lib /opt/conda/lib \
        /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/nvidia/lib64 2>/dev/null
    ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libcudart|libcublas|libcurand' |
        sed 's/.*=> //' | xargs -r -n 1 dirname
}

# What the binaries name (`readelf -d`), and what libcublas loads.
NEEDED=(libcuda.so.1 libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10)

probe() {
    if command -v nvidia-smi >/dev/null 2>&1; then
        say "gpu" "$(nvidia-smi --query-gpu=name,memory.total,compute_cap --format=csv,noheader 2>&1 | head -n 1)"
        say "driver" "$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1 | head -n 1)"
        say "driver cuda version" "$(nvidia-smi 2>/dev/null | grep -oE 'CUDA Version: [0-9.]+' | head -n 1 | cut -d' ' -f3)"
    else
        say "gpu" "no nvidia-smi"
    fi
    local dirs found missing=0 name d path=""
    mapfile -t dirs < <(lib_dirs | awk '!seen[$0]++')
    for name in "${NEEDED[@]}"; do
        found=""
        for d in "${dirs[@]}"; do
            if [ -e "$d/$name" ]; then found=$d; break; fi
        done
        if [ -n "$found" ]; then
            say "lib $name" "$found"
            case ":$path:" in *":$found:"*) ;; *) path=${path:+$path:}$found ;; esac
        else
            missing=1
            local other
            other=$(for d in "${dirs[@]}"; do ls "$d/${name%%.so*}".so.* 2>/dev/null; done | head -n 3 | tr '\n' ' ')
            say "lib $name" "missing${other:+ (found: $other)}"
        fi
    done
    export LD_LIBRARY_PATH=$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    say "library path" "$path"
    unpack
    if [ -x "$BIN_DIR/device_check" ]; then
        local unresolved
        unresolved=$(ldd "$BIN_DIR/device_check" 2>&1 | grep 'not found' | awk '{print $1}' | tr '\n' ' ')
        say "binaries" "$BIN_DIR"
        say "unresolved libraries" "${unresolved:-none}"
        [ -z "$unresolved" ] || missing=1
    else
        say "binaries" "missing (no $BIN_DIR/device_check: carry target/device/bin)"
        missing=1
    fi
    return $missing
}

# The carried binaries, unpacked into BIN_DIR (xz, else Python's lzma).
unpack() {
    local archive=$STAGE/bin/binaries.tar.xz
    [ -f "$archive" ] || return 0
    [ "$archive" -ot "$BIN_DIR/device_check" ] && return 0
    mkdir -p "$BIN_DIR"
    if command -v xz >/dev/null 2>&1; then
        xz -dc "$archive" | tar -C "$BIN_DIR" -xf -
    else
        python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
            "$archive" "$BIN_DIR"
    fi
}

# The model: MODEL, else the carried parts joined and checked.
model_path() {
    if [ -n "${MODEL:-}" ]; then echo "$MODEL"; return 0; fi
    local parts joined
    parts=$(ls -d "$STAGE"/model-* 2>/dev/null | sort -t- -k2 -n)
    [ -n "$parts" ] || return 1
    joined=$SCRATCH/$MODEL_FILE
    mkdir -p "$(dirname "$joined")"
    if ! echo "$MODEL_SHA256  $joined" | sha256sum -c --status 2>/dev/null; then
        for d in $parts; do cat "$d/part"; done >"$joined"
        echo "$MODEL_SHA256  $joined" | sha256sum -c --status 2>/dev/null || return 1
    fi
    echo "$joined"
}

logits() {
    local model t0 rc
    t0=$(date +%s)
    if model=$(model_path); then
        say "model" "$model"
        "$BIN_DIR/device_check" --device "$DEVICE" --model "$model"
    else
        say "model" "not all parts here (tiny models only)"
        "$BIN_DIR/device_check" --device "$DEVICE"
    fi
    rc=$?
    say "logits step s" "$(( $(date +%s) - t0 ))"
    return $rc
}

main_job() {
    local model
    if ! model=$(model_path); then
        say "main job" "skipped: the model's parts are not all here"
        return 1
    fi
    local status=0
    main_run "$model" routed 1 || status=1
    main_run "$model" grounded 8 || status=1
    return $status
}

# One run of the main job: its mode, the releases decoded together; its figures prefixed by
# the mode.
main_run() {
    local model=$1 mode=$2 concurrency=$3 t0 out rc
    out=${OUT:-${TMPDIR:-/tmp}}/device-check-$mode.txt
    t0=$(date +%s)
    timeout "$MAIN_TIMEOUT" "$BIN_DIR/filings" --model "$model" --device "$DEVICE" \
        --docs "$DOCS" --mode "$mode" --concurrency "$concurrency" >"$out" 2>"$out.stderr"
    rc=$?
    say "$mode main job s" "$(( $(date +%s) - t0 ))"
    if [ $rc -ne 0 ]; then
        say "$mode main job" "failed ($rc): $(tail -n 3 "$out.stderr" | tr '\n' ' ')"
        return $rc
    fi
    grep -E '^weights:' "$out.stderr" | head -n 1
    # | mode | docs | valid | correct | ... | s/doc | forward calls/doc | attempts/doc |
    awk -F'|' -v mode="$mode" '$2 ~ "^ *" mode " *$" {
        gsub(/ /, "", $0); split($0, c, "|");
        printf "%s docs: %s\n%s valid: %s\n%s correct: %s\n%s s/doc: %s\n%s forward calls/doc: %s\n", mode, c[3], mode, c[4], mode, c[5], mode, c[13], mode, c[14]
    }' "$out"
    grep -E '^(generations|generated tokens|decode tokens/s|step ms|mask ms/step|mask share of generation time|mask share not overlapped|batched forward calls|mean batch): ' "$out" |
        sed "s/^/$mode /"
}

if [ "${1:-}" = "stage" ]; then
    stage
    exit $?
fi
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(probe logits main)
for step in "${steps[@]}"; do
    case $step in
        probe | logits | main) ;;
        *) echo "unknown step: $step (probe, logits, main, or stage)" >&2; exit 2 ;;
    esac
done
status=0
# The probe always runs: it finds the libraries the other steps run with.
probe || { say "probe" "incomplete: the steps that need the GPU will fail"; status=1; }
for step in "${steps[@]}"; do
    case $step in
        logits) logits || status=1 ;;
        main) main_job || status=1 ;;
    esac
done
say "device check" "$([ $status -eq 0 ] && echo passed || echo failed)"
exit $status
