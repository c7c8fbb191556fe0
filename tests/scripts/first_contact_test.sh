#!/usr/bin/env bash
# A newcomer's path through the CLI: a second run never overwrites the first (exit 2 naming the
# directory; --force and "{n}" are the ways on), a config that fails a late check leaves the
# earlier run alone, a resumed copy writes into the copy, bad `loom data` options and files are
# exit 2 with printable messages, `loom --version` names every optional part of the build, and an
# installed loom (cmake --install) runs from any directory and finds its PyTorch peer.
# $1 = the built loom (in its build tree).
set -euo pipefail
LOOM=$(realpath "${1:?usage: first_contact_test.sh path/to/loom}")
SRC=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
fail() { echo "FAIL: $*"; exit 1; }
TINY=(--set max_steps=10 --set mlp.hidden=[32] --set progress=none --set eval=false)

"$LOOM" --version | grep -Eq "^features: gemm=oneDNN(\+OpenBLAS)? cuda=(yes|no) cudnn=(yes|no) mpi=(yes|no) nccl=(yes|no) onnx=(yes|no)$" ||
  { "$LOOM" --version; fail "loom --version does not name every optional part"; }
# The commit it names is the sources' own (git_rev_test.sh checks that it follows new commits).
# "-dirty" is left out: editing a file after the build is no error.
if head=$(git -C "$SRC" rev-parse --short=7 HEAD 2>/dev/null); then
  "$LOOM" --version | head -1 | grep -q "($head[ ,-]" ||
    { "$LOOM" --version | head -1; fail "loom --version does not name the sources' commit $head"; }
fi

"$LOOM" train "${TINY[@]}" --set output.dir=run > first.log 2>&1 || { cat first.log; fail "first run"; }
grep -q "results in run" first.log || fail "the run does not say where it wrote"
sum() { cat run/config.toml run/metrics.jsonl run/summary.json | md5sum; }
before=$(sum)
rc=0; "$LOOM" train "${TINY[@]}" --set output.dir=run > second.log 2>&1 || rc=$?
[ "$rc" = 2 ] || { cat second.log; fail "a second run into run/ exited $rc, not 2"; }
grep -q 'output.dir "run" already holds a run' second.log || { cat second.log; fail "no message naming run/"; }
[ "$(sum)" = "$before" ] || fail "the refused run changed run/"
rc=0; "$LOOM" train "${TINY[@]}" --set output.dir=run --force --set codec=gzip > late.log 2>&1 || rc=$?
[ "$rc" = 2 ] && [ "$(sum)" = "$before" ] || { cat late.log; fail "codec=gzip (rc $rc) touched run/"; }
"$LOOM" train "${TINY[@]}" --set output.dir=run --force --set max_steps=12 > force.log 2>&1 ||
  { cat force.log; fail "--force"; }
grep -q '"steps": 12' run/summary.json || fail "--force did not replace run/"
"$LOOM" train "${TINY[@]}" --set 'output.dir="n-{n}"' > n1.log 2>&1 &&
  "$LOOM" train "${TINY[@]}" --set 'output.dir="n-{n}"' > n2.log 2>&1 || fail "numbered runs"
[ -f n-1/summary.json ] && [ -f n-2/summary.json ] || fail "no n-1 and n-2"

# Resume a copy: it writes into the copy, though the checkpoint's config names the original.
"$LOOM" train "${TINY[@]}" --set output.dir=orig --set train.checkpoint_every=5 > orig.log 2>&1 ||
  fail "checkpointed run"
cp -r orig copy
orig_sum=$(cat orig/metrics.jsonl orig/summary.json | md5sum)
"$LOOM" train --resume copy --set max_steps=15 > resume.log 2>&1 || { cat resume.log; fail "resume"; }
grep -q "results in copy" resume.log || { cat resume.log; fail "the resume did not write into copy/"; }
grep -q '"steps": 15' copy/summary.json || fail "copy/summary.json"
[ "$(cat orig/metrics.jsonl orig/summary.json | md5sum)" = "$orig_sum" ] || fail "the resume wrote into orig/"

# loom data: negative options and a file whose magic does not match its name.
printf '0.5,1\n0.25,0\n' > a.csv
for opt in "--classes -3" "--chunk-records -1"; do
  rc=0; "$LOOM" data convert a.csv a.shard $opt > opt.log 2>&1 || rc=$?
  [ "$rc" = 2 ] || { cat opt.log; fail "convert $opt exited $rc"; }
done
printf '\x93NUMPZ\x01\x00\xff\x07garbage' > bad.npy
rc=0; "$LOOM" data inspect bad.npy > bad.log 2>&1 || rc=$?
[ "$rc" = 2 ] || { cat bad.log; fail "inspect of a bad .npy exited $rc"; }
grep -q 'not a NumPy .npy file' bad.log || { cat bad.log; fail "no format named"; }
LC_ALL=C grep -q '[^[:print:][:space:]]' bad.log && fail "raw bytes in the message"

# Installed: from any directory, with the PyTorch peer found (PyTorch itself may be missing).
BUILD=$(dirname "$LOOM")
if [ -f "$BUILD/CMakeCache.txt" ]; then
  cmake --install "$BUILD" --prefix "$T/prefix" --component loom > install.log 2>&1 ||
    { cat install.log; fail "cmake --install"; }
  mkdir elsewhere && cd elsewhere
  "$T/prefix/bin/loom" train "$T/prefix/share/loom/configs/mlp.toml" "${TINY[@]}" \
    --set output.dir=installed > installed.log 2>&1 || { cat installed.log; fail "installed loom train"; }
  # A python without torch keeps this short: the peer's line then says how to get PyTorch,
  # which it can only say once the installed peer script was found.
  LOOM_PYTHON=/bin/false "$T/prefix/bin/loom" bench train --steps 10 --repeats 1 --peer default \
    > bench.log 2>&1 || { cat bench.log; fail "installed loom bench train"; }
  grep -q "peer script not found" bench.log && { cat bench.log; fail "the installed peer was not found"; }
  grep -q "pytorch /bin/false 1 thread .*PyTorch is not installed for /bin/false: run scripts/setup-bench" \
    bench.log || { cat bench.log; fail "no peer line saying how to get PyTorch"; }
fi
echo "PASS"
