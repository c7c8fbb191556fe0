#!/usr/bin/env bash
# `loom predict`: a trained run's predicted classes for the Fashion-MNIST test images (IDX) agree
# with `loom eval`'s accuracy; top-k with probabilities (CSV) and every class's probability
# (NPY) are consistent with them; an existing output is refused without --force; inputs of
# another shape, an output that can't be written and an unknown output format exit 2 naming the
# problem. Python's standard library reads the outputs back. $1 = the built loom.
set -euo pipefail
. "$(dirname "$(realpath "$0")")/expect.sh"  # fail, expect2
LOOM=$(realpath "${1:?usage: model_predict_test.sh path/to/loom}"); T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
DATA=/usr/share/datasets/fashion-mnist
images=$(ls $DATA/t10k-images-idx3-ubyte* | head -1)
labels=$(ls $DATA/t10k-labels-idx1-ubyte* | head -1)

"$LOOM" train --set max_steps=40 --set mlp.hidden=[32] --set progress=none \
  --set output.dir=run > train.log 2>&1 || { cat train.log; fail "training"; }
"$LOOM" eval run > eval.log 2>&1 || { cat eval.log; fail "eval"; }
acc=$(grep -o 'accuracy [0-9.]*' eval.log | head -1 | awk '{print $2}')

"$LOOM" predict run --input "$images" --output preds.csv > p1.log 2>&1 || { cat p1.log; fail "predict"; }
grep -q "10000 samples" p1.log || { cat p1.log; fail "predict's summary"; }
"$LOOM" predict run --input "$images" --output top3.csv --top-k 3 > p2.log 2>&1 ||
  { cat p2.log; fail "predict --top-k"; }
"$LOOM" predict run --input "$images" --output probs.npy --probabilities > p3.log 2>&1 ||
  { cat p3.log; fail "predict --probabilities"; }
"$LOOM" predict run --input "$images" --output classes.npy > p4.log 2>&1 ||
  { cat p4.log; fail "predict to NPY"; }

/usr/bin/python3 - "$labels" "$acc" <<'PY' || fail "the predictions do not check out"
import ast, csv, gzip, struct, sys
raw = open(sys.argv[1], "rb").read()
if raw[:2] == b"\x1f\x8b":
    raw = gzip.decompress(raw)
labels = list(raw[8:])
rows = list(csv.DictReader(open("preds.csv")))
assert len(rows) == 10000 == len(labels), len(rows)
pred = [int(r["class"]) for r in rows]
acc = sum(p == l for p, l in zip(pred, labels)) / 10000
assert f"{acc:.4f}" == sys.argv[2], (acc, sys.argv[2])
top = list(csv.reader(open("top3.csv")))
assert top[0] == ["class_1", "prob_1", "class_2", "prob_2", "class_3", "prob_3"], top[0]
for r, p in zip(top[1:], pred):
    c = [int(r[0]), int(r[2]), int(r[4])]
    q = [float(r[1]), float(r[3]), float(r[5])]
    assert c[0] == p and len(set(c)) == 3 and q[0] >= q[1] >= q[2] > 0 and sum(q) <= 1 + 1e-6
def npy(path):
    b = open(path, "rb").read()
    assert b[:6] == b"\x93NUMPY"
    n = struct.unpack("<H", b[8:10])[0]
    head = ast.literal_eval(b[10:10 + n].decode())
    return head, b[10 + n:]
head, body = npy("probs.npy")
assert head["descr"] == "<f4" and head["shape"] == (10000, 10), head
probs = struct.unpack("<100000f", body)
for i in range(0, 10000, 997):
    row = probs[i * 10:(i + 1) * 10]
    assert abs(sum(row) - 1) < 1e-5 and max(range(10), key=lambda c: row[c]) == pred[i]
head, body = npy("classes.npy")
assert head["descr"] == "<i8" and head["shape"] == (10000,), head
assert list(struct.unpack("<10000q", body)) == pred
print(f"predict: accuracy {acc:.4f} as loom eval, top-3 and probabilities consistent")
PY

expect2 exists.log "preds.csv: exists" "$LOOM" predict run --input "$images" --output preds.csv
"$LOOM" predict run --input "$images" --output preds.csv --force > force.log 2>&1 ||
  { cat force.log; fail "--force"; }
printf '1,2,3\n4,5,6\n' > three.csv
expect2 shape.log "the model takes 1x28x28" "$LOOM" predict run --input three.csv --output o.csv
expect2 dir.log "cannot write" "$LOOM" predict run --input "$images" --output nodir/o.csv
expect2 ext.log "name it .npy or .csv" "$LOOM" predict run --input "$images" --output o.txt
expect2 norun.log "nope: no such run" "$LOOM" predict nope --input "$images" --output o.csv
[ ! -e o.csv ] || fail "a failed predict left o.csv"
echo "model_predict_test: ok"
