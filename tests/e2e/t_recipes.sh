#!/bin/bash
# t_recipes.sh: the provider recipes of examples/providers/README.md, run.
#
# Sluice only makes the namespace; a container runtime or sandbox tool runs
# the workload in it. A recipe that is only written down rots: a runtime
# that copies the host's resolv.conf, or silently makes a namespace of its
# own instead of joining the given one, would leave the workload unpoliced
# (or cut off) while the README still promised otherwise. So each recipe is
# run here with the runtime Debian packages (runc, podman, bubblewrap) on a
# workload built on the spot from busybox-static (no registry is reachable
# from a test): the same probe in each, and three answers asserted from
# outside as well as from the probe's own output:
#   (a) an allowed name (pkg.example.com:80) is fetched, by name, through
#       the sandbox's DNS;
#   (b) the cloud metadata service (169.254.169.254) is not reached;
#   (c) a denied name (web.example.org) does not resolve, and its server
#       is not reached by address either.
# A runtime that cannot work here prints "# skip: why" and the others are
# still asserted. RECIPES="attach cni" runs only those. Every container, bundle, image and storage directory
# lives under $E2E_TMP and is removed at exit, also on failure.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

for t in jq busybox timeout; do
	command -v "$t" >/dev/null || { not_ok "$t is installed"; finish; }
done

world_up || { not_ok "world_up"; finish; }
POL=$E2E_TMP/policies
mkdir -p "$POL"
cat >"$POL/recipe.yaml" <<'EOF'
version: 1
name: recipe
egress:
  allow:
    - host: pkg.example.com
      ports: [80]
EOF
world_sluiced_config "$E2E_TMP/sluice.yaml" "$POL"
world_start_sluiced "$E2E_TMP/sluice.yaml" || { not_ok "sluiced starts"; finish; }

sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }

# mk ID: a sandbox with the recipe policy; its JSON in $E2E_TMP/ID.json.
mk() {
	sl sandbox create --policy recipe --id "$1" >"$E2E_TMP/$1.json" &&
	    test "$(jq -r .netns_path "$E2E_TMP/$1.json")" = "/run/netns/sluice-$1"
}
# dns_of ID: the resolver the sandbox is told to use, from the create answer.
dns_of() { jq -r '.dns // empty' "$E2E_TMP/$1.json" | cut -d/ -f1; }

# --------------------------------------------------------------- workload
# A root file system with busybox and its applet links, plus the probe.
# The probe prints one line per check, "NAME rc=N" followed by what the
# client said, so that the host can assert both the exit status and the
# output (an allowed fetch must return the index's body, a denied name must
# fail at resolution, not at some other step).
ROOTFS=$E2E_TMP/rootfs
mkdir -p "$ROOTFS/bin" "$ROOTFS/etc" "$ROOTFS/proc" "$ROOTFS/sys" \
    "$ROOTFS/dev" "$ROOTFS/tmp"
cp "$(command -v busybox)" "$ROOTFS/bin/busybox"
for a in $(busybox --list); do
	[ "$a" = busybox ] || ln -sf busybox "$ROOTFS/bin/$a"
done
: >"$ROOTFS/etc/resolv.conf"
echo 'root:x:0:0:root:/:/bin/sh' >"$ROOTFS/etc/passwd"
echo 'root:x:0:' >"$ROOTFS/etc/group"
cat >"$ROOTFS/probe.sh" <<'EOF'
#!/bin/sh
# One line per check: NAME rc=N OUTPUT (output on one line). Every tool
# is busybox's, also where the host's file system is seen (bubblewrap).
# Debian's busybox wget has no -T (and crashes on it): timeout bounds it.
p() {
	name=$1; shift
	out=$("$@" 2>&1); rc=$?
	echo "$name rc=$rc $(echo "$out" | tr '\n' ' ')"
}
p allowed busybox timeout 10 busybox wget -q -O - http://pkg.example.com/
p metadata busybox timeout 10 busybox wget -q -O - http://169.254.169.254/latest/meta-data/
p denied-name busybox timeout 10 busybox wget -q -O - http://web.example.org/
p denied-addr busybox timeout 10 busybox wget -q -O - http://203.0.113.80/
p resolv busybox cat /etc/resolv.conf
EOF
chmod 755 "$ROOTFS/probe.sh"

