#!/bin/bash
# t_budget.sh: byte budgets of single allow rules and of a tainted
# sandbox, enforced in the kernel. A sandbox sends more than a rule's
# budget to an allowed name: the far side receives at most the budget
# (headers count against it and the kernel charges a packet before it
# lets it pass, so there is no slack past the budget within a window; a
# spent flow is reset; the one slack is a flow that lives across a
# window's end, which gets the new window's budget too: at most budget +
# one window's budget, so the windowed rule is checked against twice its
# budget and the rule without a window against its budget exactly), the
# denial is recorded as net.deny budget_exhausted and the spent budget as
# one finding; a destination without a budget keeps working; a CIDR
# rule's budget holds the same way; the rule's window (4 s here) opens it
# again, found by polling with a deadline; after a taint, the taint's own
# budget bounds what reaches the keep list. The far side (tools/
# bytesink.py) says what it received on each connection.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

for t in jq python3 dig; do
	command -v "$t" >/dev/null || { not_ok "$t is installed"; finish; }
done
PY=$(command -v python3)
BS=$E2E_DIR/tools/bytesink.py
world_up || { not_ok "world_up"; finish; }

POL=$E2E_TMP/policies
CFG=$E2E_TMP/sluice.yaml
mkdir -p "$POL"
cat >"$POL/bud.yaml" <<'YAML'
version: 1
name: bud
egress:
  allow:
    - host: pkg.example.com
      ports: [9000]
      budget: 64KiB
      window: 4s
    - cidr: 192.0.2.11/32
      ports: [9001]
    - cidr: 192.0.2.10/32
      ports: [9002]
      budget: 32KiB
    - host: pkg.example.com
      ports: [9003]
mcp:
  taint:
    level: confidential
    budget: 16KiB
    keep:
      - host: pkg.example.com
        ports: [9003]
  tools:
    - tool: ev/get-tiny-image
      decision: allow
      classification: confidential
dns:
  types: [A]
  min_ttl: 60s
YAML
world_sluiced_config "$CFG" "$POL"
EVERYTHING=$E2E_DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js
HAVE_MCP=0
if [ -e "$EVERYTHING" ] && command -v node >/dev/null; then
	HAVE_MCP=1
	cat >>"$CFG" <<YAML
servers:
  - name: ev
    transport: stdio
    command: [$(command -v node), $EVERYTHING, stdio]
    env: {PATH: /usr/local/bin:/usr/bin:/bin}
YAML
fi
world_start_sluiced "$CFG" || { not_ok "sluiced starts"; finish; }
DB=$WORLD_DIR/state/audit.db

SLOG=$E2E_TMP/sink.log
: >"$SLOG"
world_inet "$PY" "$BS" serve "$SLOG" 0.0.0.0 9000 9001 9002 9003 \
    >"$E2E_TMP/sink.out" 2>&1 &
SRV=$!
cleanup_push "kill $SRV 2>/dev/null; wait $SRV 2>/dev/null"
check "the far side is up" wait_for 10 grep -q ready "$SLOG"

sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
recs() { "$SLUICE" audit tail --db "$DB" --kind "$1" -n 1000 2>/dev/null; }
J=$(sl sandbox create --policy bud 2>"$E2E_TMP/create.err")
ID=$(printf '%s' "$J" | jq -r .id 2>/dev/null)
TOKEN=$(printf '%s' "$J" | jq -r .token 2>/dev/null)
[[ $ID =~ ^[a-z0-9][a-z0-9-]{0,31}$ ]] ||
    { not_ok "a sandbox under the budget policy ($(head -c 300 "$E2E_TMP/create.err"))"; finish; }
ok "a sandbox under the budget policy"
check_eq "it resolves pkg.example.com" "$WORLD_PKG" \
    "$(world_sandbox "$ID" dig +short +time=2 +tries=1 @"$WORLD_SERVICE" pkg.example.com A)"

