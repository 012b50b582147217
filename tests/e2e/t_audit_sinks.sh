#!/bin/bash
# t_audit_sinks.sh: the SOC feed as a SIEM meets it, configured the way a user
# configures it (audit_sinks in the daemon config). sluiced runs from a
# temporary config with four sinks: an NDJSON spool file, an OCSF spool file,
# a webhook whose receiver (a small local HTTP server) fails every third
# request, and syslog RFC 5424 on a Unix datagram socket; a fifth webhook
# points at a port where nothing listens and has a low lag_alert. Records come
# from the daemon itself (log.open, policy.reload, log.close). We check, by
# origin#seq, that every copy holds the whole log in order without gaps, that
# checkpoints follow the record they cover, that a checkpoint taken from the
# feed works for `sluice audit verify --checkpoint`, that a clean restart
# resumes without a repeat and a SIGKILL without a loss, and that the dead
# sink shows its lag in /metrics and raised one finding. Loopback and files
# only; every process is ours and is killed at exit.
#
# The unit suite (tests/unit/check_audit_sink.c) covers the transports and
# the hostile receivers in depth; this is the daemon's wiring of them.
. "$(dirname "$0")/isolate.sh"
. "$(dirname "$0")/lib.sh"

for t in jq curl python3 sqlite3; do
	command -v "$t" >/dev/null || { echo "not ok - $t missing"; exit 1; }
done

T=$E2E_TMP
POL=$T/policies
SOCK=$T/run/ctl/sluice.sock
LOG=$T/sluiced.log
DB=$T/state/audit.db
ORIGIN="audit.e2e$$.sinks.example/seg/0"
TOKEN="e2e-token-$$"
mkdir -p "$POL" "$T/state"
printf 'version: 1\nname: minimal\n' >"$POL/minimal.yaml"
printf '%s\n' "$TOKEN" >"$T/token"

# ------------------------------------------------------------ the receivers
cat >"$T/hook.py" <<'EOF'
# hook.py PORTFILE OUT TOKEN: an HTTP receiver that answers 500 to every
# third request and keeps the bodies it acknowledged, in order.
import http.server, signal, sys, threading
signal.alarm(900)	# bounded even if the scenario's cleanup never runs
portfile, out, token = sys.argv[1], sys.argv[2], sys.argv[3]
lock = threading.Lock()
count = [0]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get('Content-Length', '0'))
        body = self.rfile.read(n)
        with lock:
            count[0] += 1
            if count[0] % 3 == 0:
                code = 500
            elif self.headers.get('Authorization') != 'Bearer ' + token:
                code = 401
            else:
                with open(out, 'ab') as f:
                    f.write(body)
                code = 200
        self.send_response(code)
        self.send_header('Content-Length', '0')
        self.end_headers()
    def log_message(self, *a):
        pass
srv = http.server.HTTPServer(('127.0.0.1', 0), H)
with open(portfile + '.tmp', 'w') as f:
    f.write(str(srv.server_address[1]))
import os
os.rename(portfile + '.tmp', portfile)
srv.serve_forever()
EOF
cat >"$T/syslogd.py" <<'EOF'
# syslogd.py PATH OUT: a datagram receiver; one message per line.
import signal, socket, sys
signal.alarm(900)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], 'ab', buffering=0) as f:
    while True:
        f.write(s.recv(1 << 20) + b'\n')
EOF
cat >"$T/check.py" <<'EOF'
# check.py KIND FILE ORIGIN WANT [nodup]: reads a sink's copy (json, ocsf or
# syslog), dedupes on origin#seq and checks records 0..WANT-1 in order with
# no gap and each checkpoint after the record it covers. Prints the number of
# duplicates; exits 1 with a reason on the first violation.
import json, re, sys
kind, path, origin, want = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
nodup = len(sys.argv) > 5
def die(m):
    print(m); sys.exit(1)
events = []
for raw in open(path, 'rb').read().split(b'\n'):
    if not raw:
        continue
    line = raw.decode()
    if kind == 'syslog':
        m = re.match(r'<(\d+)>1 (\S+) (\S+) sluiced (\d+) (\S+) \[sluice@32473 ((?:[^\]\\]|\\.)*)\] (.*)$', line)
        if not m:
            die('not RFC 5424 from sluiced: ' + line[:120])
        if int(m.group(1)) // 8 != 13:
            die('facility is not log audit')
        sd = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(6)))
        if sd.get('origin') != origin:
            die('SD origin ' + repr(sd.get('origin')))
        line = m.group(7)
        v = json.loads(line)
        if m.group(5) == 'checkpoint':
            if int(sd['size']) != v['size']:
                die('SD size disagrees')
        elif int(sd['seq']) != v['seq'] or m.group(5) != v['kind']:
            die('SD seq/kind disagree with MSG')
    v = json.loads(line)
    if 'checkpoint' in v:
        if not v['checkpoint'].startswith(origin + '\n'):
            die('checkpoint of another origin')
        events.append(('c', v['size']))
    elif 'metadata' in v:
        uid = v['metadata']['uid']
        o, _, tail = uid.rpartition('#')
        if o != origin:
            die('uid ' + uid)
        if tail.startswith('checkpoint/'):
            events.append(('c', int(tail[11:])))
        else:
            if json.loads(v['raw_data'])['seq'] != int(tail):
                die('raw_data seq != uid')
            events.append(('r', int(tail)))
    else:
        if v.get('origin') != origin:
            die('origin ' + repr(v.get('origin')))
        events.append(('r', v['seq']))
