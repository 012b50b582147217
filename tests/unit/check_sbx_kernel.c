/*
 * check_sbx_kernel: the sandbox manager (gateway/sandbox*.c) against the
 * real kernel and a real state database, with requests in the control API's
 * JSON (ctl_sbx_create) but no HTTP server. main() moves the whole run
 * into a private network and mount namespace with tmpfs on /run/netns and
 * /etc/netns, so the table, links, pins and service address live and die
 * with this process and never touch the machine. What users
 * rely on: a created sandbox is found by its address, id and link, with its
 * labels and token; a duplicate, an unknown policy, a full pool and a kernel
 * refusal each give their error and leave nothing; taint narrows the sandbox
 * in the kernel at once and survives a restart, like the token; deleting
 * leaves no pin, element or lookup.
 *
 * No action without a record: with the audit log closed, a create answers
 * 503 audit_unavailable and leaves nothing; a delete is never refused for
 * the log (it removes the sandbox, and its record, saying the teardown came
 * first, is in the log once it opens again); the records that are written (authorized create with the policy
 * digest, refusals, delete) are read back from the audit database. A
 * reload that changes a policy's CIDR rule replaces the live sandbox's
 * static elements (fw_sandbox_update) and keeps what it learned; a reload
 * that drops the policy keeps the sandbox on its old rules. ns_nsid tells
 * our sandbox namespaces from foreign pins and non-namespaces.
 *
 * A restart that cannot read a recorded sandbox asks again and, if it
 * still cannot, stops with nothing removed; a row a create could not have
 * written is dropped, recorded, its pieces removed. What a failed
 * create's rollback could not remove does not refuse later creates.
 */
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <arpa/inet.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>

#include "gateway/ctl/ctl.h"
#include "gateway/ctl/sandboxes.h"
#include "gateway/ev.h"
#include "gateway/gw.h"
#include "gateway/log.h"
#include "gateway/record.h"
#include "gateway/sandbox.h"
#include "netns/fw.h"
#include "netns/netns.h"
#include "policy/policy.h"

static char		 tdir[64];
static int		 isolated;
static struct ev_loop	*loop;
static struct gw	*gw;
static struct sbx	*m;
static struct rec	*rec;
static char		 sdir[128];	/* the current start()'s directory */

/*
 * ns_exists and ns_delete, failing on demand (the suite links with
 * -Wl,--wrap): the next exists_fail calls of ns_exists cannot tell (as
 * with a passing rtnetlink error or a full fd table), the next
 * delete_fail calls of ns_delete remove nothing and fail.
 */
int	__real_ns_exists(const struct ns_spec *s);
int	__wrap_ns_exists(const struct ns_spec *s);
int	__real_ns_delete(const struct ns_spec *s, char *err, size_t errlen);
int	__wrap_ns_delete(const struct ns_spec *s, char *err, size_t errlen);
static int	exists_fail, exists_calls, delete_fail;

int
__wrap_ns_exists(const struct ns_spec *s)
{
	exists_calls++;
	if (exists_fail > 0) {
		exists_fail--;
		errno = EMFILE;
		return -1;
	}
	return __real_ns_exists(s);
}

int
__wrap_ns_delete(const struct ns_spec *s, char *err, size_t errlen)
{
	if (delete_fail > 0) {
		delete_fail--;
		snprintf(err, errlen, "delete %s: %s", s->host_if,
		    strerror(EBUSY));
		errno = EBUSY;
		return -1;
	}
	return __real_ns_delete(s, err, errlen);
}

static void
write_file(const char *path, const char *text)
{
	FILE *fp;

	ck_assert_ptr_nonnull(fp = fopen(path, "w"));
	fputs(text, fp);
	ck_assert_int_eq(fclose(fp), 0);
}

/* A fresh daemon state in tdir/<name> with `max` sandboxes at most. */
static void
start(const char *name, unsigned max)
{
	struct pol_errors *errs = pol_errors_new(16);
	struct pol_config *cfg;
	struct pol_set *set;
	char dir[128], path[192], text[1024], err[512];

	if (!isolated)
		return;
	snprintf(dir, sizeof(dir), "%s/%s", tdir, name);
	snprintf(sdir, sizeof(sdir), "%s", dir);
	(void)mkdir(dir, 0700);
	snprintf(path, sizeof(path), "%s/pol", dir);
	(void)mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/pol/tp.yaml", dir);
	write_file(path,
	    "version: 1\n"
	    "name: tp\n"
	    "egress:\n"
	    "  allow:\n"
	    "    - cidr: 198.51.100.0/24\n"
	    "      ports: [443]\n"
	    "mcp:\n"
	    "  taint:\n"
	    "    level: internal\n"
	    "    keep:\n"
	    "      - cidr: 192.0.2.10/32\n"
	    "        ports: [80]\n");
	snprintf(text, sizeof(text),
	    "version: 1\n"
	    "state_dir: %s/state\n"
	    "run_dir: %s/run\n"
	    "policy_dir: %s/pol\n"
	    "network:\n"
	    "  treat_as_public: [198.51.100.0/24]\n"
	    "dns:\n"
	    "  upstreams: [192.0.2.53]\n"
	    "sandboxes:\n"
	    "  max: %u\n"
	    /* Not the host's cgroups: these sandboxes need none. */
	    "  cgroup_root: %s\n", dir, dir, dir, max, dir);
	snprintf(path, sizeof(path), "%s/sluice.yaml", dir);
	write_file(path, text);
	ck_assert_ptr_nonnull(errs);
	cfg = pol_config_load(path, errs);
	ck_assert_msg(cfg != NULL, "config: %s", pol_errors_get(errs, 0));
	set = pol_set_load_dir(cfg->policy_dir, cfg, errs);
	ck_assert_msg(set != NULL, "policies: %s", pol_errors_get(errs, 0));
	pol_errors_free(errs);
	ck_assert_ptr_nonnull(loop = ev_new());
	ck_assert_ptr_nonnull(gw = gw_new(cfg, set));
	rec = rec_open(gw_config(gw), loop, err, sizeof(err));
	ck_assert_msg(rec != NULL, "rec_open: %s", err);
	gw_set_rec(gw, rec);
	m = sbx_new(gw, rec, loop, err, sizeof(err));
	ck_assert_msg(m != NULL, "sbx_new: %s", err);
	gw_set_sandboxes(gw, m, NULL);
}

static void
stop(void)
{
	if (gw != NULL)
		gw_set_sandboxes(gw, NULL, NULL);
	sbx_free(m);
	if (gw != NULL)
		gw_set_rec(gw, NULL);
	rec_close(rec);
	rec = NULL;
	gw_free(gw);
	ev_free(loop);
	m = NULL;
	gw = NULL;
	loop = NULL;
}

/* POST /v1/sandboxes with body text; the status, reply in *out. */
static unsigned
create(const char *text, json_t **out)
{
	json_t *body = json_loads(text, 0, NULL);
	unsigned st;

	ck_assert_ptr_nonnull(body);
	st = ctl_sbx_create(m, body, out);
	json_decref(body);
	ck_assert_ptr_nonnull(*out);
	return st;
}

static int
pin_exists(const char *id)
{
	char path[128];

	snprintf(path, sizeof(path), "/run/netns/sluice-%s", id);
	return access(path, F_OK) == 0;
}

static int
count_pins(void)
{
	char **pins = NULL, **links = NULL, err[128];
	size_t np = 0;

	ck_assert_int_eq(ns_list(NULL, &pins, &np, &links, NULL, err,
	    sizeof(err)), 0);
	ns_names_free(pins);
	ns_names_free(links);
	return (int)np;
}

static char	*records_of(int kind, const char *id);
static int	 count_substr(const char *h, const char *n);

