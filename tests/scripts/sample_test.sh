#!/usr/bin/env bash
# `loom sample`: a one-block transformer trained on a repeated line continues a prompt with that
# line (greedy, --temperature 0), the same seed gives the same text at temperature 1, and a
# prompt character outside the vocabulary or a run that is not a language model exits 2 naming
# the problem. $1 = the built loom.
set -euo pipefail
. "$(dirname "$(realpath "$0")")/expect.sh"  # fail, expect2
LOOM=$(realpath "${1:?usage: sample_test.sh path/to/loom}"); T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"

# 13 characters a line: windows of 16 tokens 16 apart start at every phase of the line.
for i in $(seq 1 600); do printf 'hello, world\n'; done > text.txt
"$LOOM" data convert --text text.txt text.shard --vocab chars > conv.log 2>&1 ||
  { cat conv.log; fail "convert"; }
grep -q "vocabulary 10 chars" conv.log || { cat conv.log; fail "not 10 characters"; }
cat > tiny.toml <<'TOML'
[[layer]]
type = "embedding"
name = "tok"
vocab = 10
dim = 32
[[layer]]
type = "position_embedding"
name = "pos"
max_len = 16
dim = 32
[[layer]]
type = "layernorm"
name = "ln1"
[[layer]]
type = "attention"
name = "attn"
dim = 32
heads = 2
[[layer]]
type = "add"
name = "res1"
inputs = ["pos", "attn"]
[[layer]]
type = "layernorm"
name = "ln2"
[[layer]]
type = "linear"
name = "fc"
out = 64
[[layer]]
type = "gelu"
[[layer]]
type = "linear"
name = "proj"
out = 32
[[layer]]
type = "add"
name = "res2"
inputs = ["res1", "proj"]
[[layer]]
type = "layernorm"
name = "lnf"
[[layer]]
type = "linear"
name = "head"
out = 10
TOML
"$LOOM" train --set model=tiny.toml --set data.train_shards=text.shard --set data.context=16 \
  --set batch=16 --set epochs=12 --set optim.name=adam --set optim.lr=0.01 --set eval=false \
  --set progress=none --set output.dir=run > train.log 2>&1 || { cat train.log; fail "training"; }

"$LOOM" sample run --prompt "hello, w" --length 17 --temperature 0 > greedy.txt 2> greedy.err ||
  { cat greedy.err; fail "sample"; }
[ "$(head -c 25 greedy.txt)" = "hello, world
hello, world" ] || { cat greedy.txt; cat train.log | tail -5; fail "greedy sampling did not continue the line"; }
"$LOOM" sample run --prompt "wor" --length 40 --seed 7 > a.txt
"$LOOM" sample run --prompt "wor" --length 40 --seed 7 > b.txt
cmp -s a.txt b.txt || fail "the same seed gave different text"

expect2 vocab.log "the character 'z' at byte 6 is not in the vocabulary" \
  "$LOOM" sample run --prompt "hello z"
"$LOOM" train --set max_steps=5 --set mlp.hidden=[8] --set progress=none --set output.dir=mlp \
  > mlp.log 2>&1 || { cat mlp.log; fail "mlp run"; }
expect2 notlm.log "not a language model" "$LOOM" sample mlp --prompt "hi"
echo "sample_test: ok"
