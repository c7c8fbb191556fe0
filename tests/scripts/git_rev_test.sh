#!/usr/bin/env bash
# cmake/git_rev.cmake, which every build runs: in a scratch git repository it names the commit,
# marks uncommitted edits "-dirty", names the new commit after a commit (a value fixed at
# configure time would not), and leaves the header untouched when nothing changed (so a build
# at the same commit recompiles nothing). Skips without git or cmake.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
command -v git >/dev/null && command -v cmake >/dev/null || { echo "skipped: no git or cmake"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
g() { git -C "$T/repo" -c user.name=t -c user.email=t@t "$@"; }
H=$T/git_rev.h
rev() { cmake -DSOURCE_DIR="$T/repo" -DOUTPUT="$H" -P "$SRC/cmake/git_rev.cmake"; sed -n 's/^#define LOOM_GIT_REV "\(.*\)"$/\1/p' "$H"; }

mkdir "$T/repo"; g init -q; echo a > "$T/repo/f"; g add f; g commit -qm one
first=$(g rev-parse --short=7 HEAD)
[ "$(rev)" = "$first" ] || fail "names $(rev), not $first"
before=$(stat -c %Y "$H"); sleep 1
[ "$(rev)" = "$first" ] && [ "$(stat -c %Y "$H")" = "$before" ] || fail "rewrote the header at the same commit"
echo b > "$T/repo/f"
[ "$(rev)" = "$first-dirty" ] || fail "an edited file gives $(rev), not $first-dirty"
g commit -qam two
second=$(g rev-parse --short=7 HEAD)
[ "$(rev)" = "$second" ] || fail "after a commit: $(rev), not $second"
rm -rf "$T/repo/.git"
[ "$(rev)" = "unknown" ] || fail "outside a git checkout: $(rev), not unknown"
echo "git_rev_test: ok"
