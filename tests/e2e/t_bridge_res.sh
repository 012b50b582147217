#!/bin/bash
# t_bridge_res.sh: MCP resources and prompts through the bridge, end to end.
# The official SDK client (servers/mcp_client.mjs) in a sandbox reads
# resources and gets prompts of an upstream over stdio (servers/
# res_server.mjs, which logs what reaches it). Shown here: the initialize
# answer offers resources and prompts because the upstream does (and not
# for an upstream without them), lists filtered page by page with the
# upstream's cursors, reads allowed, denied (never reaching the upstream),
# asked (approved and denied through the CLI), a secret redacted in a text
# and in a blob (the AWS key and the credential Sluice holds), contents
# under a hidden URI dropped, a classified read tainting the sandbox (its
# egress narrowed at once), prompts with argument constraints, redacted
# and tainting, subscriptions only to shown URIs, updates and list changes
# reaching the client (with its next answer, and at once on the GET
# stream: one per session, a second replacing the first, ended with the
# session or the sandbox, at most 32 per sandbox, the wrong session or
# token refused), mcp.resource and mcp.prompt records, and
# malformed, oversized and out-of-order requests answered with the spec's
# errors while the bridge keeps serving. Torn down on exit.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

command -v jq >/dev/null && command -v nft >/dev/null && command -v curl >/dev/null &&
    command -v node >/dev/null || { not_ok "jq, nft, curl and node are installed"; finish; }
world_up || { not_ok "world_up"; finish; }

NODE=$(command -v node)
CFG=$E2E_TMP/sluice.yaml
POL=$E2E_TMP/policies FLAGS=$E2E_TMP/res SECRETS=$E2E_TMP/secrets OUT=$E2E_TMP/out
mkdir -p "$POL" "$FLAGS" "$SECRETS" "$OUT" && chmod 0700 "$SECRETS"
# The upstream runs as the bridge's user: its log is writable by it.
: >"$FLAGS/calls.log" && chmod 0777 "$FLAGS" && chmod 0666 "$FLAGS/calls.log"
# A fake credential, unique to this run.
CRED="sk-fake-res-$$-$RANDOM$RANDOM"
printf '%s' "$CRED" >"$SECRETS/res.cred"
AWS=AKIAIOSFODNN7EXAMPLE

cat >"$POL/rp.yaml" <<EOF
version: 1
name: rp
egress:
  allow:
    - cidr: $WORLD_WEB/32
      ports: [80]
    - cidr: $WORLD_PKG/32
      ports: [80]
mcp:
  approval_timeout: 60s
  taint:
    level: confidential
    keep:
      - cidr: $WORLD_PKG/32
        ports: [80]
  results:
    redact: [aws_keys, upstream_credentials]
  tools:
    - tool: res/touch
      decision: allow
  resources:
    - server: res
      uri: "note://private/*"
      decision: deny
    - server: res
      uri: "note://hr/*"
      decision: allow
      classification: confidential
    - server: res
      uri: "note://ask/*"
      decision: ask
    - server: res
      uri: "note://docs/*"
      schemes: [note]
      decision: allow
  prompts:
    - prompt: res/secret
      decision: deny
    - prompt: res/summarize
      decision: allow
      args:
        topic: {type: string, max_length: 20, pattern: "^[a-z ]*$"}
      required: [topic]
    - prompt: res/review
      decision: ask
      allow_other_args: true
    - prompt: res/hr-brief
      decision: allow
      classification: secret
EOF
world_sluiced_config "$CFG" "$POL"
cat >>"$CFG" <<EOF
servers:
  - name: res
    transport: stdio
    command: [$NODE, $WORLD_SERVERS/res_server.mjs, $FLAGS]
    env: {PATH: /usr/local/bin:/usr/bin:/bin}
    credential: {file: $SECRETS/res.cred, child_env: API_TOKEN}
  - name: plain
    transport: stdio
    command: [$NODE, $WORLD_SERVERS/drift_server.mjs, $FLAGS]
EOF
world_start_sluiced "$CFG" || { not_ok "sluiced starts"; finish; }
URL=http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT/mcp
wait_for 10 world_host sh -c "ss -ltn | grep -q '$WORLD_SERVICE:$WORLD_BRIDGE_PORT'" &&
    ok "the bridge listens" || { not_ok "the bridge listens"; finish; }
sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
A=ra$$; C=rc$$
TA=$(sl sandbox create --policy rp --subject alice --id "$A" | jq -r .token)
TC=$(sl sandbox create --policy rp --subject carol --id "$C" | jq -r .token)
[[ $TA =~ ^[0-9a-f]{64}$ && $TC =~ ^[0-9a-f]{64}$ ]] && ok "sandboxes created" ||
    { not_ok "sandboxes created"; finish; }
# client SBX TOKEN SERVER ARGS...: the SDK client inside sandbox SBX.
client() {
	world_mcp_client "sandbox:$1" --url "$URL/$3" \
	    --header "Authorization: Bearer $2" "${@:4}"
}
reached() { grep -c -- "$1" "$FLAGS/calls.log"; }
records() {	# records KIND SBX: every record of KIND of SBX, one a line
	"$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind "$1" \
	    --sandbox "$2" 2>/dev/null
}

# ---------------------------------------------------------------- initialize
H_AUTH="Authorization: Bearer $TA"
H_ACC='Accept: application/json, text/event-stream'
H_JSON='Content-Type: application/json'
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'
raw() {	# raw SERVER [CURLARGS...]: body of one POST from sandbox A
	local srv=$1; shift
	world_sandbox "$A" curl -s -m 20 -X POST -H "$H_AUTH" -H "$H_ACC" \
	    -H "$H_JSON" "$@" "$URL/$srv"
}
caps=$(raw res --data "$INIT" | jq -c '.result.capabilities')
check_eq "initialize offers resources (subscribe, listChanged) and prompts" \
    '{"listChanged":true,"subscribe":true} {"listChanged":true}' \
    "$(jq -cS '.resources, .prompts' <<<"$caps" | tr '\n' ' ' | sed 's/ $//')"
pcaps=$(raw plain --data "$INIT" | jq -c '.result.capabilities')
check_eq "an upstream without resources or prompts: none offered" \
    'null null true' "$(jq -r '"\(.resources) \(.prompts) \(.tools != null)"' <<<"$pcaps")"

# ---------------------------------------------------------------- lists
client "$A" "$TA" res --resources >"$OUT/rl" 2>"$OUT/rl.err" ||
    sed 's/^/#   /' "$OUT/rl.err"
check_eq "resources/list: only what the policy shows, across the upstream's pages" \
    "note://ask/x note://docs/aws note://docs/blob note://docs/multi note://docs/readme note://hr/salaries" \
    "$(jq -r '.resources[].uri' "$OUT/rl" 2>/dev/null | sort | tr '\n' ' ' | sed 's/ $//')"
check_eq "resources/list: the client paged through the upstream's 3 pages" 3 \
    "$(jq -r .pages "$OUT/rl" 2>/dev/null)"
client "$A" "$TA" res --templates >"$OUT/tl" 2>&1
check_eq "resources/templates/list: the private template is hidden" "note://docs/{name}" \
    "$(jq -r '.resourceTemplates[].uriTemplate' "$OUT/tl" 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"
client "$A" "$TA" res --prompts >"$OUT/pl" 2>&1
check_eq "prompts/list: the denied prompt is hidden" "hr-brief review summarize" \
    "$(jq -r '.prompts[].name' "$OUT/pl" 2>/dev/null | sort | tr '\n' ' ' | sed 's/ $//')"

# ---------------------------------------------------------------- reads
client "$A" "$TA" res --read note://docs/readme >"$OUT/r1" 2>&1
check_eq "an allowed read returns the upstream's text" "hello docs" \
    "$(jq -r '.contents[0].text' "$OUT/r1" 2>/dev/null)"
