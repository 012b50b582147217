#!/bin/bash
# t_limits.sh: a sandbox owns its processes. Removal and expiry (TTL,
# idle) end every process in the sandbox's network namespace, however it
# got there (here: nsenter, as `ip netns exec` does), SIGKILL after the
# grace for those that ignore SIGTERM, and the records say how many;
# on_end: isolate keeps them, without network. The policy's resources:
# hold what `sluice run` starts: a bounded fork bomb under pids: 64 never
# has more than 64 processes, a memory hog under memory: 64MiB is
# OOM-killed, timeout: 2s ends sleep 60 with exit 124, each recorded as a
# finding; a malformed value is refused at FILE:LINE:COL; a restarted
# sluiced adopts the cgroups of commands still running, limits and all.
# Fork bombs and memory hogs run only under the limit they test, and are
# bounded in count.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

for t in jq python3 nsenter setsid; do
	command -v "$t" >/dev/null || { not_ok "$t is installed"; finish; }
done
[ -d /sys/fs/cgroup/pids ] || [ -f /sys/fs/cgroup/cgroup.controllers ] ||
	{ not_ok "a cgroup tree"; finish; }
world_up || { not_ok "world_up"; finish; }

POL=$E2E_TMP/policies
CFG=$E2E_TMP/sluice.yaml
mkdir -p "$POL"
pol() { # NAME RESOURCES-LINES
	printf 'version: 1\nname: %s\negress:\n  allow:\n    - cidr: 192.0.2.10/32\n      ports: [80]\n%s' "$1" "$2" >"$POL/$1.yaml"
}
pol plain ''
pol bomb $'resources:\n  pids: 64\n'
pol hog $'resources:\n  memory: 64MiB\n'
pol slow $'resources:\n  timeout: 2s\n'
pol quiet $'resources:\n  idle: 2s\n'
pol hold $'resources:\n  pids: 16\n  memory: 128MiB\n  cpu: 0.5\n'
world_sluiced_config "$CFG" "$POL"
printf 'sandboxes:\n  kill_grace: 1s\n' >>"$CFG"
world_start_sluiced "$CFG" || { not_ok "sluiced starts"; finish; }

sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
AUDIT_DB=$WORLD_DIR/state/audit.db
# recs KIND: the records of KIND, one JSON object a line.
recs() { "$SLUICE" audit tail --db "$AUDIT_DB" --kind "$1" -n 1000 2>/dev/null; }
rec_has() { recs "$1" | grep -- "$2" | grep -q -- "$3"; }
ns_ino() { stat -L -c %i "/run/netns/sluice-$1" 2>/dev/null; }
# ns_pids INODE: the processes whose network namespace is INODE (zombies
# have none); procs INODE: how many.
ns_pids() {
	local p
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/ns/net" 2>/dev/null)" = "net:[$1]" ] && echo "${p#/proc/}"
	done
}
procs() { ns_pids "$1" | wc -l; }
procs_are() { [ "$(procs "$1")" = "$2" ]; }
# spawn ID N M: N processes in sandbox ID that end at SIGTERM and M that
# ignore it, started as `ip netns exec` would, not through sluice.
spawn() {
	setsid nsenter --net="/run/netns/sluice-$1" -- sh -c '
		i=0; while [ $i -lt '"$2"' ]; do sleep 1000 & i=$((i + 1)); done
		i=0; while [ $i -lt '"$3"' ]; do
			sh -c "trap \"\" TERM; exec sleep 1000" & i=$((i + 1)); done
		exec sleep 1000' </dev/null >/dev/null 2>&1 &
	disown
	INOS+=" $(ns_ino "$1")"
}
cgdir() { # ID: its pids group (v1) or its group (v2)
	if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
		find /sys/fs/cgroup -maxdepth 6 -type d -path "*/sluice-*/$1" 2>/dev/null | head -n 1
	else
		find /sys/fs/cgroup/pids -maxdepth 6 -type d -path "*/sluice-*/$1" 2>/dev/null | head -n 1
	fi
}
# Whatever a failed check leaves in the namespaces this test filled.
INOS=
kill_ns_procs() {
	local i
	for i in $INOS; do
		# shellcheck disable=SC2046
		kill -KILL $(ns_pids "$i") 2>/dev/null
	done
	true
}
cleanup_push kill_ns_procs
# fill ID POLICY N M [CREATE-ARGS...]: sandbox ID made with POLICY and N
# processes that end at SIGTERM, M that ignore it, and their sh (INO: its
# namespace).
fill() {
	local id=$1 pol=$2 n=$3 m=$4
	shift 4
	sl sandbox create --policy "$pol" --id "$id" "$@" >/dev/null || not_ok "create $id"
	INO=$(ns_ino "$id")
	spawn "$id" "$n" "$m"
	check "$((n + m + 1)) processes in $id" wait_for 10 procs_are "$INO" $((n + m + 1))
}