START_TEST(test_lifecycle)
{
	struct sbx_view v;
	struct in_addr a;
	json_t *r;
	char id[40], token[80], ifname[16], err[256], text[256], c;

	if (!isolated)
		return;
	start("life", 8);
	snprintf(id, sizeof(id), "k%ld-a", (long)getpid());
	snprintf(text, sizeof(text), "{\"id\":\"%s\",\"policy\":\"tp\","
	    "\"subject\":\"alice\",\"labels\":{\"env\":\"dev\","
	    "\"team\":\"core\"},\"ttl\":\"1h\"}", id);
	ck_assert_uint_eq(create(text, &r), 201);
	ck_assert_str_eq(json_string_value(json_object_get(r, "id")), id);
	snprintf(token, sizeof(token), "%s",
	    json_string_value(json_object_get(r, "token")));
	ck_assert_uint_eq(strlen(token), 64);
	ck_assert_int_eq(inet_pton(AF_INET, json_string_value(
	    json_object_get(r, "address")), &a), 1);
	ck_assert_ptr_nonnull(json_string_value(json_object_get(r,
	    "expires_at")));
	json_decref(r);
	ck_assert(pin_exists(id));
	ck_assert_uint_eq(sbx_count(m), 1);

	/* Found by address (O(1) through the slot), by id and by link. */
	ck_assert_int_eq(sbx_lookup_addr4(m, (uint8_t *)&a, &v), 0);
	ck_assert_str_eq(v.id, id);
	ck_assert_str_eq(v.subject, "alice");
	ck_assert_str_eq(v.policy, "tp");
	ck_assert_uint_eq(v.nlabels, 2);
	ck_assert_str_eq(v.label_keys[0], "env");
	ck_assert_str_eq(v.label_values[0], "dev");
	ck_assert(!v.tainted);
	ck_assert_int_gt(v.expires, 0);
	snprintf(ifname, sizeof(ifname), "%s", v.ifname);
	ck_assert_int_eq(sbx_lookup_id(m, id, &v), 0);
	ck_assert_int_eq(sbx_lookup_ifname(m, ifname, &v), 0);
	ck_assert_str_eq(v.id, id);
	/* Neighbours of the address are not the sandbox. */
	a.s_addr = htonl(ntohl(a.s_addr) - 1);
	ck_assert_int_eq(sbx_lookup_addr4(m, (uint8_t *)&a, &v), -1);
	ck_assert_int_eq(errno, ENOENT);
	a.s_addr = htonl(ntohl(a.s_addr) + 5);
	ck_assert_int_eq(sbx_lookup_addr4(m, (uint8_t *)&a, &v), -1);
	ck_assert_int_eq(sbx_lookup_id(m, "nope", &v), -1);
	ck_assert_int_eq(sbx_lookup_ifname(m, "sl-99", &v), -1);
	ck_assert_int_eq(sbx_lookup_ifname(m, "sl-0x", &v), -1);
	ck_assert_int_eq(sbx_lookup_ifname(m, "eth0", &v), -1);

	ck_assert(sbx_token_ok(m, id, token));
	c = token[63];
	token[63] = c == 'a' ? 'b' : 'a';
	ck_assert(!sbx_token_ok(m, id, token));
	token[63] = c;
	token[63] = '\0';
	ck_assert(!sbx_token_ok(m, id, token));
	token[63] = c;
	ck_assert(!sbx_token_ok(m, id, NULL));
	ck_assert(!sbx_token_ok(m, id, ""));
	ck_assert(!sbx_token_ok(m, "nope", token));

	/* The sandbox's static allow is in the kernel, nothing restricted.
	 * treat_as_public made 198.51.100.0/24 public for the kernel too, so
	 * the allow is an ordinary one, not an exception to the private
	 * ranges. */
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "allow4", ifname, err,
	    sizeof(err)), 1);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "pallow4", ifname, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "restricted", ifname, err,
	    sizeof(err)), 0);

	/* A duplicate and an unknown policy: refused, nothing made. */
	ck_assert_uint_eq(create(text, &r), 409);
	ck_assert_str_eq(json_string_value(json_object_get(r, "error")),
	    "exists");
	json_decref(r);
	ck_assert_uint_eq(create("{\"policy\":\"nope\",\"subject\":\"a\"}",
	    &r), 422);
	json_decref(r);
	/* An unknown member whose name the message cuts inside a UTF-8
	 * character is still a 400 with a readable message, not a 500. */
	{
		char big[200];
		size_t k = 0;
		int j;

		k += (size_t)snprintf(big, sizeof(big), "{\"a");
		for (j = 0; j < 32; j++)
			k += (size_t)snprintf(big + k, sizeof(big) - k,
			    "\xc3\xa9");
		snprintf(big + k, sizeof(big) - k, "\":1}");
		ck_assert_uint_eq(create(big, &r), 400);
		ck_assert_str_eq(json_string_value(json_object_get(r,
		    "error")), "bad_request");
		ck_assert_ptr_nonnull(strstr(json_string_value(
		    json_object_get(r, "message")), "unknown member"));
		json_decref(r);
	}
	ck_assert_uint_eq(sbx_count(m), 1);
	ck_assert_int_eq(count_pins(), 1);

	/* Taint: narrowed in the kernel at once, idempotent. The keep rule
	 * (192.0.2.10/32, a documentation address, private here) opens
	 * that private address: role pkeep4. */
	ck_assert_int_eq(sbx_taint(m, id, err, sizeof(err)), 0);
	ck_assert_int_eq(sbx_taint(m, id, err, sizeof(err)), 0);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "restricted", ifname, err,
	    sizeof(err)), 1);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "pkeep4", ifname, err,
	    sizeof(err)), 1);
	ck_assert_int_eq(sbx_lookup_id(m, id, &v), 0);
	ck_assert(v.tainted);
	ck_assert_int_eq(sbx_taint(m, "nope", err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);

	/* A restart adopts it: same token, still tainted, still narrowed. */
	sbx_free(m);
	m = sbx_new(gw, rec, loop, err, sizeof(err));
	ck_assert_msg(m != NULL, "restart: %s", err);
	ck_assert_uint_eq(sbx_count(m), 1);
	ck_assert(sbx_token_ok(m, id, token));
	ck_assert_int_eq(sbx_lookup_id(m, id, &v), 0);
	ck_assert(v.tainted);
	ck_assert_str_eq(v.label_values[1], "core");
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "restricted", ifname, err,
	    sizeof(err)), 1);

	/* Delete leaves nothing. */
	ck_assert_int_eq(sbx_delete(m, id, err, sizeof(err)), 0);
	ck_assert(!pin_exists(id));
	ck_assert_int_eq(sbx_lookup_id(m, id, &v), -1);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "sbx4", ifname, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "allow4", ifname, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "restricted", ifname, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "pkeep4", ifname, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(sbx_delete(m, id, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_uint_eq(sbx_count(m), 0);
	stop();
}
END_TEST

/* Holds the state database locked (another connection inside an
 * exclusive transaction) so that the daemon's writes fail after their
 * busy timeout, as with an operator's sqlite3 shell or a backup. */
static sqlite3 *
state_lock(void)
{
	sqlite3 *db;
	char path[192];

	snprintf(path, sizeof(path), "%s/state/state.db", sdir);
	ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE,
	    NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "BEGIN EXCLUSIVE", NULL, NULL,
	    NULL), SQLITE_OK);
	return db;
}