client "$A" "$TA" res --read note://private/a >"$OUT/r2" 2>&1
check_eq "a denied read: -32002" -32002 "$(jq -r .error.code "$OUT/r2" 2>/dev/null)"
check_match "a denied read: a readable reason" "policy does not allow" "$(cat "$OUT/r2")"
check_eq "the denied read never reached the upstream" 0 "$(reached 'read note://private/a')"
client "$A" "$TA" res --read 'note://docs/../private/a' >"$OUT/r3" 2>&1
check_eq "a dot-segment escape is refused" -32002 "$(jq -r .error.code "$OUT/r3" 2>/dev/null)"
check_eq "the escape never reached the upstream" 0 "$(reached 'read note://docs/../')"
client "$A" "$TA" res --read 'NOTE://private/a' >"$OUT/r4" 2>&1
check_eq "an upper-case scheme does not get past the deny rule" -32002 \
    "$(jq -r .error.code "$OUT/r4" 2>/dev/null)"

# ---------------------------------------------------------------- redaction
client "$A" "$TA" res --read note://docs/aws >"$OUT/aws" 2>&1
check_match "text: the AWS key is redacted" 'REDACTED:aws_key' "$(cat "$OUT/aws")"
check_fails "text: the AWS key is gone" grep -q "$AWS" "$OUT/aws"
check_fails "text: the held credential is gone" grep -q "$CRED" "$OUT/aws"
client "$A" "$TA" res --read note://docs/blob >"$OUT/blob" 2>&1
blob=$(jq -r '.contents[0].blob' "$OUT/blob" 2>/dev/null | base64 -d 2>/dev/null | tr -d '\0')
check_match "blob: still base64 of the upstream's bytes" 'bin .* end' "$blob"
check_match "blob: the AWS key inside is redacted" 'REDACTED:aws_key' "$blob"
check_fails "blob: no AWS key inside" grep -q "$AWS" <<<"$blob"
check_fails "blob: no held credential inside" grep -q "$CRED" <<<"$blob"
client "$A" "$TA" res --read note://docs/multi >"$OUT/multi" 2>&1
check_eq "contents under a hidden URI are dropped" "note://docs/multi" \
    "$(jq -r '.contents[].uri' "$OUT/multi" 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"
check_fails "the hidden contents' text is not there" grep -q LEAKED "$OUT/multi"

# ---------------------------------------------------------------- records
wait_for 5 sh -c "'$SLUICE' audit tail --db '$WORLD_DIR/state/audit.db' --kind mcp.resource --sandbox '$A' 2>/dev/null | grep -q docs/blob"
check_eq "mcp.resource record of the allowed read" "res note://docs/readme allow" \
    "$(records mcp.resource "$A" | jq -r 'select(.uri == "note://docs/readme") | "\(.server) \(.uri) \(.decision)"' | head -n 1)"
check_eq "mcp.resource record of the denied read names rule and reason" \
    "deny mcp.resources[0] rule_deny" \
    "$(records mcp.resource "$A" | jq -r 'select(.uri == "note://private/a") | "\(.decision) \(.rule) \(.reason)"' | head -n 1)"
check_eq "the blob's record counts its redactions" true \
    "$(records mcp.resource "$A" | jq 'select(.uri == "note://docs/blob") | .redactions >= 2' | head -n 1)"
check_eq "the bad URI's record: bad_uri" bad_uri \
    "$(records mcp.resource "$A" | jq -r 'select(.uri == "note://docs/../private/a") | .reason' | head -n 1)"
check_match "OCSF export maps mcp.resource to API Activity (read)" '"class_uid":6003.*"activity_id":2|"activity_id":2.*"class_uid":6003' \
    "$("$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --format ocsf --kind mcp.resource 2>/dev/null | grep -m1 'resources/read')"

# ---------------------------------------------------------------- ask
npend() { "$SLUICE" -s "$WORLD_SOCK" approvals --json 2>/dev/null | jq -e "length == $1" >/dev/null; }
# settle VERB REASON: once one request waits, approve or deny it by the CLI.
settle() {
	wait_for 10 npend 1 || { not_ok "a request waits for approval"; return 1; }
	check "$1 the waiting request" sl "$1" "$(sl approvals --json | jq -r '.[0].id')" --reason "$2"
}
client "$A" "$TA" res --timeout 30000 --read note://ask/x >"$OUT/ask1" 2>&1 &
p1=$!
wait_for 10 npend 1 && ok "ask: the read is pending" || not_ok "ask: the read is pending"
check_eq "ask: nothing reached the upstream yet" 0 "$(reached 'read note://ask/x')"
check_match "ask: the approvals list shows the URI" 'note://ask/x' "$(sl approvals 2>&1)"
settle approve "fine"
wait "$p1"
check_eq "the approved read returns the text" "asked and answered" \
    "$(jq -r '.contents[0].text' "$OUT/ask1" 2>/dev/null)"