A=t$$-a
# ------------------------------------------------------------ rm kills
fill "$A" plain 39 10
check "sandbox rm $A" sl sandbox rm "$A"
# Its id is not free while its processes are being ended (its cgroup has
# that name): a create of it is refused until then, or, when this comes
# after the grace, follows the end's record.
if sl sandbox create --policy plain --id "$A" >/dev/null 2>&1; then A_AGAIN=1; else A_AGAIN=0; fi
check "every process of $A is gone after rm" wait_for 20 procs_are "$INO" 0
check "the delete record counts 50 processes" \
    rec_has sandbox.delete "$A" "processes=50 on_end=kill"
check "sandbox.terminated: those ignoring SIGTERM needed SIGKILL" wait_for 10 \
    eval "recs finding | grep -- '$A' | grep sandbox.terminated | grep -q 'processes=50 sigterm=50 sigkill=1[0-9] left=0'"
seq_of() { # KIND TYPE-OR-DECISION: the seq of the first such record about $A
	"$SLUICE" audit tail --db "$AUDIT_DB" --kind "$1" --format json -n 1000 2>/dev/null |
	    jq -s -r --arg id "$A" --arg t "$2" '[.[] | select(.sandbox.id == $id and ((.type // .result // "") == $t))] | .[0].seq // empty'
}
if [ "$A_AGAIN" = 1 ]; then
	t_seq=$(seq_of finding sandbox.terminated)
	c_seq=$("$SLUICE" audit tail --db "$AUDIT_DB" --kind sandbox.create --format json -n 1000 2>/dev/null |
	    jq -s -r --arg id "$A" '[.[] | select(.sandbox.id == $id and .decision == "allow")] | .[1].seq // empty')
	check "a create of $A's id comes only after its end" test -n "$t_seq" -a -n "$c_seq" -a "${c_seq:-0}" -gt "${t_seq:-0}"
	sl sandbox rm "$A" >/dev/null
else
	ok "a create of $A's id is refused while its processes are ended"
fi

# ------------------------------------------------------------ TTL, idle
B=t$$-b
fill "$B" plain 3 2 --ttl 2s
check "TTL expiry ends every process of $B" wait_for 30 procs_are "$INO" 0
check "the expire record says ttl and counts them" \
    rec_has sandbox.expire "$B" "ttl processes=6"
C=t$$-c
fill "$C" quiet 2 1
check "idle expiry ends every process of $C" wait_for 30 procs_are "$INO" 0
check "the expire record says idle" rec_has sandbox.expire "$C" "idle processes=4"
check "$C is gone" wait_for 5 eval "! sl sandbox show '$C' >/dev/null 2>&1"

# A new flow the kernel lets through is activity: the sandbox's idle time
# starts again (what idle expiry counts from).
D=t$$-d
sl sandbox create --policy plain --id "$D" >/dev/null
idle_of() { sl sandbox show "$D" 2>/dev/null | jq -r '.idle_ms // empty'; }
idle_at_least() { local i; i=$(idle_of); [ -n "$i" ] && [ "$i" -ge "$1" ]; }
idle_below() { local i; i=$(idle_of); [ -n "$i" ] && [ "$i" -lt "$1" ]; }
check "$D has been quiet for 3 s" wait_for 20 idle_at_least 3000
world_sandbox "$D" curl -s -m 5 -o /dev/null "http://$WORLD_PKG/" ||
    not_ok "$D fetches from the allowed address"
check "an allowed flow makes $D active again" wait_for 10 idle_below 3000
sl sandbox rm "$D" >/dev/null

# ------------------------------------------------------------ pids
out=$(sl run --policy bomb -- /usr/bin/python3 "$E2E_DIR/tools/fork_bomb.py" 500 2>&1)
check_match "a bounded fork bomb under pids: 64 is held (63 children at most)" \
    '^started=6[0-3] failed=4[3-4][0-9]$' "$out"
check "a pids_limit finding records the refused forks" wait_for 10 \
    eval "recs finding | grep sandbox.pids_limit | grep -q 'pids=64'"