static void
state_unlock(sqlite3 *db)
{
	ck_assert_int_eq(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(db);
}

/* The state database refusing a write: a delete that could not remove its
 * row must not block the slot for every later create, and a taint that
 * could not be saved is not reported done (the kernel stays narrowed; the
 * next try saves it), so a restart cannot hand the full egress back. */
START_TEST(test_state_db_locked)
{
	struct sbx_view v;
	sqlite3 *lk;
	json_t *r;
	char a[40], b[40], err[256], text[160];

	if (!isolated)
		return;
	start("locked", 2);
	snprintf(a, sizeof(a), "k%ld-la", (long)getpid());
	snprintf(b, sizeof(b), "k%ld-lb", (long)getpid());
	snprintf(text, sizeof(text), "{\"id\":\"%s\",\"policy\":\"tp\","
	    "\"subject\":\"a\"}", a);
	ck_assert_uint_eq(create(text, &r), 201);
	json_decref(r);

	/* Taint with the row locked: refused, not marked; then saved. */
	lk = state_lock();
	ck_assert_int_eq(sbx_taint(m, a, err, sizeof(err)), -1);
	state_unlock(lk);
	ck_assert_int_eq(sbx_lookup_id(m, a, &v), 0);
	ck_assert(!v.tainted);
	ck_assert_int_eq(sbx_taint(m, a, err, sizeof(err)), 0);
	ck_assert_int_eq(sbx_lookup_id(m, a, &v), 0);
	ck_assert(v.tainted);
	sbx_free(m);
	m = sbx_new(gw, rec, loop, err, sizeof(err));
	ck_assert_msg(m != NULL, "restart: %s", err);
	ck_assert_int_eq(sbx_lookup_id(m, a, &v), 0);
	ck_assert(v.tainted);

	/* Delete with the row locked: the sandbox goes, its row stays. */
	lk = state_lock();
	ck_assert_int_eq(sbx_delete(m, a, err, sizeof(err)), 0);
	state_unlock(lk);
	ck_assert_uint_eq(sbx_count(m), 0);
	/* The next create draws the same slot and still succeeds. */
	snprintf(text, sizeof(text), "{\"id\":\"%s\",\"policy\":\"tp\","
	    "\"subject\":\"a\"}", b);
	ck_assert_uint_eq(create(text, &r), 201);
	json_decref(r);
	/* A restart sees only the live one. */
	sbx_free(m);
	m = sbx_new(gw, rec, loop, err, sizeof(err));
	ck_assert_msg(m != NULL, "restart: %s", err);
	ck_assert_uint_eq(sbx_count(m), 1);
	ck_assert_int_eq(sbx_lookup_id(m, b, &v), 0);
	ck_assert_int_eq(sbx_lookup_id(m, a, &v), -1);
	ck_assert_int_eq(sbx_delete(m, b, err, sizeof(err)), 0);
	stop();
}
END_TEST

START_TEST(test_exhausted)
{
	json_t *r;
	int i;

	if (!isolated)
		return;
	start("full", 2);
	for (i = 0; i < 2; i++) {
		ck_assert_uint_eq(create("{\"policy\":\"tp\",\"subject\":\"a\"}",
		    &r), 201);
		json_decref(r);
	}
	ck_assert_uint_eq(create("{\"policy\":\"tp\",\"subject\":\"a\"}", &r),
	    503);
	ck_assert_str_eq(json_string_value(json_object_get(r, "error")),
	    "pool_exhausted");
	json_decref(r);
	ck_assert_uint_eq(sbx_count(m), 2);
	ck_assert_int_eq(count_pins(), 2);
	stop();
}
END_TEST

START_TEST(test_kernel_refuses)
{
	json_t *r;
	char id[40], text[256], *recs;

	if (!isolated)
		return;
	start("refuse", 4);
	/* A link already holds the name the next sandbox's veth needs: the
	 * kernel refuses, the answer says why, and nothing is left. */
	ck_assert_int_eq(system("ip link add sl-0 type veth peer name "
	    "sbxpeer0"), 0);
	snprintf(id, sizeof(id), "k%ld-r", (long)getpid());
	snprintf(text, sizeof(text), "{\"id\":\"%s\",\"policy\":\"tp\","
	    "\"subject\":\"a\"}", id);
	ck_assert_uint_ge(create(text, &r), 400);
	ck_assert_ptr_nonnull(json_string_value(json_object_get(r,
	    "message")));
	ck_assert_msg(strstr(json_string_value(json_object_get(r, "message")),
	    "sl-0") != NULL, "message: %s",
	    json_string_value(json_object_get(r, "message")));
	json_decref(r);
	ck_assert(!pin_exists(id));
	ck_assert_uint_eq(sbx_count(m), 0);
	/* The log says it was authorized, then that it failed (durably,
	 * both), so no reader takes it for a sandbox that existed. */
	recs = records_of(7, id);
	ck_assert_int_eq(count_substr(recs, "\"kind\":\"sandbox.create\""), 2);
	ck_assert_ptr_nonnull(strstr(recs, "\"result\":\"authorized\""));
	ck_assert_ptr_nonnull(strstr(recs, "\"result\":\"failed\""));
	ck_assert(strstr(recs, "\"result\":\"authorized\"") <
	    strstr(recs, "\"result\":\"failed\""));
	ck_assert_ptr_nonnull(strstr(recs, "sl-0"));
	free(recs);
	ck_assert_int_eq(system("ip link del sl-0"), 0);
	/* And the same request works once the kernel agrees. */
	ck_assert_uint_eq(create(text, &r), 201);
	json_decref(r);
	ck_assert(pin_exists(id));
	stop();
}
END_TEST

/* The canonical text of every record of kind (the store's code) about
 * sandbox id, in seq order, joined by newlines; caller frees. */
static char *
records_of(int kind, const char *id)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	char path[192], *out;
	size_t len = 0;

	snprintf(path, sizeof(path), "%s/state/audit.db", sdir);
	ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY,
	    NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT canon FROM records "
	    "WHERE kind = ?1 AND sandbox = ?2 ORDER BY seq", -1, &st, NULL),
	    SQLITE_OK);
	sqlite3_bind_int(st, 1, kind);
	sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
	ck_assert_ptr_nonnull(out = calloc(1, 1));
	while (sqlite3_step(st) == SQLITE_ROW) {
		size_t n = (size_t)sqlite3_column_bytes(st, 0);

		char *grown = realloc(out, len + n + 2);

		ck_assert_ptr_nonnull(grown);
		out = grown;
		memcpy(out + len, sqlite3_column_blob(st, 0), n);
		len += n;
		out[len++] = '\n';
		out[len] = '\0';
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return out;
}

/* records_of once everything submitted is in the log: the recorder is
 * closed (which writes what it holds) and opened again. */
static char *
logged(int kind, const char *id)
{
	char err[256], *out;

	rec_suspend(rec);
	out = records_of(kind, id);
	ck_assert_msg(rec_reopen(rec, err, sizeof(err)) == 0, "rec_reopen: %s",
	    err);
	return out;
}

static int
count_substr(const char *h, const char *n)
{
	int c = 0;

	while ((h = strstr(h, n)) != NULL) {
		c++;
		h += strlen(n);
	}
	return c;
}

START_TEST(test_audit_down)
{
	struct sbx_view v;
	json_t *r;
	char id[40], id2[40], text[256], err[256], ifname[16], *recs;

	if (!isolated)
		return;
	start("audit", 8);
	snprintf(id, sizeof(id), "k%ld-live", (long)getpid());
	snprintf(id2, sizeof(id2), "k%ld-nolog", (long)getpid());
	snprintf(text, sizeof(text), "{\"id\":\"%s\",\"policy\":\"tp\","
	    "\"subject\":\"alice\"}", id);
	ck_assert_uint_eq(create(text, &r), 201);
	json_decref(r);
	ck_assert_int_eq(sbx_lookup_id(m, id, &v), 0);
	snprintf(ifname, sizeof(ifname), "%s", v.ifname);
	/* The authorized create is in the log, with the policy's digest. */
	recs = records_of(7, id);
	ck_assert_int_eq(count_substr(recs, "\"kind\":\"sandbox.create\""), 1);
	ck_assert_ptr_nonnull(strstr(recs, "\"decision\":\"allow\""));
	ck_assert_ptr_nonnull(strstr(recs, "\"result\":\"authorized\""));
	ck_assert_ptr_nonnull(strstr(recs, "\"sha256\":\""));
	ck_assert_ptr_nonnull(strstr(recs, "\"subject\":\"alice\""));
	free(recs);

	/* The log goes away: nothing may happen without a record. */
	rec_suspend(rec);
	snprintf(text, sizeof(text), "{\"id\":\"%s\",\"policy\":\"tp\","
	    "\"subject\":\"bob\"}", id2);
	ck_assert_uint_eq(create(text, &r), 503);
	ck_assert_str_eq(json_string_value(json_object_get(r, "error")),
	    "audit_unavailable");
	json_decref(r);
	ck_assert(!pin_exists(id2));
	ck_assert_int_eq(sbx_lookup_id(m, id2, &v), -1);
	ck_assert_uint_eq(sbx_count(m), 1);
	ck_assert_int_eq(count_pins(), 1);
	/* Slot 1 would have been the new one's: nothing in the table. */
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "sbx4", "sl-1", err,
	    sizeof(err)), 0);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "allow4", "sl-1", err,
	    sizeof(err)), 0);
	/* A delete goes ahead all the same: a log that cannot write
	 * must never keep a sandbox alive. Nothing of it is left. */
	ck_assert_int_eq(sbx_delete(m, id, err, sizeof(err)), 0);
	ck_assert(!pin_exists(id));
	ck_assert_int_eq(sbx_lookup_id(m, id, &v), -1);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "sbx4", ifname, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "allow4", ifname, err,
	    sizeof(err)), 0);

	/* Back: the held sandbox.delete goes in, saying the teardown came
	 * first; the refusals of bad requests are recorded too. */
	ck_assert_msg(rec_reopen(rec, err, sizeof(err)) == 0, "rec_reopen: %s",
	    err);
	snprintf(text, sizeof(text), "{\"id\":\"%s\",\"policy\":\"nope\","
	    "\"subject\":\"bob\"}", id2);
	ck_assert_uint_eq(create(text, &r), 422);
	json_decref(r);
	/* One the control API refuses for its body, before the manager is
	 * asked: recorded as well, with the status it was given. */
	snprintf(text, sizeof(text), "{\"id\":\"%s\",\"policy\":\"tp\","
	    "\"subject\":\"bob\",\"ttl\":\"0\"}", id2);
	ck_assert_uint_eq(create(text, &r), 400);
	json_decref(r);
	rec_suspend(rec);	/* flushes the async refusals */
	recs = records_of(7, id);
	ck_assert_int_eq(count_substr(recs, "\"kind\":\"sandbox.delete\""), 1);
	ck_assert_ptr_nonnull(strstr(recs, "\"result\":\"done\""));
	ck_assert_ptr_nonnull(strstr(recs, "recorded after the teardown"));
	ck_assert_int_eq(count_substr(recs, "\"kind\":\"sandbox.create\""), 1);
	free(recs);
	recs = records_of(7, id2);
	/* Only the refusals: the 503 attempt was never authorized, and its
	 * own refusal could not be written with the log down. */
	ck_assert_int_eq(count_substr(recs, "\"kind\":\"sandbox.create\""), 2);
	ck_assert_int_eq(count_substr(recs, "\"decision\":\"deny\""), 2);
	ck_assert_ptr_nonnull(strstr(recs, "\"reason\":\"unknown_policy\""));
	ck_assert_ptr_nonnull(strstr(recs, "\"reason\":\"bad_request\""));
	ck_assert_ptr_nonnull(strstr(recs, "\"status\":400"));
	ck_assert_ptr_null(strstr(recs, "\"decision\":\"allow\""));
	free(recs);
	ck_assert_int_eq(rec_reopen(rec, err, sizeof(err)), 0);
	stop();
}
END_TEST

