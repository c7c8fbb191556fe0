# shellcheck shell=bash
# bench/netns/lib.sh - sourced, not run. A two-"node" test bed on one machine: two network
# namespaces joined by one veth pair, each end rate-limited with tbf (the kernel here has no
# netem, so bandwidth can be shaped but latency cannot be added). Every name and address
# lives inside namespaces this script creates; nothing outside is touched.
#
#   netns_up            create $NB_NS0 and $NB_NS1 (10.231.0.1 <-> 10.231.0.2)
#   netns_shape RATE    tbf on the egress of both veth ends; RATE like 1gbit, 10gbit, or off
#   netns_down          delete both namespaces (the veth goes with them)
#   netns_mpirun_cmd F [S]  the mpirun command putting S ranks (default 1) in each namespace
#                       (hostfile F), ranks 0..S-1 in the first
#   netns_preflight S L what every test-bed script checks first (root, loom L with MPI, mpirun)
#   netns_begin PREFIX  a scratch folder $NB_WORK; it and the namespaces go on any exit
#
# Names carry the caller's pid so two runs (or the peers' dlbench* bed) never collide.

# shellcheck disable=SC2034  # the NB_* names are read by the scripts that source this
NB_TAG=${NB_TAG:-lnb$$}
NB_NS0=${NB_TAG}a
NB_NS1=${NB_TAG}b
NB_NET=10.231.0.0/24  # used by compare.sh (mpirun --mca *_if_include)
NB_IP0=10.231.0.1
NB_IP1=10.231.0.2
NB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# netns_preflight SCRIPT LOOM: exits 2, naming SCRIPT and what is missing, unless this runs as
# root (namespaces, tc) with a loom binary built with MPI and Open MPI's mpirun on the PATH.
netns_preflight() {
  local me=$1 loom=$2
  [ "$(id -u)" = 0 ] || { echo "$me: needs root (network namespaces, tc)" >&2; exit 2; }
  [ -x "$loom" ] || { echo "$me: no loom binary at $loom (--loom PATH)" >&2; exit 2; }
  "$loom" --version | grep -q "mpi=yes" || { echo "$me: $loom built without MPI" >&2; exit 2; }
  command -v mpirun >/dev/null || { echo "$me: mpirun not found (openmpi-bin)" >&2; exit 2; }
}

# netns_begin PREFIX: makes the scratch folder NB_WORK (/tmp/PREFIX.XXXXXX) and arranges that
# it and both namespaces are deleted on exit, whatever happens (an interrupt exits 130).
netns_begin() {
  NB_WORK=$(mktemp -d "/tmp/$1.XXXXXX")
  trap 'netns_down; rm -rf "$NB_WORK"' EXIT
  trap 'exit 130' INT TERM
}

# netns_mpirun_cmd HOSTFILE [SLOTS]: writes a hostfile naming the two namespaces as nodes with
# SLOTS (default 1) each and prints the mpirun command (add -np and the program) that starts
# SLOTS ranks in each, the first namespace's slots filled first (--map-by slot), through
# rsh_agent.sh, over Open MPI's TCP transport on the veth. --bind-to none: both "nodes" are
# this machine, and each would bind its rank to core 0.
netns_mpirun_cmd() {
  local slots=${2:-1}
  printf '%s slots=%s\n%s slots=%s\n' "$NB_NS0" "$slots" "$NB_NS1" "$slots" >"$1"
  echo "ip netns exec $NB_NS0 mpirun --allow-run-as-root --hostfile $1 --bind-to none" \
    "--map-by slot" \
    "--mca plm_rsh_agent $NB_DIR/rsh_agent.sh --mca plm_rsh_no_tree_spawn 1" \
    "--mca oob_tcp_if_include $NB_NET --mca btl tcp,self --mca btl_tcp_if_include $NB_NET"
}

netns_down() {
  local ns
  for ns in "$NB_NS0" "$NB_NS1"; do
    ip netns del "$ns" 2>/dev/null || true
  done
}

netns_up() {
  netns_down
  ip netns add "$NB_NS0"
  ip netns add "$NB_NS1"
  # Create the pair inside the first namespace, then move one end: no interface ever
  # appears in the root namespace.
  ip -n "$NB_NS0" link add "${NB_TAG}0" type veth peer name "${NB_TAG}1"
  ip -n "$NB_NS0" link set "${NB_TAG}1" netns "$NB_NS1"
  ip -n "$NB_NS0" addr add "$NB_IP0/24" dev "${NB_TAG}0"
  ip -n "$NB_NS1" addr add "$NB_IP1/24" dev "${NB_TAG}1"
  local ns
  for ns in "$NB_NS0" "$NB_NS1"; do ip -n "$ns" link set lo up; done
  ip -n "$NB_NS0" link set "${NB_TAG}0" up
  ip -n "$NB_NS1" link set "${NB_TAG}1" up
  # (no ping on this machine: check that the kernel routes to the peer over the veth)
  ip -n "$NB_NS0" route get "$NB_IP1" | grep -q "dev ${NB_TAG}0" ||
    { echo "netns: $NB_NS0 has no route to $NB_IP1" >&2; return 1; }
}

# Bytes of burst for a tbf at RATE: about 2 ms of traffic, at least 32 KiB (a token bucket
# smaller than a few packets throttles below the rate).
netns_burst() {
  local rate=$1 bits
  case $rate in
    *gbit) bits=$(awk "BEGIN{print ${rate%gbit} * 1e9}") ;;
    *mbit) bits=$(awk "BEGIN{print ${rate%mbit} * 1e6}") ;;
    *) echo "netns: rate '$rate' is not NNgbit / NNmbit / off" >&2; return 1 ;;
  esac
  awk "BEGIN{b = $bits / 8 * 0.002; if (b < 32768) b = 32768; printf \"%d\", b}"
}

netns_shape() {
  local rate=$1 burst="" pair ns dev
  [ "$rate" = off ] || burst=$(netns_burst "$rate") || return 1
  for pair in "$NB_NS0:${NB_TAG}0" "$NB_NS1:${NB_TAG}1"; do
    ns=${pair%%:*}
    dev=${pair#*:}
    ip netns exec "$ns" tc qdisc del dev "$dev" root 2>/dev/null || true
    if [ "$rate" != off ]; then
      ip netns exec "$ns" tc qdisc add dev "$dev" root tbf rate "$rate" burst "$burst" latency 50ms
    fi
  done
}
