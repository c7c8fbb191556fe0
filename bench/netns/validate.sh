#!/bin/bash
# bench/netns/validate.sh - the performance model against real loom runs on this machine, and
# the published anchors, in one run (docs/perf.md records its output):
#
#   sudo bench/netns/validate.sh [--loom PATH] [--steps N] [--repeats R]
#
# 1. calibrates this machine: `loom bench calibrate` (thread transport) and, under
#    `mpirun -np 2`, the MPI lines (loom's ring over shared memory, quiet and beside busy
#    compute);
# 2. `loom scale --validate` runs 1 and 2 workers, fp32 and 1-bit, as threads; 2 MPI ranks
#    unshaped; and 2 MPI ranks in two network namespaces joined by a veth shaped to 1 Gbit/s
#    with tbf (lib.sh; Open MPI's TCP transport over the veth, as compare.sh), each predicted
#    by the cost model from the calibration (the shaped runs for a 1 Gbit/s link);
# 3. prints the validation table, then the anchor table (`--anchors`).
# Run it on an otherwise idle machine: the figures are speeds. Needs root, iproute2, Open MPI.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
LOOM=${LOOM:-$root/build/loom}
STEPS=${STEPS:-150}
REPEATS=${REPEATS:-2}
while [ $# -gt 0 ]; do
  case $1 in
    --loom) LOOM=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "validate.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
# shellcheck source=bench/netns/lib.sh
. "$here/lib.sh"
netns_preflight validate.sh "$LOOM"

netns_begin loom_validate
work=$NB_WORK

echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg): calibrating"
"$LOOM" bench calibrate -o "$work/cal.jsonl" >/dev/null
mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
  "$LOOM" bench calibrate -o "$work/cal_mpi.jsonl" >/dev/null
# The MPI run's own allreduce lines join the thread calibration (its other figures were
# measured with the second rank idle: the thread run's are kept).
grep '"transport":"mpi"' "$work/cal_mpi.jsonl" >>"$work/cal.jsonl"
grep -E '"bench":"(allreduce|gemm)"' "$work/cal.jsonl" | grep -E 'busy|"workers"' | sed 's/^/# /'

netns_up
netns_shape 1gbit
shaped=$(netns_mpirun_cmd "$work/hosts")
"$LOOM" scale --validate --anchors --calibration "$work/cal.jsonl" --steps "$STEPS" \
  --repeats "$REPEATS" --transports thread,mpi --cases 1:fp32,2:fp32,1:onebit,2:onebit \
  --mpi-cases 2:fp32,2:onebit --shaped-mpirun "$shaped" --shaped-cases 2:fp32,2:onebit \
  --shaped-gbps 1
