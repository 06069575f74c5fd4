#!/bin/sh
# The module boundary of the lake: the policies' library (gmlake_policies, the engine) calls no socket function
# and holds no lake class; the socket code lives in the lake's library (gmlake_lake), which the Pool links.
# Usage: module_boundaries_test.sh NM POLICIES_ARCHIVE LAKE_ARCHIVE
# The lake's archive is the control: the same look must find socket calls and the lake's classes there, so a
# check that cannot see them (an nm that prints nothing, a renamed function) fails instead of passing.
set -eu
nm_tool=$1
policies=$2
lake=$3

# Socket calls among the archive's undefined symbols.
socket_calls() {
  "$nm_tool" --undefined-only "$1" 2>/dev/null | awk '{ print $NF }' | sed 's/@.*//' |
    grep -E '^(socket|socketpair|connect|bind|listen|accept|accept4|send|recv|sendmsg|recvmsg|getsockopt|setsockopt)$' |
    sort -u || true
}
# The lake's classes among the archive's symbols, defined or not (demangled).
lake_classes() {
  "$nm_tool" -C "$1" 2>/dev/null | grep -oE 'gmlake::(LakeBorrower|LakeLender|LakePeers|make_lake_peers)' | sort -u || true
}

status=0
found=$(socket_calls "$policies")
if [ -n "$found" ]; then
  echo "FAIL: $policies calls socket functions: $(echo $found)"
  status=1
fi
found=$(lake_classes "$policies")
if [ -n "$found" ]; then
  echo "FAIL: $policies holds or uses the lake's code: $(echo $found)"
  status=1
fi
if [ -z "$(socket_calls "$lake")" ] || [ -z "$(lake_classes "$lake")" ]; then
  echo "FAIL: the control found no socket call or lake class in $lake: the check cannot see them"
  status=1
fi
[ $status -eq 0 ] && echo "ok: $policies links no socket code and no lake class; $lake holds them: $(echo $(socket_calls "$lake"))"
exit $status
