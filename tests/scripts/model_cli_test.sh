#!/usr/bin/env bash
# A trained model through the CLI: a run leaves model.safetensors, `loom eval` reports the
# training loop's own test accuracy with a confusion matrix (also for a checkpoint and as JSON),
# `loom export --weights` writes a file that loads back the same, and a missing run, a corrupt
# or truncated model file, an existing output or nothing to export exit 2 with a message naming
# what is wrong. $1 = the built loom.
set -euo pipefail
. "$(dirname "$(realpath "$0")")/expect.sh"  # fail, expect2
LOOM=$(realpath "${1:?usage: model_cli_test.sh path/to/loom}"); T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"

"$LOOM" train --set max_steps=30 --set mlp.hidden=[32] --set progress=none \
  --set train.checkpoint_every=20 --set output.dir=run > train.log 2>&1 ||
  { cat train.log; fail "training"; }
[ -f run/model.safetensors ] || fail "no run/model.safetensors"
acc=$(grep -o 'test accuracy [0-9.]*' train.log | awk '{print $3}')
[ -n "$acc" ] || { cat train.log; fail "no test accuracy in the training log"; }

# With the run's threads (the default 1): the same chunks and threads as the training loop's
# evaluation at world size 1, so the same bits (docs/determinism.md).
"$LOOM" eval run --threads 1 --json eval.json > eval.log 2>&1 || { cat eval.log; fail "eval"; }
grep -q "accuracy $acc" eval.log || { cat eval.log; fail "eval's accuracy is not the run's $acc"; }
grep -q "confusion matrix" eval.log || { cat eval.log; fail "no confusion matrix"; }
grep -q '"format_version": 1' eval.json && grep -q '"confusion"' eval.json || fail "eval.json"
expect2 json.log "eval.json: exists" "$LOOM" eval run --json eval.json
"$LOOM" eval run --json eval.json --force > jf.log 2>&1 || { cat jf.log; fail "eval --json --force"; }
"$LOOM" eval run --checkpoint step-000000000020 > ck.log 2>&1 || { cat ck.log; fail "eval --checkpoint"; }
grep -q "step-000000000020/train.ckpt (20 steps)" ck.log || { cat ck.log; fail "eval --checkpoint names"; }

"$LOOM" export run --weights w.safetensors > export.log 2>&1 || { cat export.log; fail "export"; }
cmp -s w.safetensors run/model.safetensors || fail "exported weights differ from the run's file"
"$LOOM" export run/checkpoints/step-000000000020 --weights > ckexport.log 2>&1 ||
  { cat ckexport.log; fail "export of a checkpoint"; }
[ -f run-step-000000000020.safetensors ] || { ls; fail "no default name for a checkpoint's export"; }
mkdir copy && cp run-step-000000000020.safetensors copy/model.safetensors
"$LOOM" eval copy --data /usr/share/datasets/fashion-mnist > copy.log 2>&1 ||
  { cat copy.log; fail "eval of an exported checkpoint (no config beside it)"; }

# Another set: a shard file (normalised by its own statistics, as shards are).
"$LOOM" data convert /usr/share/datasets/fashion-mnist test.shard --test > convert.log 2>&1 ||
  { cat convert.log; fail "data convert"; }
"$LOOM" eval run --data test.shard > shard.log 2>&1 || { cat shard.log; fail "eval --data shard"; }
grep -q "on test.shard" shard.log && grep -q "samples 10000" shard.log || { cat shard.log; fail "eval --data shard"; }

expect2 missing.log "nope: no such run directory" "$LOOM" eval nope
expect2 missing2.log "nope: no such run directory, checkpoint or model file" \
  "$LOOM" export nope --weights x.safetensors
expect2 nothing.log "nothing to export" "$LOOM" export run
expect2 exists.log "w.safetensors: already exists" "$LOOM" export run --weights w.safetensors
"$LOOM" export run --weights w.safetensors --force > force.log 2>&1 || { cat force.log; fail "--force"; }
expect2 nodata.log "nodata: no such data file" "$LOOM" eval run --data nodata
expect2 nock.log "step-9: no such checkpoint directory" "$LOOM" eval run --checkpoint step-9
expect2 noconf.log "give one with --data" "$LOOM" eval copy/model.safetensors

mkdir bad && cp run/config.toml bad/
head -c 100 run/model.safetensors > bad/model.safetensors
expect2 trunc.log "bad/model.safetensors: safetensors header length" "$LOOM" eval bad
printf 'not a safetensors file at all' > bad/model.safetensors
expect2 garbage.log "bad/model.safetensors: safetensors header length" "$LOOM" eval bad
python3 - <<'P'
import struct
h = b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]'
open("bad/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + b"\0" * 8)
P
expect2 json.log "bad/model.safetensors: safetensors header is not valid JSON" "$LOOM" eval bad

# A directory that holds only a model file holds a run: training there is refused.
mkdir only && cp run/model.safetensors only/
expect2 only.log 'already holds a run (model.safetensors)' \
  "$LOOM" train --set max_steps=2 --set progress=none --set output.dir=only
echo "ok"
