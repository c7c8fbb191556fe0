#!/usr/bin/env bash
# loom's Python package (docs/python.md): pytest over tests/python/loom against the package
# installed in .venv (scripts/setup-python-package, which scripts/test runs). Skips (77) with a
# message where the package or pytest is not installed (no network for pip). $1 = the built
# loom, which test_models.py trains a run with (the package carries its own build of the
# libraries).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY="$ROOT/.venv/bin/python"
if [ ! -x "$PY" ] || ! "$PY" -c "import loom._loom, pytest" 2>/dev/null; then
  echo "SKIP: loom's Python package or pytest is not installed in .venv (run scripts/setup-python-package)"
  exit 77
fi
"$PY" -c 'import loom; print(f"testing loom {loom.__version__} ({loom.git_rev}) from {loom.__file__}")'
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# Run from outside the source tree so `import loom` finds the installed package, not python/loom.
export LOOM_BIN=$(realpath "${1:-}" 2>/dev/null || true)
# -rs lists each skipped test with its reason, which scripts/skip-report checks.
cd "$T" && "$PY" -m pytest -q -rs -p no:cacheprovider "$ROOT/tests/python/loom"