# judge RUNTIME OUTFILE ID: the assertions on one probe run.
judge() {
	local rt=$1 f=$2 id=$3 line dns
	dns=$(dns_of "$id")
	line=$(grep '^allowed ' "$f")
	check_eq "$rt: (a) the allowed name is fetched through the sandbox" \
	    "allowed rc=0 package index " "$line"
	check_match "$rt: the workload's resolv.conf is the sandbox's DNS" \
	    "^resolv rc=0 .*nameserver $dns( |$)" "$(grep '^resolv ' "$f")"
	line=$(grep '^metadata ' "$f")
	check_match "$rt: (b) the metadata service is refused" \
	    '^metadata rc=[1-9]' "$line"
	check_eq "$rt: (b) the metadata server saw nothing" "" \
	    "$(world_log metadata)"
	line=$(grep '^denied-name ' "$f")
	check_match "$rt: (c) the denied name does not resolve" \
	    '^denied-name rc=[1-9].*bad address' "$line"
	line=$(grep '^denied-addr ' "$f")
	check_match "$rt: (c) the denied server is refused by address" \
	    '^denied-addr rc=[1-9]' "$line"
	check_eq "$rt: (c) the denied server saw nothing" "" "$(world_log web)"
	check_match "$rt: the allowed server saw the request from sluice's uplink" \
	    "\"src\":\"$WORLD_HOST_V4\"" "$(world_log pkg)"
}
clear_logs() { world_log_clear pkg; world_log_clear web; world_log_clear metadata; }

# ------------------------------------------------------------------- runc
R=rec$$-runc
run_runc() {
	local b=$E2E_TMP/bundle st=$E2E_TMP/runc-state ns out=$E2E_TMP/runc.out
	command -v runc >/dev/null || { echo "# skip: runc: not installed"; return 0; }
	check "runc: sandbox is created" mk "$R" || return 0
	ns=$(jq -r .netns_path "$E2E_TMP/$R.json")
	mkdir -p "$b" "$st"
	cp -a "$ROOTFS" "$b/rootfs"
	printf 'nameserver %s\n' "$(dns_of "$R")" >"$b/resolv.conf"
	(cd "$b" && runc spec) || { not_ok "runc spec"; return 0; }
	jq --arg ns "$ns" --arg rc "$b/resolv.conf" '
	    .process.terminal = false |
	    .process.args = ["/bin/sh", "/probe.sh"] |
	    .linux.namespaces |= map(if .type == "network"
		then .path = $ns else . end) |
	    .mounts += [{destination: "/etc/resolv.conf", type: "bind",
		source: $rc, options: ["bind", "ro"]}]' \
	    "$b/config.json" >"$b/config.new" && mv "$b/config.new" "$b/config.json"
	cleanup_push "runc --root '$st' delete -f '$R'"
	clear_logs
	timeout 60 runc --root "$st" run --bundle "$b" "$R" \
	    >"$out" 2>&1 </dev/null
	check_eq "runc: the container ran to the end" 0 "$?"
	sed 's/^/#   runc: /' "$out"
	judge runc "$out" "$R"
	# The container joined the sandbox's namespace rather than one of its
	# own: nothing is left in runc's state, and sluice sees the flow.
	runc --root "$st" delete -f "$R" >/dev/null 2>&1
	check_eq "runc: no container left" "" \
	    "$(runc --root "$st" list -q 2>/dev/null)"
}

