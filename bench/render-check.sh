#!/usr/bin/env bash
# bench/render-check.sh: renders a storm report (index.html, written by
# `go run ./cmd/storm -out DIR`) in Debian's chromium, headless, and checks
# what a reader would see: the screenshot is not one flat colour, and every
# <img> of the page decoded (the page's own script writes "images decoded:
# N/M" into #render-check once loaded; chromium's --dump-dom shows it).
#
# Usage, from bench/:  ./render-check.sh DIR [SCREENSHOT.png]
# (default screenshot: DIR/screenshot.png); python3 decodes the PNG. Installs chromium with apt-get
# when missing. Not part of scripts/test: the browser is a large install.
set -euo pipefail
dir="${1:?usage: render-check.sh DIR [SCREENSHOT.png]}"
shot="${2:-$dir/screenshot.png}"
page="$(cd "$dir" && pwd)/index.html"
[ -f "$page" ] || { echo "render-check: no $page" >&2; exit 1; }

if ! command -v chromium >/dev/null 2>&1; then
  as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
  as_root apt-get -o DPkg::Lock::Timeout=300 update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq chromium >/dev/null
fi

profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
  --disable-component-update --disable-sync --user-data-dir="$profile" --hide-scrollbars
  --virtual-time-budget=5000)

chromium "${flags[@]}" --window-size=1400,2400 --screenshot="$shot" "file://$page" >/dev/null 2>&1
dom="$(chromium "${flags[@]}" --dump-dom "file://$page" 2>/dev/null)"

# Every image decoded: "images decoded: N/N" with N > 0.
check="$(grep -o 'images decoded: [0-9]*/[0-9]*' <<<"$dom" || true)"
read -r ok total < <(sed -E 's#images decoded: ([0-9]+)/([0-9]+)#\1 \2#' <<<"${check:-x x}")
if [ -z "$check" ] || [ "$ok" != "$total" ] || [ "$total" = 0 ]; then
  echo "render-check: FAIL: ${check:-the check script of the page did not run}" >&2
  exit 1
fi

# The screenshot is not one flat colour: count its distinct colours.
colours="$(python3 - "$shot" <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat = 8, b""
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        assert depth == 8 and interlace == 0 and ctype in (2, 6), "unexpected PNG format"
        bpp = 3 if ctype == 2 else 4
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
raw, stride = zlib.decompress(idat), w * bpp
prev, seen = bytearray(stride), set()
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):  # undo the row's PNG filter
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    if y % 5 == 0:
        for x in range(0, stride, bpp * 5):
            seen.add(bytes(line[x:x + 3]))
    prev = line
print(len(seen))
PY
)"
if [ "$colours" -lt 3 ]; then
  echo "render-check: FAIL: the screenshot $shot is flat ($colours colours)" >&2
  exit 1
fi
echo "render-check: ok: $check; screenshot $shot has $colours distinct colours (sampled)"