/*
 * Whether any sandbox has element needle ("198.51.100.0/24 . tcp . 443")
 * in what the fw module calls set "allow4" or "pallow4", as `nft list`
 * prints it: since the per-sandbox sets these are roles (0x00000001, 0x00000003) in
 * each sandbox's own set s_<ifname>, IPv4 addresses in their mapped form
 * ("::ffff:198.51.100.0/120").
 */
static int
nft_has(const char *set, const char *needle)
{
	static char buf[1 << 16];
	char cmd[160], want[160], addr[64];
	const char *rest;
	unsigned role, prefix = 32;
	size_t n;
	FILE *fp;

	if (strcmp(set, "allow4") == 0)
		role = 1;
	else if (strcmp(set, "pallow4") == 0)
		role = 3;
	else
		ck_abort_msg("nft_has: unknown set %s", set);
	ck_assert_ptr_nonnull(rest = strchr(needle, ' '));
	ck_assert_uint_lt((size_t)(rest - needle), sizeof(addr));
	snprintf(addr, sizeof(addr), "%.*s", (int)(rest - needle), needle);
	if (strchr(addr, '/') != NULL) {
		prefix = (unsigned)atoi(strchr(addr, '/') + 1);
		*strchr(addr, '/') = '\0';
	}
	if (prefix == 32)
		snprintf(want, sizeof(want), "0x%08x . ::ffff:%s%s", role,
		    addr, rest);
	else
		snprintf(want, sizeof(want), "0x%08x . ::ffff:%s/%u%s", role,
		    addr, prefix + 96, rest);
	snprintf(cmd, sizeof(cmd), "nft list table inet sluice 2>&1");
	ck_assert_ptr_nonnull(fp = popen(cmd, "r"));
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	buf[n] = '\0';
	pclose(fp);
	if (strstr(buf, want) == NULL) {
		fprintf(stderr, "no '%s' in the table\n", want);
		return 0;
	}
	return 1;
}

/* The policy tp after test_reload_reapplies changes its CIDR rule. */
static const char tp_narrow[] =
    "version: 1\n"
    "name: tp\n"
    "egress:\n"
    "  allow:\n"
    "    - cidr: 198.51.100.128/25\n"
    "      ports: [8443]\n"
    "    - host: kept.example.test\n"
    "      ports: [443]\n"
    "  deny:\n"
    "    - cidr: 198.51.100.192/26\n";

START_TEST(test_reload_reapplies)
{
	struct sbx_view v;
	struct fw_elem e;
	json_t *r;
	char id[40], text[256], err[256], path[192], *recs;

	if (!isolated)
		return;
	start("reload", 8);
	snprintf(id, sizeof(id), "k%ld-rl", (long)getpid());
	snprintf(text, sizeof(text), "{\"id\":\"%s\",\"policy\":\"tp\","
	    "\"subject\":\"alice\"}", id);
	ck_assert_uint_eq(create(text, &r), 201);
	json_decref(r);
	ck_assert_int_eq(sbx_lookup_id(m, id, &v), 0);
	ck_assert(nft_has("allow4", "198.51.100.0/24 . tcp . 443"));
	/* Something learned for a name the new policy still allows, which
	 * a re-application must keep, and something for a name it no
	 * longer allows (nor any: tp has no host rule yet), which goes. */
	memset(&e, 0, sizeof(e));
	snprintf(e.ifname, sizeof(e.ifname), "%s", v.ifname);
	e.family = AF_INET;
	ck_assert_int_eq(inet_pton(AF_INET, "192.0.2.77", e.addr), 1);
	e.proto = IPPROTO_TCP;
	e.port_lo = e.port_hi = 443;
	e.timeout_ms = 600000;
	e.name = "kept.example.test";
	ck_assert_int_eq(fw_learn(sbx_fw(m), &e, 1, err, sizeof(err)), 0);
	ck_assert_int_eq(inet_pton(AF_INET, "192.0.2.78", e.addr), 1);
	e.name = "gone.example.test";
	ck_assert_int_eq(fw_learn(sbx_fw(m), &e, 1, err, sizeof(err)), 0);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "learned4", v.ifname,
	    err, sizeof(err)), 2);

	/* The CIDR rule changes: the live sandbox follows at reload. */
	snprintf(path, sizeof(path), "%s/pol/tp.yaml", sdir);
	write_file(path, tp_narrow);
	ck_assert_int_eq(gw_reload(gw, NULL), 0);
	ck_assert(!nft_has("allow4", "198.51.100.0/24 . tcp . 443"));
	ck_assert(nft_has("allow4", "198.51.100.128/25 . tcp . 8443"));
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "allow4", v.ifname, err,
	    sizeof(err)), 1);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "sbx_deny4", v.ifname,
	    err, sizeof(err)), 1);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "learned4", v.ifname,
	    err, sizeof(err)), 1);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "sbx4", v.ifname, err,
	    sizeof(err)), 1);
	/* The same file again changes nothing. */
	ck_assert_int_eq(gw_reload(gw, NULL), 0);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "allow4", v.ifname, err,
	    sizeof(err)), 1);
	ck_assert_uint_eq(gw_not_updated(gw), 0);
	/* Rules the kernel refuses (a nested CIDR whose ports overlap the
	 * outer rule's only in part): the set is in force, the sandbox
	 * stays on its old rules, and the reload says so. */
	write_file(path,
	    "version: 1\n"
	    "name: tp\n"
	    "egress:\n"
	    "  allow:\n"
	    "    - cidr: 198.51.100.0/24\n"
	    "      ports: [\"400-500\"]\n"
	    "    - cidr: 198.51.100.128/25\n"
	    "      ports: [\"450-600\"]\n");
	ck_assert_int_eq(gw_reload(gw, NULL), 0);
	ck_assert_uint_eq(gw_not_updated(gw), 1);
	ck_assert(nft_has("allow4", "198.51.100.128/25 . tcp . 8443"));
	/* Back to the good file: updated again, nothing left behind. */
	write_file(path, tp_narrow);
	ck_assert_int_eq(gw_reload(gw, NULL), 0);
	ck_assert_uint_eq(gw_not_updated(gw), 0);

	/* The policy goes: the sandbox keeps the rules it runs under, and
	 * a new sandbox of that policy is refused. */
	ck_assert_int_eq(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/pol/other.yaml", sdir);
	write_file(path, "version: 1\nname: other\n");
	ck_assert_int_eq(gw_reload(gw, NULL), 0);
	ck_assert(nft_has("allow4", "198.51.100.128/25 . tcp . 8443"));
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "sbx_deny4", v.ifname,
	    err, sizeof(err)), 1);
	ck_assert_uint_eq(create("{\"policy\":\"tp\",\"subject\":\"a\"}", &r),
	    422);
	json_decref(r);
	/* Taint still narrows it by its (old) policy. */
	ck_assert_int_eq(sbx_taint(m, id, err, sizeof(err)), 0);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "restricted", v.ifname,
	    err, sizeof(err)), 1);

	recs = logged(5, id);
	/* The update, and the attempt the kernel refused (recorded before
	 * it was tried, then its failure). */
	ck_assert_int_eq(count_substr(recs, "sandbox.policy_update"), 2);
	ck_assert_int_eq(count_substr(recs, "sandbox.reapply_failed"), 1);
	ck_assert_int_eq(count_substr(recs, "sandbox.policy_removed"), 1);
	free(recs);
	ck_assert_int_eq(sbx_delete(m, id, err, sizeof(err)), 0);
	stop();
}
END_TEST