nxt, dups, cks = 0, 0, set()
for t, n in events:
    if t == 'c':
        if n < 1 or n > nxt:
            die('checkpoint %d before record %d' % (n, n - 1))
        if n in cks:
            dups += 1
        cks.add(n)
    elif n < nxt:
        dups += 1
    elif n != nxt:
        die('gap: got %d, want %d' % (n, nxt))
    else:
        nxt += 1
if nxt < want:
    die('only %d of %d records' % (nxt, want))
if not cks:
    die('no checkpoint in the stream')
if nodup and dups:
    die('%d duplicates' % dups)
print(dups)
EOF

# Started directly (no wrapper) so that the pid killed at exit is the
# receiver's own; their output is not ours to wait for.
python3 "$T/hook.py" "$T/hook.port" "$T/hook.ndjson" "$TOKEN" >/dev/null 2>&1 &
cleanup_push "kill -KILL $!"
python3 "$T/syslogd.py" "$T/syslog.sock" "$T/syslog.txt" >/dev/null 2>&1 &
cleanup_push "kill -KILL $!"
if ! wait_for 30 test -s "$T/hook.port" || ! wait_for 30 test -S "$T/syslog.sock"; then
	echo "not ok - test receivers did not start"
	exit 1
fi
HPORT=$(cat "$T/hook.port")
# A port that refuses: bound by this python, never listening.
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0))
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(900)' "$T/dead.port" >/dev/null 2>&1 &
cleanup_push "kill -KILL $!"
wait_for 30 test -s "$T/dead.port" || { echo "not ok - no dead port"; exit 1; }
DPORT=$(cat "$T/dead.port")

"$SLUICE" audit keygen --origin "$ORIGIN" --out "$T/audit.key" >"$T/vkey" 2>&1 ||
	{ echo "not ok - audit keygen"; exit 1; }
VKEY=$(grep -o "^$ORIGIN+[0-9a-f]*+[A-Za-z0-9+/=]*" "$T/vkey" | head -n 1)

cat >"$T/sluice.yaml" <<EOF
version: 1
state_dir: $T/state
run_dir: $T/run
socket: $SOCK
policy_dir: $POL
dns:
  upstreams:
    - 192.0.2.53
audit:
  db: $DB
  key: $T/audit.key
  origin: $ORIGIN
audit_sinks:
  - name: spool
    type: file
    format: json
    target: $T/spool.ndjson
  - name: spool-ocsf
    type: file
    format: ocsf
    target: $T/spool.ocsf
  - name: hook
    type: webhook
    format: json
    target: http://127.0.0.1:$HPORT/ingest
    token_file: $T/token
  - name: syslog
    type: syslog
    format: json
    target: unix:$T/syslog.sock
  - name: dead
    type: webhook
    target: http://127.0.0.1:$DPORT/
    lag_alert: 3
EOF

