# tests/e2e/pg.sh: a throwaway PostgreSQL cluster for the fleet scenarios.
# Source it after lib.sh. pg_start makes a cluster in a directory of its own
# under $E2E_TMP (owned by the postgres user, as initdb and the server
# insist), listening on a Unix socket in that directory only
# (listen_addresses = ''), so nothing is reachable over any network, and
# registers its stop and removal with cleanup_push: it goes at exit, also
# when the scenario fails half-way.
#
#   pg_start              initdb, start; sets PG_DIR, PG_SOCK (socket dir),
#                         PG_PORT and the roles' passwords below
#   pg_super SQL...       run SQL as the cluster's superuser (psql, peer auth)
#   pg_as ROLE PASS DB SQL  run SQL as ROLE with password PASS on DB
#   pg_stop / pg_resume   stop the server (fast) / start it again
#   pg_conninfo ROLE DB   a libpq conninfo for ROLE on DB over the socket
#
# Roles, as a fleet is meant to be set up (README "Running a fleet"):
#   sluice_owner  owns the database and the schema (migrations run as it)
#   sluice_host   what every sluiced connects as: INSERT and SELECT on the
#                 witness table, nothing that rewrites it
# Both authenticate with a password (scram-sha-256); only the postgres OS
# user gets in without one (peer), for the test's own set-up.

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
PG_DB=sluice_fleet
PG_OWNER_PASS="owner-$$-pw"
PG_HOST_PASS="host-$$-pw"

_pg_run() { runuser -u postgres -- "$@"; }

# pg_start: 0 when the cluster answers, 1 (with the server's log on stderr)
# otherwise.
pg_start() {
	[ -x "$PG_BIN/initdb" ] || { echo "# no $PG_BIN/initdb" >&2; return 1; }
	id postgres >/dev/null 2>&1 || { echo "# no postgres user" >&2; return 1; }
	PG_DIR=$E2E_TMP/pg
	PG_SOCK=$PG_DIR/sock
	# Any port number will do: with listen_addresses empty it only names
	# the socket file (.s.PGSQL.PORT).
	PG_PORT=5432
	mkdir -p "$PG_SOCK"
	chown postgres:postgres "$PG_DIR" "$PG_SOCK"
	# Traversable for the daemon's roles; the socket itself is 0777.
	chmod 0711 "$PG_DIR"
	chmod 0755 "$PG_SOCK"
	cleanup_push "_pg_run '$PG_BIN/pg_ctl' -D '$PG_DIR/data' -m immediate -w -t 30 stop"
	if ! _pg_run "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres \
	    --auth-local=peer --auth-host=reject -E UTF8 --no-sync \
	    >"$PG_DIR/initdb.log" 2>&1; then
		cat "$PG_DIR/initdb.log" >&2
		return 1
	fi
	cat >>"$PG_DIR/data/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$PG_SOCK'
port = $PG_PORT
fsync = off
password_encryption = 'scram-sha-256'
EOF
	cat >"$PG_DIR/data/pg_hba.conf" <<EOF
local all postgres peer
local all all scram-sha-256
EOF
	pg_resume || return 1
	pg_super "CREATE ROLE sluice_owner LOGIN PASSWORD '$PG_OWNER_PASS';
CREATE ROLE sluice_host LOGIN PASSWORD '$PG_HOST_PASS';
CREATE DATABASE $PG_DB OWNER sluice_owner;
REVOKE ALL ON DATABASE $PG_DB FROM PUBLIC;
GRANT CONNECT ON DATABASE $PG_DB TO sluice_host;" >/dev/null || return 1
	pg_super_db "REVOKE CREATE ON SCHEMA public FROM PUBLIC;
ALTER SCHEMA public OWNER TO sluice_owner;" >/dev/null || return 1
}

pg_resume() {
	if ! _pg_run "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" \
	    -w -t 60 start >/dev/null 2>&1; then
		cat "$PG_DIR/server.log" >&2
		return 1
	fi
}

pg_stop() {
	_pg_run "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w -t 60 stop >/dev/null 2>&1
}

_pg_psql() { _pg_run "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -At -h "$PG_SOCK" -p "$PG_PORT" "$@"; }
# SQL goes in on stdin, so that each statement commits on its own (CREATE
# DATABASE refuses to run inside the one transaction of psql -c).
pg_super() { printf '%s\n' "$*" | _pg_psql -U postgres -d postgres -f -; }
pg_super_db() { printf '%s\n' "$*" | _pg_psql -U postgres -d "$PG_DB" -f -; }

pg_as() {
	printf '%s\n' "$4" | PGPASSWORD=$2 "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 \
	    -At -h "$PG_SOCK" -p "$PG_PORT" -U "$1" -d "$3" -f -
}

pg_conninfo() { echo "host=$PG_SOCK port=$PG_PORT user=$1 dbname=$2"; }
