#!/usr/bin/env bash
# scripts/skip-report on a JUnit file of ctest's shape: skips grouped by reason (a script's
# `SKIP:` line, gtest's message, pytest's -rs lines inside a passing test), each matched against
# an expected-reasons file; --strict fails on a reason not in it; the closing line counts
# ctest's tests; a missing or malformed file exits 2 naming it. ($1, the built loom, is unused.)
set -euo pipefail
. "$(dirname "$(realpath "$0")")/expect.sh"  # fail, expect2
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REPORT=("$(command -v python3)" "$ROOT/scripts/skip-report")
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cat > "$T/junit.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="t" tests="4">
<testcase name="script.a" status="run"><system-out>ok
SKIPPED [1] ../t/test_x.py:18: could not import 'torch': No module named 'torch'
</system-out></testcase>
<testcase name="script.b" status="fail"><failure message="Failed"/><system-out>bad</system-out></testcase>
<testcase name="script.c" status="notrun"><skipped message="SKIP_RETURN_CODE=77"/><system-out>SKIP: no GPU here
</system-out></testcase>
<testcase name="Gpu.D" status="notrun"><skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/><system-out>[ RUN      ] Gpu.D
x.cc:3: Skipped
no GPU here

[  SKIPPED ] Gpu.D (0 ms)
</system-out></testcase>
</testsuite>
XML
printf '# test\n^no GPU here | none on this machine\n' > "$T/expected.txt"

out=$("${REPORT[@]}" "$T/junit.xml" "$T/expected.txt" --strict) && rc=0 || rc=$?
echo "$out"
[ "$rc" = 1 ] || fail "--strict with an unexpected reason exited $rc, not 1"
grep -q "2 x no GPU here  \[expected: none on this machine\]" <<< "$out" || fail "grouping"
grep -q "could not import 'torch'.*UNEXPECTED" <<< "$out" || fail "pytest skip not reported"
grep -q "script.a: pytest ../t/test_x.py:18" <<< "$out" || fail "pytest skip's test"
grep -qx "ctest: 1 passed, 1 failed, 2 skipped" <<< "$out" || fail "closing line"
"${REPORT[@]}" "$T/junit.xml" "$T/expected.txt" > /dev/null || fail "without --strict: not 0"

printf '^no GPU here | none\nimport .torch | no torch\n' > "$T/all.txt"
"${REPORT[@]}" "$T/junit.xml" "$T/all.txt" --strict > /dev/null || fail "every reason expected: not 0"

expect2 "$T/e1.log" "$T/none.xml" "${REPORT[@]}" "$T/none.xml" "$T/expected.txt"
printf 'no separator here\n' > "$T/bad.txt"
expect2 "$T/e2.log" "bad.txt:1" "${REPORT[@]}" "$T/junit.xml" "$T/bad.txt"
echo "<testsuite" > "$T/broken.xml"
expect2 "$T/e3.log" "broken.xml" "${REPORT[@]}" "$T/broken.xml" "$T/expected.txt"
echo PASS
