#!/usr/bin/env bash
# Text to token shards through the CLI and a token run: `loom data convert --text` with byte and
# character vocabularies, `inspect` naming the vocabulary, the refusals (exit 2: an empty file,
# text that is not UTF-8 under --vocab chars naming the byte offset, an unknown --vocab), and
# `loom train` on windows printing tokens/s and bits per byte.
# $1 = the built loom.
set -euo pipefail
LOOM=$(realpath "${1:?usage: token_cli_test.sh path/to/loom}"); T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
fail() { echo "FAIL: $*"; exit 1; }

for i in $(seq 1 300); do printf 'the cat sat on the mat. '; done > text.txt
printf 'caf\xc3\xa9 \xe2\x9c\x93\n' >> text.txt
"$LOOM" data convert --text text.txt bytes.shard > conv.log || { cat conv.log; fail "convert bytes"; }
grep -q "vocabulary 256 bytes" conv.log || { cat conv.log; fail "bytes: not 256 tokens"; }
"$LOOM" data convert --text text.txt chars.shard --vocab chars > conv2.log || fail "convert chars"
# Distinct characters: "the cat sat on the mat. " has t h e space c a s o n m . (11), plus
# f, e-acute, the check mark and the newline of the last line: 15.
grep -q "vocabulary 15 chars" conv2.log || { cat conv2.log; fail "chars: not 15 tokens"; }
"$LOOM" data inspect chars.shard > inspect.log || { cat inspect.log; fail "inspect"; }
grep -q "vocab:    15 tokens, chars" inspect.log || { cat inspect.log; fail "inspect: no vocabulary"; }
"$LOOM" data inspect --json bytes.shard | grep -q '"vocabulary":{"kind":"bytes","size":256}' ||
  fail "inspect --json: no vocabulary"

printf 'abc\xffdef' > bad.txt
rc=0; "$LOOM" data convert --text bad.txt bad.shard --vocab chars > bad.log 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "non-UTF-8 under --vocab chars exited $rc, not 2"
grep -q "byte offset 3" bad.log || { cat bad.log; fail "no byte offset"; }
[ ! -e bad.shard ] || fail "a refused conversion left a shard"
"$LOOM" data convert --text bad.txt bad.shard > /dev/null || fail "bytes refused non-UTF-8"
: > empty.txt
rc=0; "$LOOM" data convert --text empty.txt e.shard > e.log 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "empty" e.log || { cat e.log; fail "empty file: exit $rc"; }
rc=0; "$LOOM" data convert --text text.txt w.shard --vocab words > w.log 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "--vocab words exited $rc"

"$LOOM" train --set model=mlp --set 'mlp.hidden=[16]' --set data.train_shards=bytes.shard \
  --set data.context=1 --set data.validation=0.2 --set batch=32 --set epochs=1 \
  --set progress=lines --set output.dir=run > train.log 2>&1 || { cat train.log; fail "token run"; }
grep -q "tokens/s" train.log && grep -q "bits/byte" train.log || { cat train.log; fail "no token figures"; }
grep -q '"val_bits_per_byte"' run/summary.json || { cat run/summary.json; fail "summary"; }
echo "token CLI: ok"