START_TEST(test_fw_update_bad)
{
	struct fw_sandbox sb;
	struct fw_rule rule;
	json_t *r;
	char err[256];

	if (!isolated)
		return;
	start("fwupd", 4);
	ck_assert_uint_eq(create("{\"policy\":\"tp\",\"subject\":\"a\"}", &r),
	    201);
	json_decref(r);
	memset(&rule, 0, sizeof(rule));
	rule.family = AF_INET;
	ck_assert_int_eq(inet_pton(AF_INET, "192.0.2.0", rule.addr), 1);
	rule.prefix = 24;
	rule.proto = IPPROTO_TCP;
	rule.port_lo = rule.port_hi = 80;
	memset(&sb, 0, sizeof(sb));
	/* Not registered: refused, nothing added for it. */
	snprintf(sb.ifname, sizeof(sb.ifname), "sl-77");
	ck_assert_int_eq(fw_sandbox_update(sbx_fw(m), &sb, &rule, 1, NULL, 0,
	    err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "allow4", "sl-77", err,
	    sizeof(err)), 0);
	/* Bad names and rules: refused, the old statics stay. */
	snprintf(sb.ifname, sizeof(sb.ifname), "eth0");
	ck_assert_int_eq(fw_sandbox_update(sbx_fw(m), &sb, &rule, 1, NULL, 0,
	    err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	snprintf(sb.ifname, sizeof(sb.ifname), "sl-0");
	rule.prefix = 33;
	ck_assert_int_eq(fw_sandbox_update(sbx_fw(m), &sb, &rule, 1, NULL, 0,
	    err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	rule.prefix = 24;
	rule.proto = IPPROTO_GRE;
	ck_assert_int_eq(fw_sandbox_update(sbx_fw(m), &sb, &rule, 1, NULL, 0,
	    err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert(nft_has("allow4", "198.51.100.0/24 . tcp . 443"));
	/* A quota appears, then an update keeps the object, then it goes. */
	rule.proto = IPPROTO_TCP;
	sb.quota_bytes = 1000000;
	ck_assert_int_eq(fw_sandbox_update(sbx_fw(m), &sb, &rule, 1, NULL, 0,
	    err, sizeof(err)), 0);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "quota", "sl-0", err,
	    sizeof(err)), 1);
	ck_assert(!nft_has("allow4", "198.51.100.0/24 . tcp . 443"));
	/* 192.0.2.0/24 is private here: an exception in @pallow4. */
	ck_assert(nft_has("pallow4", "192.0.2.0/24 . tcp . 80"));
	sb.quota_bytes = 2000000;
	ck_assert_int_eq(fw_sandbox_update(sbx_fw(m), &sb, &rule, 1, NULL, 0,
	    err, sizeof(err)), 0);
	ck_assert_int_eq(system("nft list quota inet sluice q_sl-0 | "
	    "grep -q 2000000"), 0);
	/* The same element deleted and added in one batch is still there. */
	ck_assert(nft_has("pallow4", "192.0.2.0/24 . tcp . 80"));
	sb.quota_bytes = 0;
	ck_assert_int_eq(fw_sandbox_update(sbx_fw(m), &sb, NULL, 0, NULL, 0,
	    err, sizeof(err)), 0);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "quota", "sl-0", err,
	    sizeof(err)), 0);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "allow4", "sl-0", err,
	    sizeof(err)), 0);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "pallow4", "sl-0", err,
	    sizeof(err)), 0);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "sbx4", "sl-0", err,
	    sizeof(err)), 1);
	stop();
}
END_TEST