client "$A" "$TA" res --timeout 30000 --prompt review '{"what":"the plan"}' >"$OUT/ask2" 2>&1 &
p2=$!
settle deny "no"
wait "$p2"
check_eq "the denied prompt: an error" -32602 "$(jq -r .error.code "$OUT/ask2" 2>/dev/null)"
check_match "the denied prompt says a person declined" "declined" "$(cat "$OUT/ask2")"
check_eq "the denied prompt never reached the upstream" 0 "$(reached 'prompt review')"
check_eq "its mcp.prompt record: approval denied" "deny denied approval_denied" \
    "$(records mcp.prompt "$A" | jq -r 'select(.prompt == "review") | "\(.decision) \(.approval) \(.reason)"' | head -n 1)"

# ---------------------------------------------------------------- prompts
client "$A" "$TA" res --prompt summarize '{"topic":"cats"}' >"$OUT/p1" 2>&1
check_match "an allowed prompt" "Summarize cats" "$(jq -r '.messages[0].content.text' "$OUT/p1" 2>/dev/null)"
check_match "the prompt's messages are redacted" 'REDACTED:aws_key' "$(cat "$OUT/p1")"
check_fails "no AWS key in the prompt" grep -q "$AWS" "$OUT/p1"
client "$A" "$TA" res --prompt summarize '{"topic":"CATS; rm -rf"}' >"$OUT/p2" 2>&1
check_eq "an argument constraint: -32602" -32602 "$(jq -r .error.code "$OUT/p2" 2>/dev/null)"
check_match "the constraint is named" 'topic' "$(cat "$OUT/p2")"
client "$A" "$TA" res --prompt secret >"$OUT/p3" 2>&1
check_eq "a denied prompt: -32602" -32602 "$(jq -r .error.code "$OUT/p3" 2>/dev/null)"
check_eq "denied and constrained prompts never reached the upstream" 0 \
    "$(grep -c -e 'prompt secret' -e 'CATS' "$FLAGS/calls.log")"
check_eq "mcp.prompt record with the arguments' digest" "allow true" \
    "$(records mcp.prompt "$A" | jq -r 'select(.prompt == "summarize" and .decision == "allow") | "\(.decision) \(.arguments_digest | startswith("sha256:"))"' | head -n 1)"

# ---------------------------------------------------------------- subscriptions
client "$A" "$TA" res --subscribe note://private/a --subscribe note://docs/readme \
    --call touch --await notifications/resources/updated \
    --await notifications/resources/list_changed \
    --await notifications/prompts/list_changed --notes --resources --prompts \
    --unsubscribe note://docs/readme >"$OUT/sub" 2>"$OUT/sub.err" ||
    sed 's/^/#   /' "$OUT/sub.err"
check_eq "subscribing to a hidden URI: -32002" -32002 "$(sed -n 1p "$OUT/sub" | jq -r .error.code 2>/dev/null)"
check_eq "the hidden subscription never reached the upstream" 0 "$(reached 'subscribe note://private/a')"
check_eq "subscribing to a shown URI reached the upstream" 1 "$(reached '^subscribe note://docs/readme')"
notes=$(grep '"notes"' "$OUT/sub")
check_eq "the update of the subscribed URI reached the client, the hidden one's not" \
    "note://docs/readme" \
    "$(jq -r '.notes[] | select(.method == "notifications/resources/updated") | .params.uri' <<<"$notes" | tr '\n' ' ' | sed 's/ $//')"
check_eq "the update carries only what the spec defines" '["uri"]' \
    "$(jq -c '[.notes[] | select(.method == "notifications/resources/updated") | .params | keys[]] | unique' <<<"$notes")"
check_eq "resources and prompts list_changed each reached the client once" "1 1" \
    "$(jq -r '"\([.notes[] | select(.method == "notifications/resources/list_changed")] | length) \([.notes[] | select(.method == "notifications/prompts/list_changed")] | length)"' <<<"$notes")"