# ----------------------------------------------------------------- podman
P=rec$$-pod
PD=$E2E_TMP/podman
# pm ARGS...: podman with storage, run state, temporary files and network
# configuration all under $PD. Two paths cannot be moved by an option: the
# blob cache under /var/lib/containers and /run/containers; each call gets
# a mount namespace of its own with a tmpfs on each, so that nothing of
# this run stays on the machine (the mount points are made, and removed at
# exit, only where they were missing).
pm() {
	timeout 60 unshare --mount --propagation private sh -c '
	    mount -t tmpfs -o mode=0700 sluice-recipe /var/lib/containers &&
	    mount -t tmpfs -o mode=0755 sluice-recipe /run/containers &&
	    exec "$@"' sh \
	    podman --root "$PD/root" --runroot "$PD/runroot" --tmpdir "$PD/tmp" \
	    --network-config-dir "$PD/net" --storage-driver vfs \
	    --cgroup-manager cgroupfs --events-backend none "$@"
}
run_podman() {
	local out=$E2E_TMP/podman.out ns img=localhost/sluice-recipe:busybox m
	command -v podman >/dev/null || { echo "# skip: podman: not installed"; return 0; }
	check "podman: sandbox is created" mk "$P" || return 0
	ns=$(jq -r .netns_path "$E2E_TMP/$P.json")
	for m in /var/lib/containers /run/containers; do
		[ -e "$m" ] && continue
		mkdir "$m" && cleanup_push "rmdir '$m'"
	done
	mkdir -p "$PD/root" "$PD/runroot" "$PD/tmp" "$PD/net"
	cleanup_push _podman_clean
	if ! tar -C "$ROOTFS" -cf "$PD/rootfs.tar" . ||
	    ! pm import "$PD/rootfs.tar" "$img" >"$PD/import.out" 2>&1; then
		not_ok "podman: image imported from the busybox rootfs"
		sed 's/^/#   /' "$PD/import.out"
		return 0
	fi
	ok "podman: image imported from the busybox rootfs"
	clear_logs
	# podman's default limits raise RLIMIT_NOFILE and RLIMIT_NPROC, which
	# fails where the runtime lacks CAP_SYS_RESOURCE: lower ones are set.
	pm run --rm --name "$P" --network "ns:$ns" --dns "$(dns_of "$P")" \
	    --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
	    "$img" /bin/sh /probe.sh >"$out" 2>&1 </dev/null
	check_eq "podman: the container ran to the end" 0 "$?"
	sed 's/^/#   podman: /' "$out"
	judge podman "$out" "$P"
	check_eq "podman: no container left" "" "$(pm ps -aq 2>/dev/null)"
}
# _podman_clean: remove every container and image of the store in $PD,
# unmount what podman left mounted under it, and remove it.
_podman_clean() {
	local m
	pm rm -af >/dev/null 2>&1
	pm rmi -af >/dev/null 2>&1
	for m in $(findmnt -rn -o TARGET | grep "^$PD/" | sort -r); do
		umount -l "$m" 2>/dev/null
	done
	rm -rf "$PD"
}

# ------------------------------------------------------------- bubblewrap
W=rec$$-bwrap
# A uid no account on the machine has (sluice exec and setpriv take numbers).
BW_UID=$((3000000 + $$ % 100000))
run_bwrap() {
	local out=$E2E_TMP/bwrap.out rc
	command -v bwrap >/dev/null || { echo "# skip: bwrap: not installed"; return 0; }
	command -v setpriv >/dev/null || { not_ok "setpriv is installed"; return 0; }
	check "bwrap: sandbox is created" mk "$W" || return 0

	# 1. Under sluice exec, which enters the namespace, applies the
	# sandbox's resolv.conf and drops every capability. bwrap (not setuid
	# on Debian) then needs a user namespace for its mounts, and a
	# capability-less uid 0 may not map itself into one (mapping root
	# needs CAP_SETFCAP since Linux 5.12): so --user, as it should be
	# anyway. The Landlock domain sluice exec gives the command forbids
	# every mount(2), so bwrap fails at its first one; that is reported,
	# and asserted as soon as it works.
	clear_logs
	timeout 60 "$SLUICE" -s "$WORLD_SOCK" exec --user "$BW_UID:$BW_UID" "$W" -- \
	    bwrap --unshare-user --unshare-pid --unshare-ipc --unshare-uts \
	    --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp \
	    --die-with-parent --new-session \
	    -- busybox sh -c "$(cat "$ROOTFS/probe.sh")" >"$out" 2>&1 </dev/null
	rc=$?
	if [ "$rc" -ne 0 ] && grep -q '^bwrap: .*: Operation not permitted' "$out"; then
		echo "# skip: bwrap under sluice exec: the command's Landlock" \
		    "domain forbids mount(2): $(head -n 1 "$out")"
	else
		check_eq "bwrap (sluice exec): the sandboxed command ran to the end" 0 "$rc"
		sed 's/^/#   bwrap (sluice exec): /' "$out"
		judge "bwrap (sluice exec)" "$out" "$W"
	fi

	# 2. ip netns exec (the namespace and /etc/netns/sluice-ID/resolv.conf)
	# and setpriv for what sluice exec does but Landlock: another uid, no
	# capabilities, no_new_privs.
	clear_logs
	timeout 60 ip netns exec "sluice-$W" \
	    setpriv --reuid "$BW_UID" --regid "$BW_UID" --clear-groups \
	    --inh-caps=-all --bounding-set=-all --no-new-privs \
	    bwrap --unshare-user --unshare-pid --unshare-ipc --unshare-uts \
	    --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp \
	    --die-with-parent --new-session \
	    -- busybox sh -c "$(cat "$ROOTFS/probe.sh")" >"$out" 2>&1 </dev/null
	check_eq "bwrap (ip netns exec): the sandboxed command ran to the end" 0 "$?"
	sed 's/^/#   bwrap (ip netns exec): /' "$out"
	judge "bwrap (ip netns exec)" "$out" "$W"
}