START_TEST(test_nsid)
{
	struct sbx_view v;
	json_t *r;
	char path[128], err[256];
	int id = -5;

	if (!isolated)
		return;
	start("nsid", 4);
	ck_assert_uint_eq(create("{\"id\":\"nsid-a\",\"policy\":\"tp\","
	    "\"subject\":\"a\"}", &r), 201);
	json_decref(r);
	ck_assert_int_eq(sbx_lookup_id(m, "nsid-a", &v), 0);
	/* Ours: joined by the veth, so it has an id here. */
	ck_assert_int_eq(ns_nsid("/run/netns/sluice-nsid-a", &id, err,
	    sizeof(err)), 0);
	ck_assert_int_ge(id, 0);
	/* A namespace never linked to ours: no id. */
	ck_assert_int_eq(system("ip netns add sluice-foreign"), 0);
	ck_assert_int_eq(ns_nsid("/run/netns/sluice-foreign", &id, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(id, -1);
	ck_assert_int_eq(system("ip netns del sluice-foreign"), 0);
	/* Not a namespace, a symlink, nothing, NULL. */
	snprintf(path, sizeof(path), "%s/plain", tdir);
	write_file(path, "x");
	ck_assert_int_eq(ns_nsid(path, &id, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(symlink("/run/netns/sluice-nsid-a",
	    "/run/netns/sluice-link"), 0);
	ck_assert_int_eq(ns_nsid("/run/netns/sluice-link", &id, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(errno, ELOOP);
	ck_assert_int_eq(unlink("/run/netns/sluice-link"), 0);
	ck_assert_int_eq(ns_nsid("/run/netns/sluice-none", &id, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(ns_nsid(NULL, &id, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	stop();
}
END_TEST

/* A taint whose audit record could not be committed is reported failed
 * (the bridge withholds what tainted); the next taint must still write
 * that record, not answer "already tainted" and leave the log without
 * any sandbox.taint for a sandbox whose egress was narrowed. */
START_TEST(test_taint_record_retried)
{
	struct sbx_view v;
	json_t *r;
	char id[40], text[160], err[256], *recs;

	if (!isolated)
		return;
	start("taintrec", 4);
	snprintf(id, sizeof(id), "k%ld-tr", (long)getpid());
	snprintf(text, sizeof(text), "{\"id\":\"%s\",\"policy\":\"tp\","
	    "\"subject\":\"a\"}", id);
	ck_assert_uint_eq(create(text, &r), 201);
	json_decref(r);
	rec_suspend(rec);
	ck_assert_int_eq(sbx_taint(m, id, err, sizeof(err)), -1);
	/* Narrowed all the same: the failure is on the safe side. */
	ck_assert_int_eq(sbx_lookup_id(m, id, &v), 0);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "restricted", v.ifname,
	    err, sizeof(err)), 1);
	ck_assert_msg(rec_reopen(rec, err, sizeof(err)) == 0, "rec_reopen: %s",
	    err);
	ck_assert_int_eq(sbx_taint(m, id, err, sizeof(err)), 0);
	recs = logged(5, id);
	ck_assert_int_eq(count_substr(recs, "sandbox.taint"), 1);
	free(recs);
	/* Once recorded, a taint again is a no-op (no second record). */
	ck_assert_int_eq(sbx_taint(m, id, err, sizeof(err)), 0);
	recs = logged(5, id);
	ck_assert_int_eq(count_substr(recs, "sandbox.taint"), 1);
	free(recs);
	stop();
}
END_TEST

/* Labels at every limit sbx_labels_check allows (16 of them, keys of 63
 * and values of 128 characters) make a sandbox, and come back whole from
 * a restart. */
START_TEST(test_labels_at_limits)
{
	struct sbx_view v;
	json_t *body, *labels, *r;
	char key[SBX_LABEL_KEY_MAX + 1], val[SBX_LABEL_VALUE_MAX + 1],
	    err[256];
	int i;

	if (!isolated)
		return;
	start("labels", 4);
	ck_assert_ptr_nonnull(labels = json_object());
	memset(val, 'v', SBX_LABEL_VALUE_MAX);
	val[SBX_LABEL_VALUE_MAX] = '\0';
	for (i = 0; i < SBX_LABELS_MAX; i++) {
		memset(key, 'k', SBX_LABEL_KEY_MAX);
		key[SBX_LABEL_KEY_MAX] = '\0';
		key[0] = (char)('a' + i);
		ck_assert_int_eq(json_object_set_new(labels, key,
		    json_string(val)), 0);
	}
	ck_assert_int_eq(sbx_labels_check(labels, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(body = json_pack("{s:s, s:s, s:s, s:o}", "id",
	    "lab", "policy", "tp", "subject", "a", "labels", labels));
	ck_assert_uint_eq(ctl_sbx_create(m, body, &r), 201);
	json_decref(body);
	json_decref(r);
	sbx_free(m);
	m = sbx_new(gw, rec, loop, err, sizeof(err));
	ck_assert_msg(m != NULL, "restart: %s", err);
	ck_assert_int_eq(sbx_lookup_id(m, "lab", &v), 0);
	ck_assert_uint_eq(v.nlabels, SBX_LABELS_MAX);
	ck_assert_str_eq(v.label_values[SBX_LABELS_MAX - 1], val);
	ck_assert_int_eq(sbx_delete(m, "lab", err, sizeof(err)), 0);
	stop();
}
END_TEST

static char	peer_sock[100];
static pid_t	peer_pid;
static int	peer_status;

/* Runs the loop until the child peer_pid has exited. */
static void
peer_wait(struct ev_loop *l, void *arg)
{
	(void)arg;
	if (waitpid(peer_pid, &peer_status, WNOHANG) == peer_pid) {
		ev_stop(l);
		return;
	}
	ck_assert_ptr_nonnull(ev_timer_add(l, 10, peer_wait, NULL));
}

/* Child: into the sandbox's namespace (as `sluice exec` puts a command),
 * then, when nested is 1, into a namespace of its own made there (as any
 * unprivileged user can: a new user namespace with a network namespace),
 * when it is 2, removes the namespace's name, and one request to the
 * control socket. Exit 0 when refused with 403
 * from_sandbox, 13 when answered, 20 when the namespaces could not be
 * entered. */
static void
peer_child(const char *id, int nested)
{
	static const char req[] = "GET /v1/sandboxes HTTP/1.0\r\nHost: x"
	    "\r\n\r\n";
	struct sockaddr_un sun;
	char path[128], buf[2048];
	size_t len = 0;
	ssize_t n;
	int fd;

	alarm(30);
	snprintf(path, sizeof(path), "/run/netns/sluice-%s", id);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1 ||
	    setns(fd, CLONE_NEWNET) == -1)
		_exit(20);
	close(fd);
	if (nested == 1 && unshare(CLONE_NEWUSER | CLONE_NEWNET) == -1)
		_exit(20);
	/* The namespace's name gone while code still runs in it (an
	 * operator's `ip netns delete`, or code that shares the host's
	 * mounts): it is still the sandbox's. */
	if (nested == 2 && (umount2(path, MNT_DETACH) == -1 ||
	    unlink(path) == -1))
		_exit(20);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", peer_sock);
	if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) == -1 ||
	    connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1)
		_exit(11);
	if (write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1))
		_exit(12);
	while (len < sizeof(buf) - 1 &&
	    (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	close(fd);
	if (strstr(buf, " 403 ") != NULL && strstr(buf, "from_sandbox") !=
	    NULL)
		_exit(0);
	_exit(13);
}

/* The control API refuses code running in a sandbox: in the sandbox's
 * own namespace, in a namespace that code made for itself there (a
 * new user and network namespace needs no privilege), which would
 * otherwise let it approve its own calls or read other tokens, and in
 * the sandbox's namespace after its name was unmounted. */
START_TEST(test_peer_nested_netns)
{
	struct ctl *ctl;
	json_t *r;
	char id[40], text[160], err[256];
	int nested;

	if (!isolated)
		return;
	start("peer", 4);
	snprintf(id, sizeof(id), "k%ld-pn", (long)getpid());
	snprintf(text, sizeof(text), "{\"id\":\"%s\",\"policy\":\"tp\","
	    "\"subject\":\"a\"}", id);
	ck_assert_uint_eq(create(text, &r), 201);
	json_decref(r);
	ck_assert_ptr_nonnull(ctl = ctl_new(loop));
	ck_assert_int_eq(ctl_sbx_routes(ctl, m), 0);
	ck_assert_int_lt(snprintf(peer_sock, sizeof(peer_sock), "%.80s/run/"
	    "ctl.sock", sdir), (int)sizeof(peer_sock));
	ck_assert_msg(ctl_listen(ctl, peer_sock, err, sizeof(err)) == 0,
	    "ctl_listen: %s", err);
	for (nested = 0; nested <= 2; nested++) {
		ck_assert_int_ge(peer_pid = fork(), 0);
		if (peer_pid == 0)
			peer_child(id, nested);
		ck_assert_ptr_nonnull(ev_timer_add(loop, 10, peer_wait,
		    NULL));
		ck_assert_int_eq(ev_run(loop), 0);
		ck_assert_msg(WIFEXITED(peer_status) &&
		    WEXITSTATUS(peer_status) == 0, "nested %d: child status "
		    "%d", nested, peer_status);
	}
	ctl_free(ctl);
	stop();
}
END_TEST

/* The state database's row of id, or 0 rows: 1 if it is there. */
static int
state_has(const char *id)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	char path[192];
	int n;

	snprintf(path, sizeof(path), "%s/state/state.db", sdir);
	ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY,
	    NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT count(*) FROM "
	    "sandboxes WHERE id = ?1", -1, &st, NULL), SQLITE_OK);
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

/* Runs sql on the state database (the daemon not running). */
static void
state_exec(const char *sql)
{
	sqlite3 *db;
	char path[192];

	snprintf(path, sizeof(path), "%s/state/state.db", sdir);
	ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE,
	    NULL), SQLITE_OK);
	ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK,
	    "%s: %s", sql, sqlite3_errmsg(db));
	sqlite3_close(db);
}

/* Creates sandbox id (policy tp, subject a, labels a JSON object or NULL)
 * and keeps its token in token (80 bytes). */
static void
create_kept(const char *id, const char *labels, char *token)
{
	char text[256];
	json_t *r;

	snprintf(text, sizeof(text), "{\"id\":\"%s\",\"policy\":\"tp\","
	    "\"subject\":\"a\"%s%s}", id, labels != NULL ?
	    ",\"labels\":" : "", labels != NULL ? labels : "");
	ck_assert_uint_eq(create(text, &r), 201);
	snprintf(token, 80, "%s",
	    json_string_value(json_object_get(r, "token")));
	json_decref(r);
}

/* A start that stopped left id as it was (namespace and row); the next
 * start adopts it whole, with the same token, into v. */
static void
restart_adopts(const char *id, const char *token, struct sbx_view *v)
{
	char err[512];

	ck_assert(pin_exists(id));
	ck_assert_int_eq(state_has(id), 1);
	m = sbx_new(gw, rec, loop, err, sizeof(err));
	ck_assert_msg(m != NULL, "restart: %s", err);
	ck_assert_int_eq(sbx_lookup_id(m, id, v), 0);
	ck_assert(sbx_token_ok(m, id, token));
}

/* A restart that cannot tell whether a recorded sandbox is whole (its
 * namespace or link cannot be read just then) must not destroy it: a
 * passing error is asked again, and one that lasts stops the start with
 * the sandbox and the cause named, everything left as it was. */
START_TEST(test_reconcile_unreadable)
{
	struct sbx_view v;
	char id[40], token[80], err[512], *recs;

	if (!isolated)
		return;
	start("unread", 4);
	snprintf(id, sizeof(id), "k%ld-ur", (long)getpid());
	create_kept(id, NULL, token);

	/* A passing error: asked again, adopted whole. */
	sbx_free(m);
	exists_fail = 2;
	exists_calls = 0;
	m = sbx_new(gw, rec, loop, err, sizeof(err));
	ck_assert_msg(m != NULL, "restart: %s", err);
	ck_assert_int_eq(exists_calls, 3);
	ck_assert_int_eq(sbx_lookup_id(m, id, &v), 0);
	ck_assert(sbx_token_ok(m, id, token));

	/* An error that lasts: the start stops, naming the sandbox and
	 * the cause; nothing is removed. */
	sbx_free(m);
	exists_fail = 1000;
	exists_calls = 0;
	m = sbx_new(gw, rec, loop, err, sizeof(err));
	ck_assert_ptr_null(m);
	ck_assert_msg(strstr(err, id) != NULL && strstr(err,
	    strerror(EMFILE)) != NULL, "error: %s", err);
	ck_assert_int_gt(exists_calls, 1);
	ck_assert_int_lt(exists_calls, 20);
	exists_fail = 0;

	/* Readable again: the same sandbox, same token, same elements. */
	restart_adopts(id, token, &v);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "allow4", v.ifname, err,
	    sizeof(err)), 1);
	recs = logged(7, id);
	ck_assert_int_eq(count_substr(recs, "\"kind\":\"sandbox.delete\""), 0);
	free(recs);
	ck_assert_int_eq(sbx_delete(m, id, err, sizeof(err)), 0);
	stop();
}
END_TEST

/* A create that fails after its link was made, whose rollback cannot
 * remove it: the link left behind must not refuse every later create
 * that draws the same slot. The next create removes it (recorded) or,
 * while it cannot, takes another slot. */
START_TEST(test_rollback_leftover)
{
	struct sbx_view v;
	sqlite3 *lk;
	json_t *r;
	char a[40], b[40], c[40], text[160], err[256], *recs;

	if (!isolated)
		return;
	start("leftover", 4);
	snprintf(a, sizeof(a), "k%ld-lo-a", (long)getpid());
	snprintf(b, sizeof(b), "k%ld-lo-b", (long)getpid());
	snprintf(c, sizeof(c), "k%ld-lo-c", (long)getpid());
	/* The row cannot be written, and the rollback cannot remove the
	 * namespace and link the create made. */
	lk = state_lock();
	delete_fail = 1;
	snprintf(text, sizeof(text), "{\"id\":\"%s\",\"policy\":\"tp\","
	    "\"subject\":\"a\"}", a);
	ck_assert_uint_eq(create(text, &r), 500);
	json_decref(r);
	state_unlock(lk);
	ck_assert_int_eq(delete_fail, 0);
	ck_assert(pin_exists(a));
	ck_assert_int_eq(sbx_lookup_id(m, a, &v), -1);

	/* Its removal fails once more: the next create takes another
	 * slot. */
	delete_fail = 1;
	snprintf(text, sizeof(text), "{\"id\":\"%s\",\"policy\":\"tp\","
	    "\"subject\":\"a\"}", b);
	ck_assert_uint_eq(create(text, &r), 201);
	json_decref(r);
	ck_assert_int_eq(sbx_lookup_id(m, b, &v), 0);
	ck_assert_str_ne(v.ifname, "sl-0");
	ck_assert(pin_exists(a));
	/* And again, at a create that fails for its own reason (a taken
	 * id): still no slot 0, and no second record of the removal. */
	delete_fail = 1;
	ck_assert_uint_eq(create(text, &r), 409);
	json_decref(r);
	ck_assert_int_eq(delete_fail, 0);
	ck_assert(pin_exists(a));

	/* Then it goes, and its slot serves again. */
	snprintf(text, sizeof(text), "{\"id\":\"%s\",\"policy\":\"tp\","
	    "\"subject\":\"a\"}", c);
	ck_assert_uint_eq(create(text, &r), 201);
	json_decref(r);
	ck_assert(!pin_exists(a));
	ck_assert_int_eq(sbx_lookup_id(m, c, &v), 0);
	ck_assert_str_eq(v.ifname, "sl-0");
	ck_assert_uint_eq(sbx_count(m), 2);

	/* The failed create says what it left; the removal was recorded
	 * once, before its first try, not at each of the three. */
	recs = logged(7, a);
	ck_assert_ptr_nonnull(strstr(recs, "\"result\":\"failed\""));
	ck_assert_ptr_nonnull(strstr(recs, "left behind"));
	free(recs);
	recs = records_of(5, a);
	ck_assert_int_eq(count_substr(recs, "sandbox.orphan"), 1);
	free(recs);
	ck_assert_int_eq(sbx_delete(m, b, err, sizeof(err)), 0);
	ck_assert_int_eq(sbx_delete(m, c, err, sizeof(err)), 0);
	stop();
}
END_TEST

/* jansson's allocator: the next jfail allocations fail. */
static int	jfail;

static void *
jmalloc(size_t n)
{
	if (jfail > 0) {
		jfail--;
		return NULL;
	}
	return malloc(n);
}

/* A restart that runs out of memory while reading a good row (its labels
 * are the first thing parsed) must not take the row for a bad one: the
 * start stops, and the sandbox, its row and its token stay. */
START_TEST(test_reconcile_nomem)
{
	struct sbx_view v;
	char id[40], token[80], err[512], *recs;

	if (!isolated)
		return;
	start("nomem", 4);
	snprintf(id, sizeof(id), "k%ld-nm", (long)getpid());
	create_kept(id, "{\"env\":\"dev\"}", token);

	sbx_free(m);
	json_set_alloc_funcs(jmalloc, free);
	jfail = 1;
	m = sbx_new(gw, rec, loop, err, sizeof(err));
	jfail = 0;
	json_set_alloc_funcs(malloc, free);
	ck_assert_msg(m == NULL, "started: the row was taken for a bad one");
	ck_assert_msg(strstr(err, id) != NULL, "error: %s", err);

	restart_adopts(id, token, &v);
	recs = logged(5, id);
	ck_assert_int_eq(count_substr(recs, "sandbox.invalid_row"), 0);
	free(recs);
	ck_assert_int_eq(sbx_delete(m, id, err, sizeof(err)), 0);
	stop();
}
END_TEST

/* Rows the daemon would never have written (each field that reaches the
 * kernel or the audit log, out of what a create accepts): at restart the
 * row is dropped, recorded, and what it named is removed as an orphan. */
static const struct {
	const char	*name;
	const char	*set;
} bad_rows[] = {
	{ "subject", "subject = 'a b\"'" },
	{ "subject empty", "subject = ''" },
	{ "policy", "policy = '../tp'" },
	{ "policy empty", "policy = ''" },
	{ "token short", "token = 'abc'" },
	{ "token upper", "token = upper(token)" },
	{ "labels", "labels = '{\"Env\":\"x\"}'" },
	{ "labels array", "labels = '[]'" },
	{ "address empty", "address = '', host_address = ''" },
	{ "address other", "address = '10.231.0.6'" },
	{ "slot out of pool", "idx = 100000" },
	{ "expires negative", "expires = -1" },
	{ "expires before created", "expires = created - 10" },
	{ "expires far", "expires = created + 5000000000" },
	{ "created", "created = 0" },
};

START_TEST(test_adopt_invalid_row)
{
	struct sbx_view v;
	json_t *r;
	char id[40], text[256], err[256], sql[256], *recs;

	if (!isolated)
		return;
	snprintf(text, sizeof(text), "badrow%d", _i);
	start(text, 4);
	snprintf(id, sizeof(id), "k%ld-br", (long)getpid());
	snprintf(text, sizeof(text), "{\"id\":\"%s\",\"policy\":\"tp\","
	    "\"subject\":\"a\",\"ttl\":\"1h\"}", id);
	ck_assert_uint_eq(create(text, &r), 201);
	json_decref(r);
	sbx_free(m);
	m = NULL;
	snprintf(sql, sizeof(sql), "UPDATE sandboxes SET %s WHERE id = '%s'",
	    bad_rows[_i].set, id);
	state_exec(sql);
	m = sbx_new(gw, rec, loop, err, sizeof(err));
	ck_assert_msg(m != NULL, "%s: restart: %s", bad_rows[_i].name, err);
	ck_assert_msg(sbx_lookup_id(m, id, &v) == -1, "%s: adopted",
	    bad_rows[_i].name);
	ck_assert_uint_eq(sbx_count(m), 0);
	ck_assert_int_eq(state_has(id), 0);
	ck_assert_msg(!pin_exists(id), "%s: pin stays", bad_rows[_i].name);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "sbx4", NULL, err,
	    sizeof(err)), 0);
	recs = logged(5, id);
	ck_assert_msg(strstr(recs, "sandbox.invalid_row") != NULL,
	    "%s: not recorded: %s", bad_rows[_i].name, recs);
	free(recs);
	stop();
}
END_TEST

