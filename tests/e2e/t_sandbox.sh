#!/bin/bash
# t_sandbox.sh: sandboxes as a user drives them: the
# control API and the CLI (sandbox create|ls|show|rm, exec, run), TTL
# expiry, hostile create requests that must leave nothing half-made, an
# exhausted pool, net.deny events, SIGKILL of sluiced (fail closed) and the
# restart that adopts live sandboxes, drops a recorded one that lost its
# link and removes orphans made by hand. Everything happens in the world of
# world.sh: sluiced in its host namespace, traffic only to the fake
# internet's documentation addresses. Every piece is checked where it lives:
# the pin in /run/netns, the link in the host namespace, the elements in the
# `inet sluice` table, /etc/netns/<ns>, the row in state.db.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

for t in jq nft sqlite3 curl; do
	command -v "$t" >/dev/null || { not_ok "$t is installed"; finish; }
done
world_up || { not_ok "world_up"; finish; }

POL=$E2E_TMP/policies
CFG=$E2E_TMP/sluice.yaml
DB=$WORLD_DIR/state/state.db
mkdir -p "$POL"
cat >"$POL/web.yaml" <<'EOF'
version: 1
name: web
egress:
  allow:
    - cidr: 192.0.2.10/32
      ports: [80]
EOF
cat >"$POL/other.yaml" <<'EOF'
version: 1
name: other
egress:
  allow:
    - cidr: 203.0.113.80/32
      ports: [80]
EOF
world_sluiced_config "$CFG" "$POL"
# A tiny capacity, so that "exhausted" is reachable with a few sandboxes.
printf 'sandboxes:\n  max: 3\n' >>"$CFG"
world_start_sluiced "$CFG" || { not_ok "sluiced starts"; finish; }

sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
# api METHOD PATH [BODY]: "CODE BODY" of one control request.
api() {
	local out
	if [ $# -ge 3 ]; then
		out=$(world_host curl -s -m 30 --unix-socket "$WORLD_SOCK" \
		    -X "$1" -H 'Content-Type: application/json' \
		    --data-binary "$3" -w '\n%{http_code}' "http://localhost$2")
	else
		out=$(world_host curl -s -m 30 --unix-socket "$WORLD_SOCK" \
		    -X "$1" -w '\n%{http_code}' "http://localhost$2")
	fi
	printf '%s %s\n' "$(tail -n 1 <<<"$out")" "$(sed '$d' <<<"$out")"
}
ls_ids() { sl sandbox ls --json | jq -r '.sandboxes[].id' | sort | tr '\n' ' '; }
nsbx() { sl sandbox ls --json | jq -r '.count'; }
pins() { ls /run/netns 2>/dev/null | grep -c "^sluice-t$$-" ; }
hostlinks() { world_host ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep '^sl-' | sort | tr '\n' ' '; }
# elems IF: lines of the table that name link IF.
elems() { world_host nft list table inet sluice 2>/dev/null | grep -c "\"$1\""; }
# all_elems: table lines naming any sandbox link (the rules say "sl-*").
all_elems() { world_host nft list table inet sluice 2>/dev/null | grep -c '"sl-[0-9]'; }
row() { sqlite3 "$DB" "SELECT $2 FROM sandboxes WHERE id = '$1'"; }
rows() { sqlite3 "$DB" "SELECT count(*) FROM sandboxes"; }
get() { world_sandbox "$1" curl -s -m 3 -o /dev/null -w '%{http_code}' "$2"; }
log_has() { world_sluiced_log | grep -q -- "$1"; }

A=t$$-a
B=t$$-b
C=t$$-c
F=t$$-f

# ------------------------------------------------------------ create
if sl sandbox create --policy web --id "$A" --subject alice \
    --label env=dev --label team=core >"$E2E_TMP/a.json"; then
	ok "sandbox create A"
else
	not_ok "sandbox create A"; world_sluiced_log | tail -n 20 | sed 's/^/#   /'
	finish
fi
AJ=$(cat "$E2E_TMP/a.json")
AADDR=$(jq -r .address <<<"$AJ")
AIF=$(jq -r .interface <<<"$AJ")
ATOKEN=$(jq -r .token <<<"$AJ")
check_eq "create: id" "$A" "$(jq -r .id <<<"$AJ")"
check_eq "create: netns" "sluice-$A" "$(jq -r .netns <<<"$AJ")"
check_eq "create: netns_path" "/run/netns/sluice-$A" "$(jq -r .netns_path <<<"$AJ")"
check_match "create: address in the pool" '^10\.231\.[0-9]+\.[0-9]+$' "$AADDR"
check_eq "create: service address" "$WORLD_SERVICE" "$(jq -r .service_address <<<"$AJ")"
check_eq "create: dns" "$WORLD_SERVICE" "$(jq -r .dns <<<"$AJ")"
check_eq "create: bridge_url" "http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT" "$(jq -r .bridge_url <<<"$AJ")"
check_match "create: token is 32 random bytes in hex" '^[0-9a-f]{64}$' "$ATOKEN"
check_eq "create: no ttl, no expiry" "null" "$(jq -r .expires_at <<<"$AJ")"
check_eq "create: labels kept" "dev core" "$(jq -r '.labels.env + " " + .labels.team' <<<"$AJ")"
check "create: namespace pinned" test -e "/run/netns/sluice-$A"
check "create: host link exists" world_host ip link show "$AIF"
check "create: eth0 inside has the address" \
    sh -c "nsenter --net=/run/netns/sluice-$A ip -4 -o addr show eth0 | grep -q ' $AADDR/'"
check "create: resolv.conf names the service address" \
    grep -q "nameserver $WORLD_SERVICE" "/etc/netns/sluice-$A/resolv.conf"
check_eq "create: state row" "web|alice|$ATOKEN" "$(row "$A" "policy || '|' || subject || '|' || token")"
check_eq "create: state.db is mode 0600" "600" "$(stat -c %a "$DB")"
check "create: the table has A's elements" test "$(elems "$AIF")" -gt 0
check_eq "A reaches the allowed CIDR:port" 200 "$(get "$A" http://192.0.2.10/)"
check_fails "A cannot reach another address" \
    world_sandbox "$A" curl -s -m 3 -o /dev/null http://203.0.113.80/
check_fails "A cannot reach the metadata service" \
    world_sandbox "$A" curl -s -m 3 -o /dev/null http://169.254.169.254/
check "net.deny: the blocked address is reported for A" \
    wait_for 10 log_has "net.deny sandbox=$A iface=$AIF proto=tcp src=$AADDR dst=203.0.113.80 .*dport=80 reason=no_matching_rule count=[1-9]"
check "net.deny: metadata is reported as always_denied:metadata" \
    wait_for 10 log_has "net.deny sandbox=$A .*dst=169.254.169.254 .*reason=always_denied:metadata"
check "log: sandbox.create" log_has "sandbox.create id=$A policy=web subject=alice"

# ------------------------------------------------------------ ls / show
out=$(sl sandbox ls)
check_match "ls: header" '^ID +POLICY +SUBJECT +ADDRESS +IFACE +EXPIRES +TAINTED' "$out"
check_match "ls: A in an aligned row" "$A +web +alice +$AADDR +$AIF +- +no" "$out"
check_eq "ls --json: count" 1 "$(nsbx)"
out=$(sl sandbox show "$A")
check_eq "show: policy" web "$(jq -r .policy <<<"$out")"
check_eq "show: the token is not shown" null "$(jq -r .token <<<"$out")"
check_eq "status: one sandbox" 1 "$(sl status --json | jq -r .sandboxes)"
check "metrics: sluice_sandboxes 1" sh -c \
    "curl -s --unix-socket '$WORLD_SOCK' http://localhost/metrics | grep -qx 'sluice_sandboxes 1'"
check "show unknown fails" sh -c "! '$SLUICE' -s '$WORLD_SOCK' sandbox show t$$-none"
sl sandbox show 'A/../x' >/dev/null 2>&1
check_eq "show: a bad id is a usage error" 2 "$?"

# ------------------------------------------------------------ exec
out=$(sl exec "$A" -- sh -c 'echo "$SLUICE_SANDBOX_ID $SLUICE_BRIDGE_URL $SLUICE_TOKEN"; exit 7')
rc=$?
check_eq "exec: exit status of the command" 7 "$rc"
check_eq "exec: SLUICE_* set" "$A http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT $ATOKEN" "$out"
check "exec: runs inside the namespace (eth0 has A's address)" \
    sh -c "'$SLUICE' -s '$WORLD_SOCK' exec '$A' -- ip -4 -o addr show eth0 | grep -q ' $AADDR/'"
out=$(world_host "$SLUICE" -s "$WORLD_SOCK" exec "$A" -- cat /etc/resolv.conf)
check_match "exec: /etc/resolv.conf is the sandbox's" "nameserver $WORLD_SERVICE" "$out"
check_eq "exec: the allowed server is reachable" 200 \
    "$(sl exec "$A" -- curl -s -m 3 -o /dev/null -w '%{http_code}' http://192.0.2.10/)"
sl exec "$A" -- /nonexistent/cmd 2>/dev/null
check_eq "exec: a missing command is 127" 127 "$?"
sl exec "t$$-none" -- true 2>/dev/null
check_eq "exec: an unknown sandbox is 1" 1 "$?"
sl exec "$A" true 2>/dev/null
check_eq "exec: without -- is a usage error" 2 "$?"
sl exec "../$A" -- true 2>/dev/null
check_eq "exec: a bad id is a usage error" 2 "$?"
# A command in the sandbox still sees the host's files, so the control
# socket's path too: the daemon refuses it, so sandboxed code cannot
# approve its own calls or make itself a laxer sandbox.
out=$(sl exec "$A" -- curl -s --unix-socket "$WORLD_SOCK" -o /dev/null -w '%{http_code}' http://localhost/v1/sandboxes)
check_eq "exec: the control API refuses a caller inside a sandbox" 403 "$out"
out=$(sl exec "$A" -- "$SLUICE" -s "$WORLD_SOCK" sandbox create --policy web 2>&1)
check_match "exec: sandbox create from inside a sandbox is refused" "from_sandbox|inside a sandbox" "$out"
check "exec: the refusal is a finding on the sandbox" wait_for 5 sh -c \
    "'$SLUICE' audit tail --db '$WORLD_DIR/state/audit.db' --kind finding 2>/dev/null | grep sandbox.control_refused | grep -q '$A'"

# ------------------------------------------------------------ run
before=$(hostlinks)
out=$(sl run --policy web --subject bob -- sh -c 'echo "$SLUICE_SANDBOX_ID"; curl -s -m 3 -o /dev/null -w "%{http_code}" http://192.0.2.10/; exit 3')
rc=$?
check_eq "run: exit status of the command" 3 "$rc"
rid=$(head -n 1 <<<"$out")
check_match "run: the command ran in a fresh sandbox" '^sb-[0-9a-f]{12}$' "$rid"
check_match "run: the command reached the allowed server" '200$' "$out"
check_fails "run: the sandbox is gone from ls" grep -qw "$rid" <<<"$(ls_ids)"
check_fails "run: its namespace is gone" test -e "/run/netns/sluice-$rid"
check_eq "run: no link left" "$before" "$(hostlinks)"
check_eq "run: no row left" 0 "$(sqlite3 "$DB" "SELECT count(*) FROM sandboxes WHERE id = '$rid'")"
# SIGTERM to `sluice run` reaches the command, and the sandbox still goes;
# so does SIGHUP (a terminal or ssh session that went away).
for sig in TERM:143 HUP:129; do
	sn=${sig%%:*} want=${sig#*:}
	ids0=$(ls_ids)
	nsenter --net="/run/netns/$WORLD_HOST_NS" -- \
	    "$SLUICE" -s "$WORLD_SOCK" run --policy web -- sleep 60 >/dev/null 2>&1 &
	rp=$!
	cleanup_push "kill -KILL $rp"
	ids_changed() { [ "$(ls_ids)" != "$ids0" ]; }
	if wait_for 20 ids_changed; then
		rid2=$(for i in $(ls_ids); do grep -qw -- "$i" <<<"$ids0" || echo "$i"; done)
		kill -"$sn" "$rp"
		wait "$rp"
		check_eq "run: SIG$sn gives 128+its number" "$want" "$?"
		check_fails "run: the sandbox is gone after SIG$sn" grep -qw "$rid2" <<<"$(ls_ids)"
		check_fails "run: its namespace is gone after SIG$sn" \
		    test -e "/run/netns/sluice-$rid2"
	else
		not_ok "run: the sandbox of a running command is listed (SIG$sn)"
	fi
done
sl run --policy nope -- true 2>/dev/null
check_eq "run: unknown policy fails" 1 "$?"
sl run --policy web 2>/dev/null
check_eq "run: no command is a usage error" 2 "$?"

# ------------------------------------------------------------ bad input
# Each refused request: the right status and error, and nothing made.
bad() {
	local text=$1 want=$2 code=$3 body=$4 out st
	local n0 p0 l0 r0
	n0=$(nsbx); p0=$(pins); l0=$(hostlinks); r0=$(rows)
	out=$(api POST /v1/sandboxes "$body")
	st=${out%% *}
	check_eq "$text: status $want" "$want" "$st"
	check_eq "$text: error $code" "$code" "$(jq -r .error <<<"${out#* }")"
	check_eq "$text: nothing made" "$n0 $p0 $l0 $r0" "$(nsbx) $(pins) $(hostlinks) $(rows)"
}
bad "invalid id" 400 bad_request '{"id":"Bad_Id","policy":"web","subject":"a"}'
bad "id with a path" 400 bad_request '{"id":"../../etc","policy":"web","subject":"a"}'
bad "id too long" 400 bad_request "{\"id\":\"$(printf 'a%.0s' $(seq 33))\",\"policy\":\"web\",\"subject\":\"a\"}"
bad "duplicate id" 409 exists "{\"id\":\"$A\",\"policy\":\"web\",\"subject\":\"a\"}"
bad "unknown policy" 422 unknown_policy '{"policy":"nope","subject":"a"}'
bad "malformed JSON" 400 bad_json '{"policy":"web",'
bad "not an object" 400 bad_request '["web"]'
bad "unknown member" 400 bad_request '{"policy":"web","subject":"a","tll":60}'
bad "missing subject" 400 bad_request '{"policy":"web"}'
bad "glob subject" 400 bad_request '{"policy":"web","subject":"team-*"}'
bad "bad label key" 400 bad_request '{"policy":"web","subject":"a","labels":{"Env":"x"}}'
bad "bad label value" 400 bad_request '{"policy":"web","subject":"a","labels":{"env":"a b"}}'
bad "labels not an object" 400 bad_request '{"policy":"web","subject":"a","labels":["env"]}'
bad "ttl zero" 400 bad_request '{"policy":"web","subject":"a","ttl":0}'
bad "ttl too long" 400 bad_request '{"policy":"web","subject":"a","ttl":"31d"}'
bad "ttl garbage" 400 bad_request '{"policy":"web","subject":"a","ttl":"5 minutes"}'
bad "policy not a string" 400 bad_request '{"policy":7,"subject":"a"}'
# A label key as Kubernetes writes them ('.', '/', '-') is a label like
# any other: created, and recorded with it.
K=k$$
out=$(api POST /v1/sandboxes "{\"id\":\"$K\",\"policy\":\"web\",\"subject\":\"a\",\"labels\":{\"app.kubernetes.io/name\":\"agent-1\"}}")
check_eq "label key with dots and a slash: created" 201 "${out%% *}"
check_eq "its create record carries the label" "app.kubernetes.io/name=agent-1" \
    "$("$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind sandbox.create --sandbox "$K" 2>/dev/null |
      jq -r '.labels[] | "\(.key)=\(.value)"' | head -n 1)"
sl sandbox rm "$K" >/dev/null 2>&1
# Refused by the control server before the handler (bad_json), it is
# recorded all the same, as a refused sandbox.create.
check "malformed JSON: recorded as a refused create" wait_for 5 sh -c \
    "'$SLUICE' audit tail --db '$WORLD_DIR/state/audit.db' --kind sandbox.create 2>/dev/null | grep refused | grep -q bad_json"
out=$(api DELETE "/v1/sandboxes/t$$-none")
check_eq "delete unknown: 404" 404 "${out%% *}"
check_eq "delete unknown: not_found" not_found "$(jq -r .error <<<"${out#* }")"

# ------------------------------------------------------------ exhausted
check "create B" sh -c "'$SLUICE' -s '$WORLD_SOCK' sandbox create --policy other --id $B >'$E2E_TMP/b.json'"
check "create C" sh -c "'$SLUICE' -s '$WORLD_SOCK' sandbox create --policy web --id $C >/dev/null"
bad "max_sandboxes reached" 503 pool_exhausted '{"policy":"web","subject":"a"}'
sl sandbox create --policy web --id "t$$-d" >/dev/null 2>"$E2E_TMP/err"
check_eq "CLI: create over capacity exits 1" 1 "$?"
check_match "CLI: the error names the cause" 'pool_exhausted \(503\)' "$(cat "$E2E_TMP/err")"
BIF=$(jq -r .interface "$E2E_TMP/b.json")
check_eq "B (other) reaches its own allowance" 200 "$(get "$B" http://203.0.113.80/)"
check_fails "B cannot reach A's allowance" \
    world_sandbox "$B" curl -s -m 3 -o /dev/null http://192.0.2.10/

# ------------------------------------------------------------ rm
CIF=$(sl sandbox show "$C" | jq -r .interface)
check "rm C" sl sandbox rm "$C"
check_fails "rm: C's namespace is gone" test -e "/run/netns/sluice-$C"
check_fails "rm: C's link is gone" world_host ip link show "$CIF"
check_eq "rm: C's elements are gone" 0 "$(elems "$CIF")"
check_fails "rm: /etc/netns/sluice-C is gone" test -e "/etc/netns/sluice-$C"
check_eq "rm: C's row is gone" "" "$(row "$C" id)"
check_fails "rm: C is not listed" grep -qw "$C" <<<"$(ls_ids)"
check "log: sandbox.delete" log_has "sandbox.delete id=$C"
sl sandbox rm "$C" 2>/dev/null
check_eq "rm C again: exit 1" 1 "$?"

# ------------------------------------------------------------ reload
# A reload that changes web's CIDR rule changes what the live A can reach
# at once (its static elements are replaced in one batch); B (other) is
# untouched; a policy that disappears leaves its sandbox on its old rules.
cp "$POL/web.yaml" "$E2E_TMP/web.yaml.orig"
cat >"$POL/web.yaml" <<'EOF'
version: 1
name: web
egress:
  allow:
    - cidr: 203.0.113.80/32
      ports: [80]
EOF
check "reload: changed web accepted" sl reload
check_eq "reload: A now reaches the new CIDR" 200 "$(get "$A" http://203.0.113.80/)"
check_fails "reload: A no longer reaches the old CIDR" \
    world_sandbox "$A" curl -s -m 3 -o /dev/null http://192.0.2.10/
check_eq "reload: B (other) unchanged" 200 "$(get "$B" http://203.0.113.80/)"
check "log: A's policy re-applied" log_has "sandbox $A: policy web re-applied"
cp "$E2E_TMP/web.yaml.orig" "$POL/web.yaml"
check "reload: web restored" sl reload
check_eq "reload: A reaches the old CIDR again" 200 "$(get "$A" http://192.0.2.10/)"
check_fails "reload: A no longer reaches 203.0.113.80" \
    world_sandbox "$A" curl -s -m 3 -o /dev/null http://203.0.113.80/
mv "$POL/other.yaml" "$E2E_TMP/other.yaml.gone"
check "reload: other removed" sl reload
check_eq "reload: B keeps its old rules" 200 "$(get "$B" http://203.0.113.80/)"
check "log: B's policy is gone, a finding" log_has "sandbox $B: policy other is no longer loaded"
mv "$E2E_TMP/other.yaml.gone" "$POL/other.yaml"
check "reload: other back" sl reload
check_eq "reload: B still reaches its allowance" 200 "$(get "$B" http://203.0.113.80/)"

# ------------------------------------------------------------ TTL
check "create E with --ttl 2s" sh -c \
    "'$SLUICE' -s '$WORLD_SOCK' sandbox create --policy web --id t$$-e --ttl 2s >'$E2E_TMP/e.json'"
check_match "E has an expiry" '^20[0-9-]+T[0-9:]+Z$' "$(jq -r .expires_at "$E2E_TMP/e.json")"
check "TTL: E is removed" wait_for 15 sh -c "! test -e /run/netns/sluice-t$$-e"
check_fails "TTL: E is not listed" grep -qw "t$$-e" <<<"$(ls_ids)"
check_eq "TTL: E's row is gone" "" "$(row "t$$-e" id)"
check "log: sandbox.expire" log_has "sandbox.expire id=t$$-e"

# ------------------------------------------------------------ SIGKILL
check "create F" sh -c "'$SLUICE' -s '$WORLD_SOCK' sandbox create --policy web --id $F >'$E2E_TMP/f.json'"
FIF=$(jq -r .interface "$E2E_TMP/f.json")
kill -KILL "$_WORLD_SLUICED_PID"
wait "$_WORLD_SLUICED_PID" 2>/dev/null
_WORLD_SLUICED_PID=
check "SIGKILL: the table stays" world_host nft list table inet sluice
check "SIGKILL: A's namespace stays" test -e "/run/netns/sluice-$A"
check_eq "SIGKILL: A still reaches its allowance" 200 "$(get "$A" http://192.0.2.10/)"
check_fails "SIGKILL: A still cannot reach a blocked address" \
    world_sandbox "$A" curl -s -m 3 -o /dev/null http://203.0.113.80/
check_fails "SIGKILL: A still cannot reach the metadata service" \
    world_sandbox "$A" curl -s -m 3 -o /dev/null http://169.254.169.254/
check_fails "SIGKILL: A cannot reach B's allowance" \
    world_sandbox "$A" curl -s -m 3 -o /dev/null http://203.0.113.80/
check_fails "SIGKILL: nothing answers DNS for A (nothing new is learned)" \
    world_sandbox "$A" dig +time=1 +tries=1 @"$WORLD_SERVICE" pkg.example.com

# While sluiced is down: F loses its link (a recorded sandbox with a missing
# piece), and orphans with sluice names appear.
world_host ip link del "$FIF"
ip netns add "sluice-t$$-orph"
cleanup_push "ip netns del sluice-t$$-orph"
world_host ip link add "sl-o$$" type veth peer name eth0 netns "sluice-t$$-orph"
world_host ip link add "sl-p$$" type veth peer name "sp$$"
cleanup_push "ip -n $WORLD_HOST_NS link del sl-p$$"

# ------------------------------------------------------------ restart
world_start_sluiced "$CFG" || { not_ok "sluiced restarts"; finish; }
check_eq "restart: ls shows the live sandboxes" "$A $B " "$(ls_ids)"
check "log: sandbox.adopt A" log_has "sandbox.adopt id=$A"
out=$(sl exec "$A" -- sh -c 'echo "$SLUICE_TOKEN"')
check_eq "restart: exec works with the same token" "$ATOKEN" "$out"
check_eq "restart: A still reaches its allowance" 200 "$(get "$A" http://192.0.2.10/)"
check_fails "restart: A still cannot reach a blocked address" \
    world_sandbox "$A" curl -s -m 3 -o /dev/null http://203.0.113.80/
check_eq "restart: B's policy unchanged" 200 "$(get "$B" http://203.0.113.80/)"
check_fails "restart: F (lost its link) is removed" test -e "/run/netns/sluice-$F"
check_eq "restart: F's row is gone" "" "$(row "$F" id)"
check_eq "restart: F's elements are gone" 0 "$(elems "$FIF")"
check_fails "restart: the orphan namespace is removed" test -e "/run/netns/sluice-t$$-orph"
check_fails "restart: the orphan veth is removed" world_host ip link show "sl-o$$"
check_fails "restart: the orphan link is removed" world_host ip link show "sl-p$$"
check "log: orphans reported" log_has "sandbox.orphan"
check_eq "restart: status counts 2" 2 "$(sl status --json | jq -r .sandboxes)"

# ------------------------------------------------------------ the end
check "rm A" sl sandbox rm "$A"
check "rm B" sl sandbox rm "$B"
check_eq "nothing left: no sandbox" 0 "$(nsbx)"
check_eq "nothing left: no pin" 0 "$(pins)"
check_eq "nothing left: no sl-* link" "" "$(hostlinks)"
check_eq "nothing left: no row" 0 "$(rows)"
check_eq "nothing left: no sandbox elements" 0 "$(all_elems)"
check "sluiced stops cleanly" world_stop_sluiced
check_fails "sanitizers: no report in sluiced's log" \
    grep -qE 'runtime error|ERROR: (Address|Leak)Sanitizer' "$WORLD_DIR/log/sluiced.log"
finish
