#!/usr/bin/env bash
# Runs a test under an ISA cap (tests/isa.cmake sets the cap in its environment), unless this
# CPU's own best ISA already is the cap: then oneDNN and loom's dispatch take the same kernels
# capped as uncapped, the capped run would repeat the native run test for test, and it says
# skipped instead (on an AVX2-only CPU, minutes of the suite).
# Usage: run_under_isa_cap.sh CAP ISA_CAP_CHECK COMMAND [ARG...]
#   CAP            avx2 | sse41
#   ISA_CAP_CHECK  the loom_isa_cap_check executable (tests/tensor/cpu/isa_cap_check.cc)
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 avx2|sse41 ISA_CAP_CHECK COMMAND [ARG...]" >&2
  exit 2
fi
cap=$1 check=$2
shift 2
set +e
native=$(env -u ONEDNN_MAX_CPU_ISA -u DNNL_MAX_CPU_ISA -u LOOM_MAX_CPU_ISA LOOM_GEMM=onednn \
  "$check" --native-is "$cap")
rc=$?
set -e
case $rc in
  0)
    echo "$native"
    echo "SKIP: this CPU's own ISA is the $cap cap: the native run already ran these kernels"
    exit 77
    ;;
  1) exec "$@" ;;
  *)
    echo "$0: $check --native-is $cap failed (exit $rc)" >&2
    exit 1
    ;;
esac
