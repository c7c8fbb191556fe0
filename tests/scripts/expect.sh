# Sourced by the script tests that check refusals: `fail MESSAGE` stops the test, and
# `expect2 LOG PATTERN CMD...` asserts that CMD exits 2 with PATTERN in what it printed (LOG).
fail() { echo "FAIL: $*"; exit 1; }
expect2() {
  local log=$1 pattern=$2; shift 2
  local rc=0; "$@" > "$log" 2>&1 || rc=$?
  [ "$rc" = 2 ] || { cat "$log"; fail "'$*' exited $rc, not 2"; }
  grep -qF -- "$pattern" "$log" || { cat "$log"; fail "'$*': no '$pattern' in its message"; }
}