/* What the watchers heard, in order: "<tag><event> <id> <tainted>;". */
static char	heard[2048];

/* A watcher's ctx: its tag, and the loop it stops on a removal (the
 * expiry below ends the loop), if any. */
struct ear {
	char		 tag;
	struct ev_loop	*stop;
};

static void
hear(void *ctx, char ev, const struct sbx_view *v)
{
	const struct ear *e = ctx;
	struct sbx_view now;
	size_t n = strlen(heard);
	int in_table = sbx_lookup_id(m, v->id, &now) == 0;

	/* Told after the change: in the table and the kernel (pin) when
	 * added or changed, gone from both when removed. */
	ck_assert_int_eq(in_table, ev != '-');
	ck_assert_int_eq(pin_exists(v->id), ev != '-');
	if (ev == '~')
		ck_assert_int_eq(now.tainted, v->tainted);
	snprintf(heard + n, sizeof(heard) - n, "%c%c %s %d;", e->tag, ev,
	    v->id, v->tainted ? 1 : 0);
	if (ev == '-' && e->stop != NULL)
		ev_stop(e->stop);
}

static void
w_added(void *ctx, const struct sbx_view *v)
{
	hear(ctx, '+', v);
}

static void
w_removed(void *ctx, const struct sbx_view *v)
{
	hear(ctx, '-', v);
}

