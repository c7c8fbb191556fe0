#!/usr/bin/env bash
# `loom report` renders in headless Chromium: the DOM holds the plots (SVG polylines and bars)
# and the screenshot is not blank (coloured pixels of the curves and bars). $1 = loom binary.
# Skips (exit 77) when Debian's chromium is not installed (scripts/setup installs it).
set -euo pipefail
LOOM=${1:?usage: report_screenshot_test.sh path/to/loom}
CHROME=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROME" ]; then
  echo "SKIP: chromium not installed (scripts/setup installs Debian's chromium)"
  exit 77
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# Three runs of three epochs: two codecs on 2 workers and fp32 on 1, one cut short.
line() {  # epoch loss acc samples/s workers exposed
  printf '{"epoch":%s,"steps":234,"train_loss":%s,"train_acc":%s,"test_acc":%s,"seconds":4.0,"samples_per_s":%s,"compute_s":2.6,"comm_s":1.5,"exposed_comm_s":%s,"loader_wait_s":0.15,"bytes_sent":%s,"workers":%s}\n' \
    "$1" "$2" "$3" "$(awk "BEGIN{print $3 + 0.01}")" "$4" "$6" "$((1000000 * $5))" "$5"
}
mkrun() {  # dir codec workers
  mkdir -p "$T/$1"
  printf 'codec = "%s"\nworkers = %s\n' "$2" "$3" > "$T/$1/config.toml"
}
mkrun fp32-1w fp32 1
line 1 0.62 0.78 5200 1 0.0 >  "$T/fp32-1w/metrics.jsonl"
line 2 0.44 0.84 5300 1 0.0 >> "$T/fp32-1w/metrics.jsonl"
line 3 0.39 0.86 5250 1 0.0 >> "$T/fp32-1w/metrics.jsonl"
echo '{"test_acc":0.87,"samples_per_s":5250,"workers":1}' > "$T/fp32-1w/summary.json"
mkrun fp32-2w fp32 2
line 1 0.63 0.78 8100 2 0.9 >  "$T/fp32-2w/metrics.jsonl"
line 2 0.45 0.84 8300 2 0.8 >> "$T/fp32-2w/metrics.jsonl"
line 3 0.40 0.86 8200 2 0.8 >> "$T/fp32-2w/metrics.jsonl"
echo '{"test_acc":0.865,"samples_per_s":8200,"workers":2}' > "$T/fp32-2w/summary.json"
mkrun int8-2w int8 2
line 1 0.65 0.77 9400 2 0.3 >  "$T/int8-2w/metrics.jsonl"
line 2 0.47 0.83 9500 2 0.3 >> "$T/int8-2w/metrics.jsonl"
printf '{"epoch":3,"steps":2' >> "$T/int8-2w/metrics.jsonl"   # cut short mid-line

"$LOOM" report "$T/fp32-1w" "$T/fp32-2w" "$T/int8-2w" -o "$T/report.html" --title "loom report: codecs and workers"
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run
       --disable-dev-shm-usage --window-size=1280,1900 --virtual-time-budget=2000)
timeout 120 "$CHROME" "${flags[@]}" --dump-dom "file://$T/report.html" > "$T/dom.html" 2> "$T/chrome.log" || {
  cat "$T/chrome.log"; echo "FAIL: chromium --dump-dom"; exit 1; }
timeout 120 "$CHROME" "${flags[@]}" --screenshot="$T/shot.png" "file://$T/report.html" >> "$T/chrome.log" 2>&1 || {
  cat "$T/chrome.log"; echo "FAIL: chromium --screenshot"; exit 1; }
# Keep the screenshot where a person can look at it.
if [ -n "${LOOM_REPORT_SHOT:-}" ]; then cp "$T/shot.png" "$LOOM_REPORT_SHOT"; cp "$T/report.html" "${LOOM_REPORT_SHOT%.png}.html"; fi

svgs=$(grep -o '<svg' "$T/dom.html" | wc -l)
lines=$(grep -o '<polyline class="series"' "$T/dom.html" | wc -l)
bars=$(grep -o '<rect class="bar"' "$T/dom.html" | wc -l)
echo "DOM: $svgs svg, $lines curves, $bars bars"
[ "$svgs" -ge 7 ] || { echo "FAIL: expected >= 7 SVG plots in the DOM, found $svgs"; exit 1; }
[ "$lines" -ge 8 ] || { echo "FAIL: expected >= 8 curves, found $lines"; exit 1; }
[ "$bars" -ge 6 ] || { echo "FAIL: expected >= 6 bars, found $bars"; exit 1; }
grep -q 'line 3 is truncated' "$T/dom.html" || { echo "FAIL: the truncated run is not named"; exit 1; }

python3 - "$T/shot.png" <<'PY'
# Decodes the PNG (8-bit RGB/RGBA, filters 0-4) with zlib and struct only, then counts pixels.
import struct, sys, zlib
data = open(sys.argv[1], 'rb').read()
assert data[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
pos, idat, w = 8, b'', 0
while pos < len(data):
    n, kind = struct.unpack('>I4s', data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b'IHDR':
        w, h, depth, ctype = struct.unpack('>IIBB', body[:10])
        assert depth == 8 and ctype in (2, 6), f'unsupported PNG depth {depth} type {ctype}'
        bpp = 3 if ctype == 2 else 4
    elif kind == b'IDAT':
        idat += body
    pos += 12 + n
raw, stride = zlib.decompress(idat), w * bpp
prev, rows, i = bytearray(stride), [], 0
for _ in range(h):
    f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride]); i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b, c = prev[x], prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line); prev = line
total = colourful = inked = 0
for line in rows:
    for x in range(0, stride, bpp):
        r, g, b = line[x], line[x + 1], line[x + 2]
        total += 1
        inked += min(r, g, b) < 200
        colourful += max(r, g, b) - min(r, g, b) > 60
print(f'screenshot {w}x{h}: {100 * inked / total:.1f}% inked, {100 * colourful / total:.2f}% coloured')
assert inked / total > 0.01, 'the screenshot is blank'
assert colourful / total > 0.005, 'no coloured plot pixels in the screenshot'
PY
echo "PASS"