check_match "after list_changed the new resource is listed" 'note://docs/new' \
    "$(grep '"resources"' "$OUT/sub")"
check_eq "after list_changed the new prompt is hidden (no rule)" "hr-brief review summarize" \
    "$(grep '"prompts"' "$OUT/sub" | jq -r '.prompts[].name' | sort | tr '\n' ' ' | sed 's/ $//')"
check_eq "unsubscribing reached the upstream" 1 "$(reached 'unsubscribe note://docs/readme')"

# ---------------------------------------------------------------- GET stream
# The SDK client opens the GET stream itself after initialize. A listens
# and sends nothing more; C's call makes the upstream speak. What A hears
# can only have come on its GET stream.
client "$A" "$TA" res --timeout 30000 --subscribe note://docs/readme \
    --listen notifications/resources/updated \
    --listen notifications/resources/list_changed >"$OUT/listen" 2>"$OUT/listen.err" &
lp=$!
wait_for 20 grep -q . "$OUT/listen" && ok "the listener subscribed" || not_ok "the listener subscribed"
client "$C" "$TC" res --call touch >/dev/null 2>&1
wait "$lp" && ok "the listener heard both notifications" ||
    { not_ok "the listener heard both notifications"; sed 's/^/#   /' "$OUT/listen.err"; }
check_eq "resources/updated and list_changed came with no POST in flight, on a GET stream" \
    "notifications/resources/updated 0 true notifications/resources/list_changed 0 true" \
    "$(sed -n '2,3p' "$OUT/listen" | jq -r '"\(.seen) \(.posts) \(.gets >= 1)"' | tr '\n' ' ' | sed 's/ $//')"

# By hand: sess SBX TOKEN prints a new session of res.
sess() {
	world_sandbox "$1" curl -s -m 20 -D - -o /dev/null -X POST -H "Authorization: Bearer $2" \
	    -H "$H_ACC" -H "$H_JSON" --data "$INIT" "$URL/res" |
	    awk -F': ' 'tolower($1)=="mcp-session-id"{print $2}' | tr -d '\r'
}
# get SBX TOKEN SID [CURLARGS...]: the status of a GET that ends at once.
get() {
	local sbx=$1 tok=$2 sid=$3; shift 3
	world_sandbox "$sbx" curl -s -o /dev/null -w '%{http_code}' -m 5 \
	    -H "Authorization: Bearer $tok" ${sid:+-H "Mcp-Session-Id: $sid"} "$@" "$URL/res"
}
# listen SBX TOKEN SID FILE: a GET stream read into FILE, in the background.
listen() {
	world_sandbox "$1" curl -s -N -m 60 -H "Authorization: Bearer $2" \
	    -H 'Accept: text/event-stream' -H "Mcp-Session-Id: $3" "$URL/res" >"$4" 2>&1 &
}
alive() { kill -0 "$1" 2>/dev/null; }
dead() { ! kill -0 "$1" 2>/dev/null; }
SA=$(sess "$A" "$TA")
[ -n "$SA" ] && ok "a session by hand for the stream" || not_ok "a session by hand for the stream"
check_eq "GET without a session: 400" 400 "$(get "$A" "$TA" '' -H 'Accept: text/event-stream')"
check_eq "GET of an unknown session: 404" 404 "$(get "$A" "$TA" 0123abcd -H 'Accept: text/event-stream')"
check_eq "GET not accepting an event stream: 406" 406 "$(get "$A" "$TA" "$SA" -H 'Accept: application/json')"
check_eq "GET with an unsupported MCP-Protocol-Version: 400" 400 \
    "$(get "$A" "$TA" "$SA" -H 'Accept: text/event-stream' -H 'MCP-Protocol-Version: 1999-01-01')"
check_eq "GET from A with C's token: 401" 401 "$(get "$A" "$TC" "$SA" -H 'Accept: text/event-stream')"
check_eq "GET of A's session by C (its own token): 404" 404 "$(get "$C" "$TC" "$SA" -H 'Accept: text/event-stream')"
check_eq "PUT: 405, GET listed as allowed" "405 GET, POST, DELETE" \
    "$(world_sandbox "$A" curl -s -D - -o /dev/null -m 5 -X PUT -H "Authorization: Bearer $TA" "$URL/res" |
      awk -F': ' '/^HTTP/{c=$0; sub(/^[^ ]+ /,"",c); sub(/ .*/,"",c)} tolower($1)=="allow"{a=$2} END{print c, a}' | tr -d '\r')"