static void
w_changed(void *ctx, const struct sbx_view *v)
{
	hear(ctx, '~', v);
}

/* sbx_foreach's callback: the ids it is given, in order. */
static void
seed(void *ctx, const struct sbx_view *v)
{
	char *out = ctx;
	size_t n = strlen(out);

	snprintf(out + n, 256 - n, "%s@%u;", v->id, v->index);
}

static void
watch_timeout(struct ev_loop *l, void *arg)
{
	*(int *)arg = 1;
	ev_stop(l);
}

/* A copy of the table elsewhere follows it through the watchers: each
 * change (create, taint, reapply, a policy gone, delete, expiry) is told
 * once, to every watcher in registration order, after it is made; NULL
 * callbacks are skipped; a fifth watcher is refused, one removed is told
 * nothing more; sbx_foreach seeds a copy in slot order. */
START_TEST(test_watchers)
{
	struct ear ea = { 'a', NULL }, eb = { 'b', NULL };
	struct sbx_watch wa = { w_added, w_removed, w_changed, &ea };
	struct sbx_watch wb = { w_added, w_removed, NULL, &eb };
	struct sbx_watch none = { NULL, NULL, NULL, NULL };
	struct sbx_view v;
	json_t *r;
	char a[40], b[40], c[40], text[256], want[1024], seeded[256] = "",
	    err[256], path[192];
	int timed_out = 0;
	struct ev_timer *t;

	if (!isolated)
		return;
	start("watch", 8);
	heard[0] = '\0';
	snprintf(a, sizeof(a), "k%ld-wa", (long)getpid());
	snprintf(b, sizeof(b), "k%ld-wb", (long)getpid());
	snprintf(c, sizeof(c), "k%ld-wc", (long)getpid());
	snprintf(text, sizeof(text), "{\"id\":\"%s\",\"policy\":\"tp\","
	    "\"subject\":\"a\"}", a);
	ck_assert_uint_eq(create(text, &r), 201);
	json_decref(r);
	/* Registered after a exists: a copy seeds itself. */
	ck_assert_int_eq(sbx_watch_add(m, &wa), 0);
	ck_assert_int_eq(sbx_watch_add(m, &none), 0);
	ck_assert_int_eq(sbx_watch_add(m, &wb), 0);
	ck_assert_int_eq(sbx_watch_add(m, &none), 0);
	errno = 0;
	ck_assert_int_eq(sbx_watch_add(m, &wa), -1);
	ck_assert_int_eq(errno, ENOSPC);
	ck_assert_str_eq(heard, "");
	snprintf(text, sizeof(text), "{\"id\":\"%s\",\"policy\":\"tp\","
	    "\"subject\":\"a\"}", b);
	ck_assert_uint_eq(create(text, &r), 201);
	json_decref(r);
	sbx_foreach(m, seed, seeded);
	snprintf(want, sizeof(want), "%s@0;%s@1;", a, b);
	ck_assert_str_eq(seeded, want);
	/* A refused create changes nothing. */
	ck_assert_uint_eq(create(text, &r), 409);
	json_decref(r);
	ck_assert_int_eq(sbx_taint(m, a, err, sizeof(err)), 0);
	/* Tainted already: no change, nothing told. */
	ck_assert_int_eq(sbx_taint(m, a, err, sizeof(err)), 0);
	snprintf(want, sizeof(want), "a+ %s 0;b+ %s 0;a~ %s 1;", b, b, a);
	ck_assert_str_eq(heard, want);

	/* A reload that changes the policy's rules changes both sandboxes;
	 * the same file again changes neither; the policy gone changes
	 * each once, however many reloads follow. */
	heard[0] = '\0';
	snprintf(path, sizeof(path), "%s/pol/tp.yaml", sdir);
	write_file(path, tp_narrow);
	ck_assert_int_eq(gw_reload(gw, NULL), 0);
	ck_assert_int_eq(gw_reload(gw, NULL), 0);
	snprintf(want, sizeof(want), "a~ %s 1;a~ %s 0;", a, b);
	ck_assert_str_eq(heard, want);
	heard[0] = '\0';
	ck_assert_int_eq(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/pol/other.yaml", sdir);
	write_file(path, "version: 1\nname: other\n");
	ck_assert_int_eq(gw_reload(gw, NULL), 0);
	ck_assert_int_eq(gw_reload(gw, NULL), 0);
	ck_assert_str_eq(heard, want);

	/* Deleted: the last view, to the watchers left: b gave its place
	 * back (sbx_watch_del), which is free again. */
	heard[0] = '\0';
	sbx_watch_del(m, &eb);
	ck_assert_int_eq(sbx_watch_add(m, &none), 0);
	ck_assert_int_eq(sbx_delete(m, a, err, sizeof(err)), 0);
	snprintf(want, sizeof(want), "a- %s 1;", a);
	ck_assert_str_eq(heard, want);
	ck_assert_int_eq(sbx_lookup_id(m, b, &v), 0);
	stop();

	/* Expired, on the loop: told like a delete. */
	start("watch2", 8);
	heard[0] = '\0';
	eb.stop = loop;
	ck_assert_int_eq(sbx_watch_add(m, &wa), 0);
	ck_assert_int_eq(sbx_watch_add(m, &wb), 0);
	snprintf(text, sizeof(text), "{\"id\":\"%s\",\"policy\":\"tp\","
	    "\"subject\":\"a\",\"ttl\":1}", c);
	ck_assert_uint_eq(create(text, &r), 201);
	json_decref(r);
	ck_assert_ptr_nonnull(t = ev_timer_add(loop, 10000, watch_timeout,
	    &timed_out));
	ck_assert_int_eq(ev_run(loop), 0);
	ck_assert_msg(!timed_out, "no expiry within 10 s: %s", heard);
	ev_timer_cancel(loop, t);
	snprintf(want, sizeof(want), "a+ %s 0;b+ %s 0;a- %s 0;b- %s 0;", c,
	    c, c, c);
	ck_assert_str_eq(heard, want);
	ck_assert_uint_eq(sbx_count(m), 0);
	stop();
}
END_TEST

static Suite *
kernel_suite(void)
{
	Suite *s = suite_create("sbx_kernel");
	TCase *tc = tcase_create("Core"), *tl = tcase_create("Limits");

	tcase_set_timeout(tc, 60);
	tcase_set_timeout(tl, 60);
	tcase_add_test(tc, test_lifecycle);
	tcase_add_test(tc, test_reload_reapplies);
	tcase_add_test(tc, test_nsid);
	tcase_add_test(tc, test_watchers);
	suite_add_tcase(s, tc);
	tcase_add_test(tl, test_exhausted);
	tcase_add_test(tl, test_kernel_refuses);
	tcase_add_test(tl, test_audit_down);
	tcase_add_test(tl, test_fw_update_bad);
	tcase_add_test(tl, test_state_db_locked);
	tcase_add_test(tl, test_taint_record_retried);
	tcase_add_test(tl, test_peer_nested_netns);
	tcase_add_test(tl, test_labels_at_limits);
	tcase_add_test(tl, test_reconcile_unreadable);
	tcase_add_test(tl, test_rollback_leftover);
	tcase_add_test(tl, test_reconcile_nomem);
	tcase_add_loop_test(tl, test_adopt_invalid_row, 0,
	    sizeof(bad_rows) / sizeof(bad_rows[0]));
	suite_add_tcase(s, tl);
	return s;
}

int
main(void)
{
	SRunner *sr;
	char cmd[128];
	int failed;

	log_init(1, "check_sbx_kernel");
	if (geteuid() != 0)
		fprintf(stderr, "check_sbx_kernel: SKIP: needs root\n");
	else if (unshare(CLONE_NEWNET | CLONE_NEWNS) == -1)
		fprintf(stderr, "check_sbx_kernel: SKIP: unshare: %s\n",
		    strerror(errno));
	else {
		/* Private mounts: pins and /etc/netns vanish with us. */
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == -1 ||
		    (mkdir("/run/netns", 0755) == -1 && errno != EEXIST) ||
		    mount("tmpfs", "/run/netns", "tmpfs", 0, NULL) == -1 ||
		    (mkdir("/etc/netns", 0755) == -1 && errno != EEXIST) ||
		    mount("tmpfs", "/etc/netns", "tmpfs", 0, NULL) == -1) {
			perror("check_sbx_kernel: private mounts");
			return 1;
		}
		isolated = 1;
	}
	snprintf(tdir, sizeof(tdir), "/tmp/check_sbx_kernel.XXXXXX");
	if (mkdtemp(tdir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	sr = srunner_create(kernel_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tdir);
	(void)system(cmd);
	return failed == 0 ? 0 : 1;
}
