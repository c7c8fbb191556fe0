#!/usr/bin/env bash
# Values checked where they enter, from the command line; the Python side of each is
# tests/python/loom/test_bad_input.py. Each is exit 2 with a message naming the file the user
# gave and the problem: `loom data convert` and `loom data inspect` on NPY features holding NaN
# or Inf, on a 0-d array and on records of 9 dimensions (named as the input, not the output
# shard); a shard whose reserved header bytes or padding are not zero; an empty or numeric
# --delimiter. A refused convert leaves nothing beside its output. $1 = the built loom.
set -euo pipefail
. "$(dirname "$(realpath "$0")")/expect.sh"  # fail, expect2
LOOM=$(realpath "${1:?usage: data_bad_values_test.sh path/to/loom}"); T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
command -v python3 > /dev/null || { echo "SKIP: no python3 to write the NPY files"; exit 77; }
# npy FILE DTYPE SHAPE VALUE... : a little-endian NPY file (version 1) of the values.
npy() {
  python3 - "$@" <<'PY'
import struct, sys
path, dtype, shape = sys.argv[1], sys.argv[2], eval(sys.argv[3])
vals = [float(v) if dtype != "<i8" else int(v) for v in sys.argv[4:]]
head = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (dtype, repr(shape))
head += " " * (-(len(head) + 11) % 64) + "\n"
fmt = {"<f4": "f", "<f8": "d", "<i8": "q"}[dtype]
with open(path, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode())
    f.write(struct.pack("<%d%s" % (len(vals), fmt), *vals))
PY
}
npy y.npy "<i8" "(3,)" 0 1 2
for bad in nan inf -inf; do
  npy x.npy "<f4" "(3, 2)" 0.5 1 2 "$bad" 4 5
  expect2 log "x.npy: record 1 value 1 is" "$LOOM" data convert x.npy out.shard --labels y.npy
  [ -z "$(ls | grep out.shard)" ] || fail "a refused convert left $(ls | grep out.shard)"
  expect2 log "x.npy: record 1 value 1 is" "$LOOM" data inspect x.npy
done
npy scalar.npy "<f4" "()" 1
expect2 log "scalar.npy: a features array needs a first (count) dimension" \
  "$LOOM" data inspect scalar.npy
npy deep.npy "<f4" "(1, 1, 1, 1, 1, 1, 1, 1, 1, 1)" 1
npy y1.npy "<i8" "(1,)" 0
expect2 log "deep.npy: shape (1, 1, 1, 1, 1, 1, 1, 1, 1, 1): records of 9 dimensions" \
  "$LOOM" data convert deep.npy out.shard --labels y1.npy
expect2 log "deep.npy: shape" "$LOOM" data inspect deep.npy
grep -q "out.shard" log && fail "the error names the output shard: $(cat log)"

npy x.npy "<f4" "(3, 2)" 0.5 1 2 3 4 5
"$LOOM" data convert x.npy good.shard --labels y.npy > /dev/null
"$LOOM" data inspect good.shard > /dev/null
cp good.shard flipped.shard
printf '\x01' | dd of=flipped.shard bs=1 seek=148 conv=notrunc status=none
expect2 log "flipped.shard: reserved header bytes are not zero" "$LOOM" data inspect flipped.shard
cp good.shard padded.shard
printf '\x20' | dd of=padded.shard bs=1 seek=2000 conv=notrunc status=none
expect2 log "padded.shard: byte 2000 of the padding" "$LOOM" data inspect padded.shard

printf '1,2,0\n' > x.csv
expect2 log "--delimiter" "$LOOM" data convert x.csv c.shard --delimiter ''
expect2 log "--delimiter" "$LOOM" data inspect x.csv --delimiter 7
echo "data_bad_values_test: ok"
