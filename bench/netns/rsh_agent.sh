#!/bin/bash
# bench/netns/rsh_agent.sh - what Open MPI's rsh launcher calls instead of ssh:
#   rsh_agent.sh [ssh options...] HOST COMMAND...
# HOST is one of the test bed's namespaces; COMMAND (Open MPI's orted) runs inside it, in a
# private UTS namespace whose hostname is HOST, so each namespace looks like its own node
# (Open MPI then uses TCP between them rather than shared memory).
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
node=$1
shift
exec ip netns exec "$node" unshare --uts /bin/sh -c "hostname $node; $*"
