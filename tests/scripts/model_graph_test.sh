#!/usr/bin/env bash
# Models as graph files through the CLI: `loom models show` writes a zoo network as a graph file
# that `loom train` takes back, `--print-model` lists layers with their names and shapes, and a
# bad graph exits 2 with a message naming the layer before the run directory exists.
# $1 = the built loom.
set -euo pipefail
LOOM=$(realpath "${1:?usage: model_graph_test.sh path/to/loom}"); T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
fail() { echo "FAIL: $*"; exit 1; }
TINY=(--set max_steps=5 --set progress=none --set eval=false)

"$LOOM" models list > list.log || fail "models list"
grep -q "resnet20" list.log && grep -q "conv2d" list.log || { cat list.log; fail "models list"; }
"$LOOM" models show mlp --set 'mlp.hidden=[32]' -o mlp.toml > show.log || fail "models show"
grep -q 'type = "linear"' mlp.toml || { cat mlp.toml; fail "no linear layer in mlp.toml"; }
rc=0; "$LOOM" models show mlp -o mlp.toml > again.log 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "models show over an existing file exited $rc, not 2"

"$LOOM" train "${TINY[@]}" --set model=mlp.toml --print-model > print.log 2>&1 || { cat print.log; fail "--print-model"; }
grep -q "linear_1" print.log && grep -q "\[32\]" print.log || { cat print.log; fail "--print-model lists no layers"; }
[ ! -e runs ] || fail "--print-model made a run directory"
"$LOOM" train "${TINY[@]}" --set model=mlp.toml --set output.dir=run > run.log 2>&1 || { cat run.log; fail "training a graph file"; }
[ -f run/summary.json ] || fail "no summary of the graph-file run"

# The performance model reads a graph file's layers (784*2048+2048 + 2048*10+10 = 1.63M).
"$LOOM" models show mlp --set 'mlp.hidden=[2048]' -o wide.toml > /dev/null || fail "models show wide"
"$LOOM" scale --workload wide.toml --gpu h100-sxm > scale.log 2>&1 || { cat scale.log; fail "scale --workload graph"; }
grep -q "1.6M params" scale.log || { cat scale.log; fail "scale does not count the graph's parameters"; }
"$LOOM" advise --model wide.toml --budget 5000 > advise.log 2>&1 || { cat advise.log; fail "advise --model graph"; }

cat > bad.toml <<'G'
[[layer]]
type = "flatten"
[[layer]]
type = "linear"
name = "a"
out = 8
[[layer]]
type = "add"
inputs = ["a", "flatten_0"]
G
rc=0; "$LOOM" train "${TINY[@]}" --set model=bad.toml --set output.dir=badrun > bad.log 2>&1 || rc=$?
[ "$rc" = 2 ] || { cat bad.log; fail "a shape mismatch at an Add exited $rc, not 2"; }
grep -q "layer 'add_0'" bad.log || { cat bad.log; fail "the error does not name the layer"; }
[ ! -e badrun ] || fail "the refused run made its output directory"
printf '[[layer]]\ntype = "conv3d"\n' > unknown.toml
rc=0; "$LOOM" train "${TINY[@]}" --set model=unknown.toml --set output.dir=badrun > unk.log 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "unknown layer type 'conv3d'" unk.log || { cat unk.log; fail "unknown type (rc $rc)"; }
echo "ok"