listen "$A" "$TA" "$SA" "$OUT/g1"; g1=$!
wait_for 10 test -s "$OUT/g1" && ok "the stream opens with a comment" || not_ok "the stream opens with a comment"
client "$C" "$TC" res --call touch >/dev/null 2>&1
wait_for 10 sh -c "grep -q resources/list_changed '$OUT/g1' && grep -q prompts/list_changed '$OUT/g1'" &&
    ok "a curl GET stream gets both list_changed" || not_ok "a curl GET stream gets both list_changed"
check_eq "it is an SSE message event with the notification alone" \
    '{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}' \
    "$(sed -n 's/^data: //p' "$OUT/g1" | grep resources/list_changed | head -n 1 | jq -cS .)"
listen "$A" "$TA" "$SA" "$OUT/g2"; g2=$!
wait_for 10 test -s "$OUT/g2"
wait_for 10 dead "$g1" && ok "a second GET of the session ends the first" ||
    not_ok "a second GET of the session ends the first"
client "$C" "$TC" res --call touch >/dev/null 2>&1
wait_for 10 grep -q 'notifications/prompts/list_changed' "$OUT/g2" &&
    ok "the second stream gets what follows" || not_ok "the second stream gets what follows"
check_eq "the first stream got nothing after it ended" 1 "$(grep -c prompts/list_changed "$OUT/g1")"
world_sandbox "$A" curl -s -o /dev/null -m 5 -X DELETE -H "Authorization: Bearer $TA" \
    -H "Mcp-Session-Id: $SA" "$URL/res"
wait_for 10 dead "$g2" && ok "the session's end ends its stream" || not_ok "the session's end ends its stream"

# A stream whose client goes away is closed as soon as the socket says
# so, not at its next keepalive write: its connection stops counting for
# the sandbox and it no longer counts as a session listening.
S3=$(sess "$A" "$TA")
listen "$A" "$TA" "$S3" "$OUT/g3"
wait_for 10 test -s "$OUT/g3" || not_ok "a third stream opens"
went='the client of an event stream from [0-9.]+ went away'
n0=$(grep -cE "$went" "$WORLD_DIR/log/sluiced.log")
pkill -f "Mcp-Session-Id: $S3"
gone3() { [ "$(grep -cE "$went" "$WORLD_DIR/log/sluiced.log")" -gt "$n0" ]; }
check "a stream whose client went away is closed at once" wait_for 10 gone3
check_eq "... and its session still answers" 200 \
    "$(world_sandbox "$A" curl -s -o /dev/null -w '%{http_code}' -m 5 -X DELETE \
      -H "Authorization: Bearer $TA" -H "Mcp-Session-Id: $S3" "$URL/res")"

# A removed sandbox's streams close at once, whether or not it reads.
D=rd$$
TD=$(sl sandbox create --policy rp --subject dave --id "$D" | jq -r .token)
SD=$(sess "$D" "$TD")
listen "$D" "$TD" "$SD" "$OUT/gd"; gd=$!
wait_for 10 test -s "$OUT/gd" && ok "D listens" || not_ok "D listens"
sl sandbox rm "$D" >/dev/null 2>&1
wait_for 10 dead "$gd" && ok "removing a sandbox closes its stream" || not_ok "removing a sandbox closes its stream"

# The cap: E opens 40 streams over 40 sessions; at most 32 stay open (the
# oldest end), so its connections stay within its cap with room for
# requests, and another sandbox still connects.
E=re$$
TE=$(sl sandbox create --policy rp --subject erin --id "$E" | jq -r .token)
epids=()
for i in $(seq 1 40); do
	s=$(sess "$E" "$TE")
	[ -n "$s" ] || break
	listen "$E" "$TE" "$s" "$OUT/ge.$i"; epids+=($!)
	# Open before the next: the order the cap ends them in is known.
	wait_for 10 test -s "$OUT/ge.$i" || break
