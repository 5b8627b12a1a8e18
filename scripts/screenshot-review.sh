#!/usr/bin/env bash
# A screenshot of a `contract review` page in headless Chromium, for a person to look at
# (manual, outside CI). With no page given, it writes the review page of the example invoices
# (scripted replies, no model) first.
#
#   scripts/screenshot-review.sh                      # docs/review.png from the example data
#   scripts/screenshot-review.sh review.html out.png  # any page
#
# Needs Debian's `chromium` (apt-get install chromium) or `CHROMIUM=/path/to/chrome`. The page
# loads nothing from the network; Chromium runs with the network off anyway. Also prints the
# number of highlights the page's script drew (`<mark>` elements in the rendered DOM), a check
# that the script ran.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
page="${1:-}"
png="${2:-docs/review.png}"
width="${WIDTH:-1280}"
height="${HEIGHT:-900}"

browser="${CHROMIUM:-}"
if [ -z "$browser" ]; then
    for b in chromium chromium-browser google-chrome google-chrome-stable; do
        if command -v "$b" >/dev/null 2>&1; then browser="$(command -v "$b")"; break; fi
    done
fi
if [ -z "$browser" ]; then
    echo "no Chromium: apt-get install chromium, or set CHROMIUM=/path/to/chrome" >&2
    exit 1
fi

if [ -z "$page" ]; then
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    cargo run -q -p contract-cli -- extract \
        --schema examples/data/cli/invoice.schema.json \
        --input examples/data/cli/invoices.jsonl \
        --backend scripted --replies examples/data/cli/invoice-replies.jsonl \
        --output "$work/rows.jsonl" --html "$work/review.html" --quiet
    page="$work/review.html"
fi
page="$(cd "$(dirname "$page")" && pwd)/$(basename "$page")"
mkdir -p "$(dirname "$png")"
png_abs="$(cd "$(dirname "$png")" && pwd)/$(basename "$png")"

# One profile folder, reused: Chromium's helpers may still write to it after it exits.
profile="${TMPDIR:-/tmp}/contract-review-chromium"
mkdir -p "$profile"
flags=(--headless=new --no-sandbox --disable-gpu --hide-scrollbars --no-first-run
       --user-data-dir="$profile" --proxy-server=127.0.0.1:9 --proxy-bypass-list='<-loopback>'
       --window-size="$width,$height")
"$browser" "${flags[@]}" --screenshot="$png_abs" "file://$page" >/dev/null 2>&1
marks="$("$browser" "${flags[@]}" --dump-dom "file://$page" 2>/dev/null | grep -o '<mark ' | wc -l)"
echo "screenshot: $png_abs ($width x $height); highlights drawn on the first page: $marks"