# push HOST PORT N: sends N bytes from the sandbox; sets HOW (ok, reset,
# timeout) and GOT, what the far side received on that connection.
push() {
	local out lport=$2 rport
	out=$(world_sandbox "$ID" timeout 30 "$PY" "$BS" send "$1" "$2" "$3" 2>&1)
	rport=$(printf '%s\n' "$out" | awk '$1 == "port" { print $2; exit }')
	HOW=$(printf '%s\n' "$out" | awk '$1 == "sent" { print $3; exit }')
	GOT=
	[ -n "$rport" ] || { HOW=${HOW:-refused}; GOT=0; return; }
	wait_for 25 grep -q "^done $lport $rport " "$SLOG" || { GOT=none; return; }
	GOT=$(awk -v l="$lport" -v r="$rport" '$1 == "done" && $2 == l && $3 == r { print $4; exit }' "$SLOG")
}
le() { [ -n "$1" ] && [ "$1" != none ] && [ "$1" -le "$2" ]; }

# ------------------------------------------------------------ a host rule
push pkg.example.com 9000 262144
check "256 KiB to a name with a 64 KiB budget per 4 s: the far side got at most 2 x 65536 ($GOT)" \
    le "$GOT" 131072
check "and got something before it was spent ($GOT)" test "${GOT:-0}" -gt 0 2>/dev/null
check_eq "the sender's flow is reset" reset "$HOW"
deny_rec() { recs net.deny | grep -q '"reason":"budget_exhausted"'; }
check "net.deny records reason budget_exhausted" wait_for 10 deny_rec
spent_n() { recs finding | grep egress.budget_exhausted | grep -c 'egress.allow\[0\]'; }
check "a finding says the budget is spent" wait_for 10 eval '[ "$(spent_n)" -ge 1 ]'
push pkg.example.com 9000 20000
check_eq "the spent budget is recorded once in its window" 1 "$(spent_n)"

# --------------------------------------------------- others keep working
push 192.0.2.11 9001 262144
check_eq "a destination without a budget takes all 256 KiB" 262144 "$GOT"

# ------------------------------------------------------------ a CIDR rule
push 192.0.2.10 9002 131072
check "128 KiB to a CIDR rule with a 32 KiB budget: at most 32768 ($GOT)" \
    le "$GOT" 32768
check "and something passed ($GOT)" test "${GOT:-0}" -gt 0 2>/dev/null
push 192.0.2.10 9002 20000
check "a new flow while it is spent gets nothing through ($GOT)" le "$GOT" 0

# ----------------------------------------------------------------- window
opened() { push pkg.example.com 9000 10000; [ "$GOT" = 10000 ]; }
check "the window (4 s) ends and the budget opens again" wait_for 15 opened
win_rec() { recs finding | grep sandbox.budget_window | grep -- "$ID" | grep -q 'egress.allow\[0\]'; }
check "the window's end is recorded" wait_for 5 win_rec
push pkg.example.com 9000 262144
check "and it holds again in the new window ($GOT)" le "$GOT" 131072

# ------------------------------------------------------------------ taint
if [ "$HAVE_MCP" -eq 1 ]; then
	push pkg.example.com 9003 65536
	check_eq "before the taint the keep-listed port takes 64 KiB" 65536 "$GOT"
	world_mcp_client "sandbox:$ID" \
	    --url "http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT/mcp/ev" \
	    --header "Authorization: Bearer $TOKEN" \
	    --call get-tiny-image '{}' >"$E2E_TMP/taint.out" 2>&1
	check_eq "the confidential call taints the sandbox" true \
	    "$(sl sandbox show "$ID" 2>/dev/null | jq -r .tainted 2>/dev/null)"
	push pkg.example.com 9003 65536
	check "after the taint the keep list gets at most its 16 KiB budget ($GOT)" \
	    le "$GOT" 16384
	tspent() { recs finding | grep egress.budget_exhausted | grep -q mcp.taint; }
	check "the spent taint budget is recorded" wait_for 10 tspent
else
	ok "the taint budget # SKIP needs node and server-everything"
fi

# ------------------------------------------------------------- removal
sl sandbox rm "$ID" >/dev/null 2>&1 || not_ok "the sandbox is removed"
left() { world_host nft list table inet sluice 2>/dev/null | grep -c -e 'quota b[0-9]*_sl-' -e 'quota t_sl-'; }
check_eq "no budget object of it is left" 0 "$(left)"

finish