done
check_eq "E opened 40 sessions with a GET stream each" 40 "${#epids[@]}"
nalive() { local n=0 p; for p in "${epids[@]}"; do alive "$p" && n=$((n + 1)); done; echo $n; }
nalive_le() { [ "$(nalive)" -le "$1" ]; }
wait_for 20 nalive_le 32
check_eq "E holds at most 32 streams: the 8 oldest ended" 32 "$(nalive)"
check_eq "the ended ones are E's first 8" "dead dead dead dead dead dead dead dead alive" \
    "$(for p in "${epids[@]:0:9}"; do alive "$p" && echo alive || echo dead; done | tr '\n' ' ' | sed 's/ $//')"
conns=$(world_host ss -tnH state established "( sport = :$WORLD_BRIDGE_PORT )" 2>/dev/null | wc -l)
check "the bridge holds no more than E's cap of connections and A's" test "$conns" -le 64
client "$E" "$TE" res --call touch >"$OUT/ecall" 2>&1
check_match "E still calls a tool beside its streams" touched "$(cat "$OUT/ecall")"
client "$A" "$TA" res --read note://docs/readme >"$OUT/aread" 2>&1
check_eq "another sandbox still connects" "hello docs" "$(jq -r '.contents[0].text' "$OUT/aread" 2>/dev/null)"
wait_for 10 grep -q 'notifications/resources/list_changed' "$OUT/ge.40" &&
    ok "E's newest stream heard its own call's list_changed" || not_ok "E's newest stream heard its own call's list_changed"
sl sandbox rm "$E" >/dev/null 2>&1
wait_for 10 nalive_le 0 && ok "removing E closes its 32 streams" || not_ok "removing E closes its 32 streams"

# ---------------------------------------------------------------- taint
web() { world_sandbox "$1" curl -s -o /dev/null -w '%{http_code}' -m 5 "http://$2/ip"; }
check_eq "C reaches the web before the classified read" 200 "$(web "$C" "$WORLD_WEB")"
client "$C" "$TC" res --read note://hr/salaries >"$OUT/hr" 2>&1
check_eq "the classified read is answered" "alice: 100" "$(jq -r '.contents[0].text' "$OUT/hr" 2>/dev/null)"
check_fails "right after it the web is cut" \
    world_sandbox "$C" curl -s -o /dev/null -m 3 "http://$WORLD_WEB/ip"
check_eq "the keep-list host still works" 200 "$(web "$C" "$WORLD_PKG")"
check_eq "sandbox A is not tainted" 200 "$(web "$A" "$WORLD_WEB")"
check_eq "the read's record: confidential, taints" "confidential true" \
    "$(records mcp.resource "$C" | jq -r 'select(.uri == "note://hr/salaries") | "\(.classification) \(.taints)"' | head -n 1)"
client "$A" "$TA" res --prompt hr-brief >"$OUT/hrp" 2>&1
check_match "a classified prompt is answered" "HR brief" "$(cat "$OUT/hrp")"
check_fails "and taints its sandbox" \
    world_sandbox "$A" curl -s -o /dev/null -m 3 "http://$WORLD_WEB/ip"

# ---------------------------------------------------------------- hostile
hdrs=$E2E_TMP/init.hdr
world_sandbox "$A" curl -s -m 20 -D "$hdrs" -o /dev/null -X POST -H "$H_AUTH" \
    -H "$H_ACC" -H "$H_JSON" --data "$INIT" "$URL/res"
SID=$(awk -F': ' 'tolower($1)=="mcp-session-id"{print $2}' "$hdrs" | tr -d '\r')
[ -n "$SID" ] && ok "a session by hand" || not_ok "a session by hand"
rpc() { raw res -H "Mcp-Session-Id: $SID" -H 'MCP-Protocol-Version: 2025-06-18' --data "$1"; }
code() { rpc "$1" | sed -n 's/^data: //p; /^{/p' | tail -n 1 | jq -r .error.code; }
check_eq "read without uri: -32602" -32602 "$(code '{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{}}')"
check_eq "read with a number for uri: -32602" -32602 "$(code '{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":7}}')"
check_eq "read with an oversized uri: -32602" -32602 \
    "$(code "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"resources/read\",\"params\":{\"uri\":\"note://docs/$(head -c 5000 /dev/zero | tr '\0' a)\"}}")"
