#!/usr/bin/env bash
# Bad input to a language-model run, from the command line: each is exit 2 with a message naming
# the problem, before anything is trained: an empty corpus, a corpus shorter than one context
# window, a checkpoint of another vocabulary than the data's, a context longer than the model's
# position table, a token shard that fails its checksum. Text that is not UTF-8 converts and
# trains as bytes (and is refused, naming the byte offset, as characters). A prompt outside the
# vocabulary is tests/scripts/sample_test.sh's. $1 = the built loom.
set -euo pipefail
. "$(dirname "$(realpath "$0")")/expect.sh"  # fail, expect2
LOOM=$(realpath "${1:?usage: token_bad_input_test.sh path/to/loom}"); T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
model() {  # model VOCAB MAX_LEN > file: a one-block transformer
  cat <<TOML
[[layer]]
type = "embedding"
vocab = $1
dim = 16
[[layer]]
type = "position_embedding"
name = "pos"
max_len = $2
dim = 16
[[layer]]
type = "layernorm"
[[layer]]
type = "attention"
name = "attn"
dim = 16
heads = 2
[[layer]]
type = "add"
inputs = ["pos", "attn"]
[[layer]]
type = "layernorm"
[[layer]]
type = "linear"
out = $1
TOML
}
train() {  # train SHARD CONTEXT MODEL OUT [--set ...]
  local shard=$1 context=$2 m=$3 out=$4; shift 4
  "$LOOM" train --set model="$m" --set data.train_shards="$shard" --set data.context="$context" \
    --set batch=4 --set max_steps=6 --set eval=false --set progress=none \
    --set output.dir="$out" "$@"
}

# An empty corpus holds no tokens.
: > empty.txt
expect2 empty.log "empty" "$LOOM" data convert --text empty.txt empty.shard
[ ! -e empty.shard ] || fail "an empty corpus left a shard"

# A corpus shorter than one window of the context (and its next token).
printf 'short text\n' > short.txt
"$LOOM" data convert --text short.txt short.shard > /dev/null
model 256 16 > bytes16.toml
expect2 short.log "data.context = 16" train short.shard 16 bytes16.toml short_run
[ ! -e short_run ] || fail "a refused run made its output folder"

# Text that is not UTF-8 is bytes: it converts and trains; as characters it is refused.
for i in $(seq 1 200); do printf 'caf\xc3\xa9 \xff\xfe\x00 end\n'; done > latin.txt
"$LOOM" data convert --text latin.txt latin.shard > latin.log 2>&1 || { cat latin.log; fail "bytes convert"; }
train latin.shard 16 bytes16.toml latin_run > latin_train.log 2>&1 ||
  { cat latin_train.log; fail "training on bytes that are not UTF-8"; }
expect2 latin_chars.log "byte offset 6" "$LOOM" data convert --text latin.txt latin_chars.shard --vocab chars

# A context longer than the model's position table.
expect2 maxlen.log "more than max_len = 16" train latin.shard 32 bytes16.toml long_run

# A token shard with one flipped byte in its records fails its chunk's CRC, naming the shard.
cp latin.shard flipped.shard
python3 - flipped.shard <<'PY'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    data_offset = struct.unpack("<I", f.read(16)[12:16])[0]
    f.seek(data_offset + 7)
    b = f.read(1)
    f.seek(data_offset + 7)
    f.write(bytes([b[0] ^ 0x01]))
PY
expect2 flipped.log "flipped.shard" train flipped.shard 16 bytes16.toml flipped_run
grep -qi "crc" flipped.log || { cat flipped.log; fail "the checksum failure is not named"; }

# A checkpoint of another vocabulary: the same size, other characters.
for i in $(seq 1 200); do printf 'hello, world\n'; done > lower.txt
for i in $(seq 1 200); do printf 'HELLO, WORLD\n'; done > upper.txt
"$LOOM" data convert --text lower.txt lower.shard --vocab chars > /dev/null
"$LOOM" data convert --text upper.txt upper.shard --vocab chars > /dev/null
model 10 16 > chars16.toml
train lower.shard 16 chars16.toml lower_run --set train.checkpoint_every=3 > lower.log 2>&1 ||
  { cat lower.log; fail "training on lower.shard"; }
ck=$(ls -d lower_run/checkpoints/* | head -1)
[ -n "$ck" ] || fail "no checkpoint in lower_run"
expect2 vocab.log "vocabulary" train upper.shard 16 chars16.toml lower_run --set train.resume="$ck"
[ -e "$ck" ] || fail "the refused resume removed its checkpoint"
echo "token_bad_input_test: ok"