check "the host answers at once after it" timeout 5 true
# The command cannot leave its group: as uid 0 without capabilities it
# owns root's cgroup.procs files, so what it can reach of them matters.
out=$(sl run --policy bomb -- sh -c '
	for f in /sys/fs/cgroup/pids/cgroup.procs /sys/fs/cgroup/cgroup.procs \
	    /sys/fs/cgroup/unified/cgroup.procs /proc/1/root/sys/fs/cgroup/pids/cgroup.procs \
	    /proc/$PPID/root/sys/fs/cgroup/pids/cgroup.procs; do
		(echo $$ >"$f") 2>/dev/null && echo "escaped through $f"
	done
	grep -E "^[0-9]+:pids:|^0::" /proc/self/cgroup' 2>&1)
check_fails "a command under sluice run cannot move itself out of its cgroup" \
    grep -q escaped <<<"$out"
check_match "it is still in its sandbox's group" ':pids:/.*sluice-[0-9a-f]{8}/sb-[0-9a-f]+$|^0::/.*sluice-[0-9a-f]{8}/sb-' "$out"

# ------------------------------------------------------------ memory
sl run --policy hog -- /usr/bin/python3 -c 'x = b"x" * (512 << 20)' >/dev/null 2>&1
rc=$?
check_eq "a memory hog under memory: 64MiB is killed (137)" 137 "$rc"
check "an oom_kill finding records it" wait_for 10 \
    eval "recs finding | grep sandbox.oom_kill | grep -q 'memory=67108864'"

# ------------------------------------------------------------ timeout
start=$(date +%s)
sl run --policy slow -- sleep 60 2>/dev/null
rc=$?
check_eq "timeout: 2s ends sleep 60 with exit 124" 124 "$rc"
check "well before sleep 60 would have ended" test $(( $(date +%s) - start )) -lt 40
check "a timeout finding records it" wait_for 10 \
    eval "recs finding | grep sandbox.timeout | grep -q 'timeout=2s'"

# ------------------------------------------------------------ malformed
printf 'version: 1\nname: bad\nresources:\n  pids: 64\n  memory: lots\n' >"$E2E_TMP/bad.yaml"
out=$("$SLUICE" policy check "$E2E_TMP/bad.yaml" 2>&1)
rc=$?
check "a malformed resources value is refused" test "$rc" -ne 0
check_match "at FILE:LINE:COL" "$E2E_TMP/bad.yaml:5:11: invalid size \"lots\"" "$out"
printf 'version: 1\nname: bad2\nresources:\n  cpu: 1.2345\n' >"$E2E_TMP/bad2.yaml"
out=$("$SLUICE" policy check "$E2E_TMP/bad2.yaml" 2>&1)
check_match "cpu too precise, at FILE:LINE:COL" "$E2E_TMP/bad2.yaml:4:8: invalid cpu" "$out"

# ------------------------------------------------------------ restart adopts
D=t$$-d
sl sandbox create --policy hold --id "$D" >/dev/null || not_ok "create $D"
INOS+=" $(ns_ino "$D")"
setsid "$SLUICE" -s "$WORLD_SOCK" exec "$D" -- sleep 1000 </dev/null >/dev/null 2>&1 &
disown
G=$(cgdir "$D")
check "$D has a cgroup with pids.max 16" test "$(cat "$G/pids.max" 2>/dev/null)" = 16
check "the exec'd command is in it" wait_for 10 eval "[ \$(wc -l <'$G/cgroup.procs') -ge 1 ]"
MEMBER=$(head -n 1 "$G/cgroup.procs")
world_stop_sluiced
check "stopped, the group and its member stay" test -d "$G" -a -d "/proc/$MEMBER"
# A group no sandbox has (left by a crash between the group and its row),
# with a process in it: the restart removes both.
O=$(dirname "$G")/t$$-orphan
mkdir "$O"
setsid sleep 1000 </dev/null >/dev/null 2>&1 &
OPID=$!
disown
echo "$OPID" >"$O/cgroup.procs"
cleanup_push "kill -KILL $OPID 2>/dev/null; rmdir '$O' 2>/dev/null"
check "the orphan group holds its process" grep -qx "$OPID" "$O/cgroup.procs"
world_start_sluiced "$CFG" || { not_ok "sluiced restarts"; finish; }
check "restarted, a group no sandbox has is removed" wait_for 10 eval "! test -d '$O'"
check "and its process killed" wait_for 10 eval "! kill -0 $OPID 2>/dev/null"
check "an orphan record says so" rec_has finding "sandbox.orphan" "t$$-orphan"
check "restarted, the same group keeps its limit" test "$(cat "$G/pids.max" 2>/dev/null)" = 16
check "and its member" grep -qx "$MEMBER" "$G/cgroup.procs"
check "sandbox rm $D" sl sandbox rm "$D"
check "the member is gone" wait_for 20 eval "! grep -q . /proc/$MEMBER/ns/net 2>/dev/null && ! [ -e /proc/$MEMBER/ns/net ] || ! kill -0 $MEMBER"
check "and the group" wait_for 20 eval "! test -d '$G'"

# ------------------------------------------------------------ isolate
world_stop_sluiced
sed -i 's/kill_grace: 1s/kill_grace: 1s\n  on_end: isolate/' "$CFG"
world_start_sluiced "$CFG" || { not_ok "sluiced starts with on_end: isolate"; finish; }
E=t$$-e
fill "$E" plain 2 0
check "sandbox rm $E" sl sandbox rm "$E"
check "the delete record says isolate" rec_has sandbox.delete "$E" "processes=3 on_end=isolate"
check "isolate: its processes stay" procs_are "$INO" 3
P=$(ns_pids "$INO" | head -n 1)
links=$(nsenter --net="/proc/$P/ns/net" ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | tr '\n' ' ')
check_eq "without network: only lo is left in their namespace" "lo " "$links"
kill_ns_procs
finish
