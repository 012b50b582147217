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
# still asserted. Every container, bundle, image and storage directory
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

run_runc
run_podman
run_bwrap
finish
