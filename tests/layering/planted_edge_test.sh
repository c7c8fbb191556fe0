#!/usr/bin/env bash
# Copies docs/ and src/ to a scratch tree, plants forbidden edges (a codec that knows the
# transport, the model that runs the trainer, a codec's options, the training loop and a header
# of the experiments that read the config, a file no unit owns, a cycle in the table) and
# checks that the include test fails naming each file and line, while the untouched copy passes.
set -euo pipefail
PY=$1 CHECK=$2 ROOT=$3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cp -r "$ROOT/docs" "$ROOT/src" "$T/"
"$PY" "$CHECK" "$T" > "$T/clean.out" || { cat "$T/clean.out"; echo "FAIL: the copy itself fails"; exit 1; }

printf '#include "loom/comm/communicator.h"\n' >> "$T/src/loom/compress/codec.h"
line_codec=$(wc -l < "$T/src/loom/compress/codec.h")
printf '#include "loom/train/trainer.h"\n' >> "$T/src/loom/perf/advisor.cc"
line_perf=$(wc -l < "$T/src/loom/perf/advisor.cc")
printf '#include "loom/core/config.h"\n' >> "$T/src/loom/compress/codec_options.h"
line_config=$(wc -l < "$T/src/loom/compress/codec_options.h")
printf '#include "loom/core/config.h"\n' >> "$T/src/loom/train/worker.cc"
line_train=$(wc -l < "$T/src/loom/train/worker.cc")
printf '#include "loom/core/config.h"\n' >> "$T/src/loom/experiments/validate.h"
line_experiments=$(wc -l < "$T/src/loom/experiments/validate.h")
mkdir -p "$T/src/loom/nowhere" && printf '// owned by no unit\n' > "$T/src/loom/nowhere/stray.h"

if "$PY" "$CHECK" "$T" > "$T/planted.out"; then
  cat "$T/planted.out"; echo "FAIL: planted edges were not found"; exit 1
fi
for want in "src/loom/compress/codec.h:$line_codec: unit 'compress' includes loom/comm/communicator.h of unit 'comm'" \
            "src/loom/perf/advisor.cc:$line_perf: unit 'perf' includes loom/train/trainer.h of unit 'train'" \
            "src/loom/compress/codec_options.h:$line_config: unit 'compress' includes loom/core/config.h" \
            "src/loom/train/worker.cc:$line_train: unit 'train' includes loom/core/config.h" \
            "src/loom/experiments/validate.h:$line_experiments: a header of unit 'experiments' includes loom/core/config.h" \
            "src/loom/nowhere/stray.h: no unit of the layer table owns this file" \
            "6 forbidden edge(s)"; do
  grep -qF "$want" "$T/planted.out" || { cat "$T/planted.out"; echo "FAIL: missing: $want"; exit 1; }
done
echo "planted edges found: $(grep -c 'src/loom' "$T/planted.out")"

# A "may use" edge back down-to-up (core may use comm, comm may use core) is a link cycle.
sed -i 's/^| `core` | `core\/` | - |/| `core` | `core\/` | `comm` |/' "$T/docs/architecture.md"
if "$PY" "$CHECK" "$T" > "$T/cycle.out" 2>&1; then
  cat "$T/cycle.out"; echo "FAIL: a cycle in the table was not found"; exit 1
fi
grep -qF "the layer table has a cycle: core -> comm -> core" "$T/cycle.out" \
  || { cat "$T/cycle.out"; echo "FAIL: the cycle is not named"; exit 1; }
echo "planted cycle found"
