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
run_podman() {
	local d=$E2E_TMP/podman out=$E2E_TMP/podman.out ns img=localhost/sluice-recipe:busybox
	command -v podman >/dev/null || { echo "# skip: podman: not installed"; return 0; }
	check "podman: sandbox is created" mk "$P" || return 0
	ns=$(jq -r .netns_path "$E2E_TMP/$P.json")
	mkdir -p "$d/root" "$d/runroot" "$d/tmp"
	# Storage, run state and temporary files all under $d: nothing of
	# this run reaches /var/lib/containers or /run/containers.
	pm() {
		timeout 60 podman --root "$d/root" --runroot "$d/runroot" \
		    --tmpdir "$d/tmp" --storage-driver vfs \
		    --cgroup-manager cgroupfs --events-backend none "$@"
	}
	cleanup_push "_podman_clean '$d'"
	if ! tar -C "$ROOTFS" -cf "$d/rootfs.tar" . ||
	    ! pm import "$d/rootfs.tar" "$img" >"$d/import.out" 2>&1; then
		not_ok "podman: image imported from the busybox rootfs"
		sed 's/^/#   /' "$d/import.out"
		return 0
	fi
	ok "podman: image imported from the busybox rootfs"
	clear_logs
	pm run --rm --name "$P" --network "ns:$ns" --ulimit host --dns "$(dns_of "$P")" \
	    "$img" /bin/sh /probe.sh >"$out" 2>&1 </dev/null
	check_eq "podman: the container ran to the end" 0 "$?"
	sed 's/^/#   podman: /' "$out"
	judge podman "$out" "$P"
	check_eq "podman: no container left" "" "$(pm ps -aq 2>/dev/null)"
}
# _podman_clean DIR: remove every container and image of the store in DIR,
# unmount what podman left mounted under it, and remove it.
_podman_clean() {
	local d=$1 m
	pm rm -af >/dev/null 2>&1
	pm rmi -af >/dev/null 2>&1
	for m in $(findmnt -rn -o TARGET | grep "^$d/" | sort -r); do
		umount -l "$m" 2>/dev/null
	done
	rm -rf "$d"
}

# ------------------------------------------------------ bubblewrap (exec)
W=rec$$-bwrap
# A uid no account on the machine has (sluice exec takes numbers).
BW_UID=$((3000000 + $$ % 100000))
run_bwrap() {
	local out=$E2E_TMP/bwrap.out
	command -v bwrap >/dev/null || { echo "# skip: bwrap: not installed"; return 0; }
	check "bwrap: sandbox is created" mk "$W" || return 0
	clear_logs
	# sluice exec enters the namespace, applies the sandbox's resolv.conf
	# and drops every capability. bwrap (not setuid on Debian) then needs
	# a user namespace for its mounts, and a capability-less uid 0 may not
	# map itself into one (mapping root needs CAP_SETFCAP since Linux
	# 5.12): the command runs as a uid of its own, as it should anyway.
	# The probe goes in as text: $E2E_TMP is not readable by that uid.
	timeout 60 "$SLUICE" -s "$WORLD_SOCK" exec --user "$BW_UID:$BW_UID" "$W" -- \
	    bwrap --unshare-user --unshare-pid --unshare-ipc --unshare-uts \
	    --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp \
	    --die-with-parent --new-session \
	    -- busybox sh -c "$(cat "$ROOTFS/probe.sh")" >"$out" 2>&1 </dev/null
	check_eq "bwrap: the sandboxed command ran to the end" 0 "$?"
	sed 's/^/#   bwrap: /' "$out"
	judge bwrap "$out" "$W"
}

run_runc
run_podman
run_bwrap
finish
