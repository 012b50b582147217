/*
 * check_sbx_kernel: the sandbox manager (gateway/sandbox.c) against the real
 * kernel and a real state database, without the HTTP layer. main() moves the
 * whole run into a private network and mount namespace with tmpfs on
 * /run/netns and /etc/netns, so the table, links, pins and service address
 * live and die with this process and never touch the machine. What users
 * rely on: a created sandbox is found by its address, id and link, with its
 * labels and token; a duplicate, an unknown policy, a full pool and a kernel
 * refusal each give their error and leave nothing; taint narrows the sandbox
 * in the kernel at once and survives a restart, like the token; deleting
 * leaves no pin, element or lookup.
 */
#include <sys/mount.h>
#include <sys/stat.h>

#include <arpa/inet.h>

#include <check.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "gateway/ev.h"
#include "gateway/gw.h"
#include "gateway/log.h"
#include "gateway/sandbox.h"
#include "netns/fw.h"
#include "netns/netns.h"
#include "policy/policy.h"

static char		 tdir[64];
static int		 isolated;
static struct ev_loop	*loop;
static struct gw	*gw;
static struct sbx	*m;

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
	    "  max: %u\n", dir, dir, dir, max);
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
	m = sbx_new(gw, loop, err, sizeof(err));
	ck_assert_msg(m != NULL, "sbx_new: %s", err);
}

static void
stop(void)
{
	sbx_free(m);
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
	st = sbx_create(m, body, out);
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
	ck_assert_uint_eq(sbx_count(m), 1);
	ck_assert_int_eq(count_pins(), 1);

	/* Taint: narrowed in the kernel at once, idempotent. */
	ck_assert_int_eq(sbx_taint(m, id, err, sizeof(err)), 0);
	ck_assert_int_eq(sbx_taint(m, id, err, sizeof(err)), 0);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "restricted", ifname, err,
	    sizeof(err)), 1);
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "keep4", ifname, err,
	    sizeof(err)), 1);
	ck_assert_int_eq(sbx_lookup_id(m, id, &v), 0);
	ck_assert(v.tainted);
	ck_assert_int_eq(sbx_taint(m, "nope", err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);

	/* A restart adopts it: same token, still tainted, still narrowed. */
	sbx_free(m);
	m = sbx_new(gw, loop, err, sizeof(err));
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
	ck_assert_int_eq(fw_count_elems(sbx_fw(m), "keep4", ifname, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(sbx_delete(m, id, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_uint_eq(sbx_count(m), 0);
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
	char id[40], text[256];

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
	ck_assert_int_eq(system("ip link del sl-0"), 0);
	/* And the same request works once the kernel agrees. */
	ck_assert_uint_eq(create(text, &r), 201);
	json_decref(r);
	ck_assert(pin_exists(id));
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
	suite_add_tcase(s, tc);
	tcase_add_test(tl, test_exhausted);
	tcase_add_test(tl, test_kernel_refuses);
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