sl() { "$SLUICE" -s "$SOCK" "$@"; }
alive() { sl status >/dev/null 2>&1; }
metrics() { curl -s --max-time 30 --unix-socket "$SOCK" http://localhost/metrics; }
metric() { metrics | awk -v k="$1" '$1 == k { print $2 }'; }
head_seq() { sqlite3 "file:$DB?mode=ro" 'SELECT max(seq) + 1 FROM records' 2>/dev/null; }
# feed_has FILE KIND WANT: the copy already holds records 0..WANT-1.
feed_has() { python3 "$T/check.py" "$2" "$1" "$ORIGIN" "$3" >/dev/null 2>&1; }

start_daemon() {
	"$SLUICED" --config "$T/sluice.yaml" --foreground >>"$LOG" 2>&1 &
	DPID=$!
	cleanup_push "kill -KILL $DPID"
	wait_for 30 test -S "$SOCK" && wait_for 30 alive
}

if ! start_daemon; then
	not_ok "sluiced starts with audit_sinks"
	sed 's/^/#   /' "$LOG" | head -n 20
	finish
fi
ok "sluiced starts with audit_sinks"
if ! metrics | grep -q '^sluice_audit_sink_lag{sink="spool"}'; then
	not_ok "sluiced runs its audit_sinks (sluice_audit_sink_lag in /metrics)"
	finish
fi

# ------------------------------------------------------------- delivery
# One burst of records at a time, each delivered before the next, so the
# webhook gets several requests (its receiver fails every third one)
# whatever batch sizes the shipper picks.
hook_caught_up() { [ "$(metric 'sluice_audit_sink_next_seq{sink="hook"}')" -ge "$(head_seq)" ]; }
for i in 1 2 3 4 5 6 7 8; do
	sl reload >/dev/null
	wait_for 30 hook_caught_up || break
done
N=$(head_seq)
check_match "the daemon wrote records" '^[0-9]+$' "$N"

for f in "spool.ndjson json" "spool.ocsf ocsf" "hook.ndjson json" "syslog.txt syslog"; do
	set -- $f
	if wait_for 60 feed_has "$T/$1" "$2" "$N"; then
		ok "$1: records 0..$((N - 1)) in order, no gap, checkpoints after their record"
	else
		not_ok "$1 holds the whole log"
		python3 "$T/check.py" "$2" "$T/$1" "$ORIGIN" "$N" | sed 's/^/#   /'
	fi
done
check "spool file: no duplicates when nothing failed" \
	python3 "$T/check.py" json "$T/spool.ndjson" "$ORIGIN" "$N" nodup
check_eq "spool file is private (0600)" 600 "$(stat -c %a "$T/spool.ndjson")"
fails=$(metric 'sluice_audit_sink_failures_total{sink="hook"}')
check_match "the webhook saw failures (every third request) and retried" '^[1-9][0-9]*$' "$fails"
check "the webhook's cursor reached the head" \
	test "$(metric 'sluice_audit_sink_next_seq{sink="hook"}')" -ge "$N"

# The dead sink: lag in /metrics, exactly one finding in the log (and in
# the feed, since it is a record like any other).
lag=$(metric 'sluice_audit_sink_lag{sink="dead"}')
check_match "the dead sink's lag is a metric" '^[0-9]+$' "$lag"
check "the dead sink's lag covers the log" test "${lag:-0}" -ge "$N"
nfind() { sqlite3 "file:$DB?mode=ro" "SELECT count(*) FROM records WHERE kind = 5 AND CAST(canon AS TEXT) LIKE '%sink.lag%' AND CAST(canon AS TEXT) LIKE '%\"sink\":\"dead\"%'"; }
wait_for 30 test "$(nfind)" -ge 1
check_eq "one sink.lag finding for the dead sink" 1 "$(nfind)"
check "the finding reached the spool" wait_for 30 grep -q '"finding":"sink.lag"' "$T/spool.ndjson"

# A checkpoint from the SOC copy is an external checkpoint for verify.
python3 - "$T/spool.ndjson" >"$T/feed.ckpt" <<'EOF'
import json, sys
last = None
for l in open(sys.argv[1]):
    v = json.loads(l)
    if 'checkpoint' in v:
        last = v['checkpoint']
sys.stdout.write(last or '')
EOF
check "the feed carried a signed checkpoint" test -s "$T/feed.ckpt"
"$SLUICE" audit verify --db "$DB" --key "$VKEY" --checkpoint "$T/feed.ckpt" >"$T/verify.out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ]; then ok "verify with the feed's checkpoint passes (exit $rc)"; else
	not_ok "verify with the feed's checkpoint passes (exit $rc)"; sed 's/^/#   /' "$T/verify.out" | head
fi

# ---------------------------------------------------- restart, then SIGKILL
kill -TERM "$DPID"
wait_for 30 sh -c "! kill -0 $DPID 2>/dev/null"
check "sluiced stops on SIGTERM" sh -c "! kill -0 $DPID 2>/dev/null"
start_daemon || not_ok "sluiced restarts"
for i in 1 2 3; do sl reload >/dev/null; done
N=$(head_seq)
if wait_for 60 feed_has "$T/spool.ndjson" json "$N"; then
	ok "after a restart the spool resumes from its cursor"
else
	not_ok "after a restart the spool resumes from its cursor"
fi
check "a clean restart repeats nothing" \
	python3 "$T/check.py" json "$T/spool.ndjson" "$ORIGIN" "$N" nodup

for i in 1 2 3 4 5; do sl reload >/dev/null; done
kill -KILL "$DPID"
wait_for 30 sh -c "! kill -0 $DPID 2>/dev/null"
start_daemon || not_ok "sluiced restarts after SIGKILL"
sl reload >/dev/null
N=$(head_seq)
for f in "spool.ndjson json" "hook.ndjson json" "syslog.txt syslog"; do
	set -- $f
	if wait_for 60 feed_has "$T/$1" "$2" "$N"; then
		ok "$1: nothing lost across SIGKILL (duplicates allowed)"
	else
		not_ok "$1: nothing lost across SIGKILL"
		python3 "$T/check.py" "$2" "$T/$1" "$ORIGIN" "$N" | sed 's/^/#   /'
	fi
done
kill -TERM "$DPID"
wait_for 30 sh -c "! kill -0 $DPID 2>/dev/null"
finish