check_eq "prompt with a non-string argument: -32602" -32602 \
    "$(code '{"jsonrpc":"2.0","id":5,"method":"prompts/get","params":{"name":"summarize","arguments":{"topic":7}}}')"
check_eq "prompt with arguments not an object: -32602" -32602 \
    "$(code '{"jsonrpc":"2.0","id":6,"method":"prompts/get","params":{"name":"summarize","arguments":[1]}}')"
check_eq "list with a bad cursor type: -32602" -32602 "$(code '{"jsonrpc":"2.0","id":7,"method":"resources/list","params":{"cursor":5}}')"
check_eq "list with a cursor the upstream does not know: -32602" -32602 \
    "$(code '{"jsonrpc":"2.0","id":8,"method":"resources/list","params":{"cursor":"zz"}}')"
check_eq "unsubscribe without a subscription: -32602" -32602 \
    "$(code '{"jsonrpc":"2.0","id":9,"method":"resources/unsubscribe","params":{"uri":"note://docs/readme"}}')"
check_eq "subscribe without uri: -32602" -32602 "$(code '{"jsonrpc":"2.0","id":10,"method":"resources/subscribe"}')"
check_eq "prompts/get without name: -32602" -32602 "$(code '{"jsonrpc":"2.0","id":11,"method":"prompts/get","params":{"arguments":{}}}')"
check_eq "prompts/get on a server without prompts: -32601" -32601 \
    "$(world_sandbox "$A" sh -c "curl -s -m 20 -D $hdrs.p -o /dev/null -X POST -H '$H_AUTH' -H '$H_ACC' -H '$H_JSON' --data '$INIT' '$URL/plain' &&
      curl -s -m 20 -X POST -H '$H_AUTH' -H '$H_ACC' -H '$H_JSON' -H \"Mcp-Session-Id: \$(awk -F': ' 'tolower(\$1)==\"mcp-session-id\"{print \$2}' $hdrs.p | tr -d '\r')\" \
        --data '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"prompts/get\",\"params\":{\"name\":\"x\"}}' '$URL/plain'" | jq -r .error.code)"
check_eq "a read out of order (no session): 400" 400 \
    "$(world_sandbox "$A" curl -s -o /dev/null -w '%{http_code}' -m 10 -X POST -H "$H_AUTH" -H "$H_ACC" -H "$H_JSON" \
      --data '{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"note://docs/readme"}}' "$URL/res")"
check_eq "a read as a notification: accepted, nothing read" "202 0" \
    "$(world_sandbox "$A" curl -s -o /dev/null -w '%{http_code}' -m 10 -X POST -H "$H_AUTH" -H "$H_ACC" -H "$H_JSON" \
      -H "Mcp-Session-Id: $SID" --data '{"jsonrpc":"2.0","method":"resources/read","params":{"uri":"note://docs/aws"}}' "$URL/res") $(($(reached 'read note://docs/aws') - 1))"
client "$A" "$TA" res --read note://docs/readme >"$OUT/after" 2>&1
check_eq "the bridge keeps serving" "hello docs" "$(jq -r '.contents[0].text' "$OUT/after" 2>/dev/null)"

# ---------------------------------------------------------------- secrets
{ cat "$OUT"/*; records mcp.resource "$A"; records mcp.prompt "$A"; world_sluiced_log; } \
    >"$E2E_TMP/seen" 2>&1
check_fails "the held credential appears nowhere the sandbox or the log sees" \
    grep -q "$CRED" "$E2E_TMP/seen"
check "sluiced stops cleanly" world_stop_sluiced
SAN='runtime error|ERROR: (Address|Leak)Sanitizer'
if grep -qE "$SAN" "$WORLD_DIR/log/sluiced.log"; then
	not_ok "sanitizers: no report in sluiced's log"
	grep -E -A30 "$SAN" "$WORLD_DIR/log/sluiced.log" | head -n 60 | sed 's/^/#   /'
else
	ok "sanitizers: no report in sluiced's log"
fi
verdict=$("$SLUICE" audit verify --db "$WORLD_DIR/state/audit.db" 2>&1)
check_match "the audit log's chain verifies, new kinds and all" '^result: +verified' "$verdict"
finish