# ------------------------------------------------- Docker-style: attach
# A container runtime that makes the namespace itself (`docker run
# --network none`, containerd, a CNI runtime) and Sluice attaching to it:
# the "container" is a process in a namespace of its own made with
# `unshare --net` (and a mount namespace, for its resolv.conf), which
# Sluice wires with `sandbox create --attach-pid`. Asserted: the probe's
# three answers from inside; a namespace with a way out of its own, the
# daemon's own namespace and one namespace twice are refused; the sandbox
# survives a restart of the daemon; and `sandbox rm` takes back only
# Sluice's part: the process and its namespace (same inode) stay, with lo
# only, and the sysctls set back.
A=rec$$-att
# ns_sysctls PID: ip_forward and IPv6 "default" inside PID's namespace.
ns_sysctls() {
	nsenter -t "$1" --net sh -c 'cat /proc/sys/net/ipv4/ip_forward \
	    /proc/sys/net/ipv6/conf/default/disable_ipv6 2>/dev/null' | tr '\n' ' '
}
# host_links: the sl-* and sg-* links of the host namespace.
host_links() {
	world_host ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 |
	    grep -E '^s[lg]-' | sort | tr '\n' ' '
}
run_attach() {
	local rc=$E2E_TMP/att-resolv.conf out=$E2E_TMP/attach.out c ident \
	    before busy msg links hl other second
	command -v unshare >/dev/null || { echo "# skip: attach: no unshare"; return 0; }
	: >"$rc"
	unshare --net --mount --propagation private sh -c \
	    'mount --bind "$1" /etc/resolv.conf && exec sleep 600' sh "$rc" &
	c=$!
	cleanup_push "kill $c"
	wait_for 5 sh -c "nsenter -t $c --mount test -e /etc/resolv.conf &&
	    [ \"\$(readlink /proc/$c/ns/net)\" != \"\$(readlink /proc/self/ns/net)\" ]" ||
	    { not_ok "attach: the container process is up"; return 0; }
	ident=$(stat -L -c '%d:%i' "/proc/$c/ns/net")
	before=$(ns_sysctls "$c")
	hl=$(host_links)
	if ! sl sandbox create --policy recipe --id "$A" --attach-pid "$c" \
	    >"$E2E_TMP/$A.json" 2>"$E2E_TMP/att.err"; then
		not_ok "attach: sandbox is created around the container's namespace"
		sed 's/^/#   /' "$E2E_TMP/att.err"
		return 0
	fi
	ok "attach: sandbox is created around the container's namespace"
	check_eq "attach: the answer says attached, from /proc/PID/ns/net" \
	    "true /proc/$c/ns/net" \
	    "$(jq -r '"\(.attached) \(.attached_from)"' "$E2E_TMP/$A.json")"
	check_eq "attach: the sandbox holds the container's namespace (dev:inode)" \
	    "$ident" "$(jq -r .netns_id "$E2E_TMP/$A.json")"
	check_eq "attach: its pin is that namespace" "$ident" \
	    "$(stat -L -c '%d:%i' "/run/netns/sluice-$A")"
	printf 'nameserver %s\n' "$(dns_of "$A")" >"$rc"
	clear_logs
	timeout 60 nsenter -t "$c" --net --mount sh "$ROOTFS/probe.sh" \
	    >"$out" 2>&1 </dev/null
	check_eq "attach: the probe ran in the container" 0 "$?"
	sed 's/^/#   attach: /' "$out"
	judge attach "$out" "$A"
	check_eq "attach: sluice exec runs in the attached namespace, with its resolv.conf" \
	    "$ident nameserver $(dns_of "$A")" \
	    "$(timeout 30 "$SLUICE" -s "$WORLD_SOCK" exec "$A" -- sh -c \
	    'stat -L -c "%d:%i" /proc/self/ns/net; grep ^nameserver /etc/resolv.conf' 2>&1 | tr '\n' ' ' | sed 's/ $//')"

	# Refusals, each saying why.
	unshare --net sh -c 'ip link add d0 type veth peer name d1 && ip addr add 192.0.2.9/24 dev d0 &&
	    ip link set d0 up && ip route add default via 192.0.2.1 && exec sleep 600' &
	busy=$!
	cleanup_push "kill $busy"
	wait_for 5 sh -c "nsenter -t $busy --net ip route show default | grep -q via" ||
	    not_ok "attach: the busy namespace is up"
	msg=$(sl sandbox create --policy recipe --id "$A-b" --attach-pid "$busy" 2>&1)
	echo "#   attach: $msg"
	check_match "attach: a namespace with a way out is refused (409 netns_busy)" \
	    'netns_busy \(409\).*has a way out already' "$msg"
	check_match "attach: ... naming the interface, its address and its route" \
	    'interface d0 \(up\).*address 192\.0\.2\.9/24 on d0.*route default/0 via 192\.0\.2\.1 dev d0' "$msg"
	check_eq "attach: ... and nothing of Sluice's is left in it" "lo d1@d0 d0@d1" \
	    "$(nsenter -t "$busy" --net ip -o link show | awk -F': ' '{print $2}' | tr '\n' ' ' | sed 's/ $//')"
	msg=$(sl sandbox create --policy recipe --id "$A-c" --attach-pid "$c" 2>&1)
	check_match "attach: one namespace is one sandbox's" \
	    "already the namespace of sandbox $A" "$msg"
	msg=$(sl sandbox create --policy recipe --id "$A-d" \
	    --attach "/run/netns/$WORLD_HOST_NS" 2>&1)
	check_match "attach: the daemon's own namespace is refused" \
	    "daemon's own network namespace" "$msg"
	msg=$(sl sandbox create --policy recipe --id "$A-e" --attach /etc/passwd 2>&1)
	check_match "attach: a file that is no namespace is refused" \
	    "is not a namespace" "$msg"

	# A second sandbox, whose pin is swapped for another namespace while
	# the daemon is down (a path reused, or tampering): the restart must
	# drop it without touching the namespace now under its name.
	unshare --net sh -c 'echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6 &&
	    exec sleep 600' &
	other=$!
	cleanup_push "kill $other"
	unshare --net sleep 600 &
	second=$!
	cleanup_push "kill $second"
	wait_for 5 sh -c "[ \"\$(nsenter -t $other --net cat /proc/sys/net/ipv6/conf/default/disable_ipv6)\" = 1 ] &&
	    [ \"\$(readlink /proc/$second/ns/net)\" != \"\$(readlink /proc/self/ns/net)\" ]" ||
	    not_ok "attach: the namespaces of the swap are up"
	check "attach: a second sandbox is attached" \
	    sl sandbox create --policy recipe --id "$A-s" --attach-pid "$second"
	# A restart adopts the first: same namespace, still policed.
	world_stop_sluiced
	umount -l "/run/netns/sluice-$A-s" && mount --bind "/proc/$other/ns/net" "/run/netns/sluice-$A-s" ||
	    not_ok "attach: the second sandbox's pin is swapped"
	world_start_sluiced "$E2E_TMP/sluice.yaml" || { not_ok "attach: sluiced restarts"; return 0; }
	check_eq "attach: after a restart the sandbox is still attached to it" \
	    "true $ident" "$(sl sandbox show "$A" 2>&1 | jq -r '"\(.attached) \(.netns_id)"' 2>&1)"
	clear_logs
	timeout 60 nsenter -t "$c" --net --mount sh "$ROOTFS/probe.sh" \
	    >"$out" 2>&1 </dev/null
	check_match "attach: after a restart the allowed name still works" \
	    "^allowed rc=0 package index" "$(grep '^allowed ' "$out")"
	check_match "attach: after a restart the metadata service is still refused" \
	    '^metadata rc=[1-9]' "$(grep '^metadata ' "$out")"
	check_fails "attach: the sandbox whose pin names another namespace is dropped" \
	    sl sandbox show "$A-s"
	check_eq "attach: ... and that namespace was not touched (its sysctl as it was, lo only)" \
	    "1 lo " "$(nsenter -t "$other" --net sh -c 'cat /proc/sys/net/ipv6/conf/default/disable_ipv6;
	    ip -o link show' | awk -F': ' 'NR == 1 { printf "%s ", $0; next } { printf "%s ", $2 }')"
	check_eq "attach: ... while the attached one lost Sluice's link" "lo " \
	    "$(nsenter -t "$second" --net ip -o link show | awk -F': ' '{print $2}' | tr '\n' ' ')"
	check_fails "attach: ... and its pin" test -e "/run/netns/sluice-$A-s"

	# rm: Sluice's part goes, the container and its namespace stay.
	check "attach: sandbox rm" sl sandbox rm "$A"
	check "attach: the container process is still running" kill -0 "$c"
	check_eq "attach: ... in the same namespace" "$ident" \
	    "$(stat -L -c '%d:%i' "/proc/$c/ns/net")"
	links=$(nsenter -t "$c" --net ip -o link show | awk -F': ' '{print $2}' | tr '\n' ' ')
	check_eq "attach: ... which has lo only again (eth0 went with Sluice's link)" \
	    "lo " "$links"
	check_eq "attach: ... with its sysctls as they were" "$before" "$(ns_sysctls "$c")"
	check_fails "attach: the pin is gone" test -e "/run/netns/sluice-$A"
	check_eq "attach: no host link of it is left (sl-* or sg-*)" "$hl" \
	    "$(host_links)"
	check_fails "attach: the daemon no longer lists it" sl sandbox show "$A"
}

# -------------------------------------------------------------------- CNI
# build/sluice-cni called as the CNI spec says (CNI_* environment, network
# config on stdin), the way a runtime runs examples/cni/10-sluice.conflist:
# each plugin of the list in order for ADD, with the previous one's result
# as prevResult, and in reverse for DEL. Debian's loopback plugin is put in
# front of it, as containerd does, so the chain is a real one. Debian ships
# the plugins (containernetworking-plugins) but no cnitool, so the list is
# run here as libcni runs it. The pod is a process in its own namespace,
# bind-mounted as runtimes pin one.
C=rec$$-cni
CNI_DIR=$E2E_TMP/cni
# cni_exec CMD PLUGIN_CONF NETNS CONTAINERID: one plugin call; its stdout.
cni_exec() {
	local type
	type=$(printf '%s' "$2" | jq -r .type)
	printf '%s' "$2" | CNI_COMMAND=$1 CNI_CONTAINERID=$4 CNI_NETNS=$3 \
	    CNI_IFNAME=eth0 CNI_PATH=$CNI_DIR/bin \
	    CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=team-a;K8S_POD_NAME=agent-0" \
	    "$CNI_DIR/bin/$type"
}
# cni_list CMD LIST NETNS CONTAINERID: the list run as libcni runs it; the
# last result on stdout, 1 at the first plugin that fails (its error shown).
cni_list() {
	local n i conf prev='' out order
	n=$(jq '.plugins | length' "$2")
	order=$(seq 0 $((n - 1)))
	[ "$1" = DEL ] && order=$(seq $((n - 1)) -1 0)
	for i in $order; do
		conf=$(jq -c --argjson i "$i" --arg prev "$prev" '
		    .plugins[$i] + {cniVersion, name} +
		    (if $prev == "" then {} else {prevResult: ($prev | fromjson)} end)' "$2")
		out=$(cni_exec "$1" "$conf" "$3" "$4") || { printf '%s\n' "$out"; return 1; }
		[ "$1" = ADD ] && prev=$out
	done
	printf '%s\n' "$prev"
}
run_cni() {
	local list=$CNI_DIR/10-sluice.conflist pin=$CNI_DIR/netns-pod c res out \
	    cid=0123456789abcdef0123456789abcdef addr err
	[ -x "$SLUICE_BUILD/sluice-cni" ] || { not_ok "cni: build/sluice-cni is built"; return 0; }
	[ -x /usr/lib/cni/loopback ] || { echo "# skip: cni: no /usr/lib/cni/loopback"; return 0; }
	mkdir -p "$CNI_DIR/bin"
	ln -s "$SLUICE_BUILD/sluice-cni" "$CNI_DIR/bin/sluice-cni"
	ln -s /usr/lib/cni/loopback "$CNI_DIR/bin/loopback"
	# The example list, pointed at this world's daemon and policy, with
	# loopback in front.
	jq --arg sock "$WORLD_SOCK" '.plugins[0].socket = $sock |
	    .plugins[0].policy = "recipe" | .plugins = [{type: "loopback"}] + .plugins' \
	    "$TOP/examples/cni/10-sluice.conflist" >"$list" ||
	    { not_ok "cni: examples/cni/10-sluice.conflist is JSON"; return 0; }
	printf 'nameserver 192.0.2.1\n' >"$CNI_DIR/resolv.conf"
	unshare --net --mount --propagation private sh -c \
	    'mount --bind "$1" /etc/resolv.conf && exec sleep 600' sh "$CNI_DIR/resolv.conf" &
	c=$!
	cleanup_push "kill $c"
	cleanup_push "umount -l '$pin'"
	wait_for 5 sh -c "[ \"\$(readlink /proc/$c/ns/net)\" != \"\$(readlink /proc/self/ns/net)\" ]" ||
	    { not_ok "cni: the pod process is up"; return 0; }
	: >"$pin" && mount --bind "/proc/$c/ns/net" "$pin" ||
	    { not_ok "cni: the pod's namespace is pinned"; return 0; }

	check_eq "cni: VERSION lists 1.0.0 and 1.1.0" '["1.0.0","1.1.0"]' \
	    "$(CNI_COMMAND=VERSION "$CNI_DIR/bin/sluice-cni" </dev/null | jq -c .supportedVersions)"
	if ! res=$(cni_list ADD "$list" "$pin" "$cid"); then
		not_ok "cni: ADD of the list succeeds"; echo "#   $res"
		world_sluiced_log | tail -n 10 | sed 's/^/#   sluiced: /'
		return 0
	fi
	ok "cni: ADD of the list succeeds"
	echo "#   cni: $res"
	addr=$(printf '%s' "$res" | jq -r '.ips[-1].address')
	check_eq "cni: the result lists lo (loopback's), Sluice's link and eth0 in the pod" \
	    "lo $pin eth0 $pin" \
	    "$(printf '%s' "$res" | jq -r '[.interfaces[0].name, .interfaces[0].sandbox, .interfaces[-1].name, .interfaces[-1].sandbox] | join(" ")')"
	check_eq "cni: its last IP is eth0's, and it is the pod's address" \
	    "$(printf '%s' "$res" | jq '.interfaces | length - 1')" \
	    "$(printf '%s' "$res" | jq '.ips[-1].interface')"
	check_match "cni: eth0 in the pod has that address" "inet ${addr//./\\.} " \
	    "$(nsenter -t "$c" --net ip -o -4 addr show dev eth0)"
	check_eq "cni: the sandbox is attached, with the pod's subject and labels" \
	    "true k8s:team-a/agent-0 team-a/agent-0 sluice" \
	    "$(sl sandbox ls --json | jq -r '.sandboxes[] | select(.labels.cni_container == "'"$cid"'") | "\(.attached) \(.subject) \(.labels.k8s_pod) \(.labels.cni_network)"')"
	check_eq "cni: ADD again (a runtime's retry) gives the same result" "$res" \
	    "$(cni_list ADD "$list" "$pin" "$cid")"
	printf 'nameserver %s\n' "$(printf '%s' "$res" | jq -r '.dns.nameservers[0]')" \
	    >"$CNI_DIR/resolv.conf"
	clear_logs
	timeout 60 nsenter -t "$c" --net --mount sh "$ROOTFS/probe.sh" \
	    >"$E2E_TMP/cni.out" 2>&1 </dev/null
	check_eq "cni: the probe ran in the pod" 0 "$?"
	sed 's/^/#   cni: /' "$E2E_TMP/cni.out"
	echo "{\"address\":\"x\",\"dns\":\"$(printf '%s' "$res" | jq -r '.dns.nameservers[0]')\"}" \
	    >"$E2E_TMP/$C.json"
	judge cni "$E2E_TMP/cni.out" "$C"
	out=$(cni_exec CHECK "$(jq -c --argjson prev "$res" '.plugins[1] + {cniVersion, name, prevResult: $prev}' "$list")" "$pin" "$cid")
	check_eq "cni: CHECK with the result as prevResult passes, silently" "0 " "$? $out"
	out=$(cni_exec CHECK "$(jq -c '.plugins[1] + {cniVersion, name, prevResult: {ips: []}}' "$list")" "$pin" "$cid")
	check_eq "cni: CHECK with another prevResult fails with code 7" 7 \
	    "$(printf '%s' "$out" | jq .code)"
	out=$(printf 'not json' | CNI_COMMAND=ADD CNI_CONTAINERID=x CNI_NETNS=$pin CNI_IFNAME=eth0 \
	    "$CNI_DIR/bin/sluice-cni"); rc_=$?
	check_eq "cni: a malformed config is CNI error 6, exit 1" "6 1" \
	    "$(printf '%s' "$out" | jq .code) $rc_"
	out=$(jq -c '.plugins[1] + {cniVersion, name} | del(.policy)' "$list" |
	    CNI_COMMAND=ADD CNI_CONTAINERID=y CNI_NETNS=$pin CNI_IFNAME=eth0 "$CNI_DIR/bin/sluice-cni")
	check_match "cni: no policy is CNI error 7, saying where to name one" \
	    '"code":7.*SLUICE_POLICY' "$out"

	check "cni: DEL of the list succeeds" cni_list DEL "$list" "$pin" "$cid"
	check "cni: DEL again succeeds (idempotent)" cni_list DEL "$list" "$pin" "$cid"
	check "cni: the pod process is still running" kill -0 "$c"
	check_eq "cni: the pod's namespace has lo only again" "lo " \
	    "$(nsenter -t "$c" --net ip -o link show | awk -F': ' '{print $2}' | tr '\n' ' ')"
	out=$(cni_exec CHECK "$(jq -c --argjson prev "$res" '.plugins[1] + {cniVersion, name, prevResult: $prev}' "$list")" "$pin" "$cid")
	check_eq "cni: CHECK after DEL fails with code 3 (unknown container)" 3 \
	    "$(printf '%s' "$out" | jq .code)"
	err=$(CNI_COMMAND=STATUS "$CNI_DIR/bin/sluice-cni" <<<"$(jq -c '.plugins[1] + {cniVersion: "1.1.0", name}' "$list")"; echo "rc=$?")
	check_eq "cni: STATUS (1.1) says the daemon is ready" "rc=0" "$err"
}

for r in ${RECIPES:-runc podman bwrap attach cni}; do
	"run_$r"
done
finish
