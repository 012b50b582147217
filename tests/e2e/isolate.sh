# tests/e2e/isolate.sh: source this FIRST (before lib.sh) in a scenario that
# runs sluiced outside the world of world.sh. sluiced sets up the host side
# of sandboxes at start (service address on lo, forwarding, the inet sluice
# table, port 53), so such a scenario re-executes itself in a private network
# and mount namespace, with empty /run/netns and /etc/netns, and the
# machine's own network is never touched. Loopback works inside.
if [ -z "${SLUICE_E2E_ISOLATED:-}" ]; then
	export SLUICE_E2E_ISOLATED=1
	mkdir -p /run/netns /etc/netns
	exec unshare --net --mount --propagation private bash -c '
		mount -t tmpfs tmpfs /run/netns && mount -t tmpfs tmpfs /etc/netns &&
		ip link set lo up && exec bash "$0" "$@"' "$0" "$@"
fi
