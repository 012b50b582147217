/*
 * fuzz_cni_conf: sluice-cni's parser (gateway/cni/cni_conf.c) under
 * hostile input. The network config comes from a node's files, but
 * CNI_ARGS and parts of the config from a pod's spec (its name, its
 * annotations), which a tenant writes. The first byte picks the command,
 * the bytes up to the first newline are CNI_ARGS, the rest the config.
 * Beyond "does not crash":
 *   - a refusal has a code of the spec (or the plugin's own range) and a
 *     message, and its error object builds;
 *   - an ADD taken names a policy and subject sluiced would take, a
 *     sandbox id "cni-" and 16 hex digits, and gives a result that
 *     serialises, whose last IP points at the eth0 entry it lists.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/cni/cni.h"
#include "tests/fuzz/fuzz.h"

static const char *const cmds[] = { "ADD", "DEL", "CHECK", "GC", "STATUS",
    "VERSION" };

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cni_env env = { NULL, "c0ffee", "/run/netns/cni-test", "eth0",
	    NULL, NULL };
	struct cni_req req;
	struct cni_err e;
	const uint8_t *nl;
	char args[CNI_ARGS_MAX + 2];
	json_t *o, *sb, *ips, *ifs;
	size_t alen = 0, i;
	char *text;
	int rc;

	if (size < 1)
		return 0;
	env.command = cmds[data[0] % (sizeof(cmds) / sizeof(cmds[0]))];
	data++, size--;
	if ((nl = memchr(data, '\n', size)) != NULL) {
		alen = (size_t)(nl - data);
		if (alen > CNI_ARGS_MAX + 1)
			alen = CNI_ARGS_MAX + 1;
		memcpy(args, data, alen);
		args[alen] = '\0';
		env.args = args;
		size -= (size_t)(nl - data) + 1;
		data = nl + 1;
	}
	rc = cni_parse(&env, (const char *)data, size, &req, &e);
	REQUIRE(rc == 0 || rc == -1);
	if (rc == -1) {
		REQUIRE(e.code >= CNI_E_VERSION && e.code <= CNI_E_REFUSED);
		REQUIRE(e.msg[0] != '\0');
		REQUIRE((o = cni_error_json(req.version, &e)) != NULL);
		json_decref(o);
		cni_req_clear(&req);
		return 0;
	}
	if (req.cmd == CNI_CMD_ADD) {
		REQUIRE(req.policy[0] != '\0' && req.subject[0] != '\0');
		REQUIRE(strlen(req.id) == 20 && strncmp(req.id, "cni-", 4) == 0);
		for (i = 4; i < 20; i++)
			REQUIRE((req.id[i] >= '0' && req.id[i] <= '9') ||
			    (req.id[i] >= 'a' && req.id[i] <= 'f'));
		REQUIRE(cni_version_ok(req.version));
		sb = json_pack("{s:s, s:s, s:s, s:s}", "interface", "sl-1",
		    "address", "10.231.0.6", "host_address", "10.231.0.5",
		    "dns", "10.231.255.254");
		REQUIRE(sb != NULL);
		o = cni_result(&req, sb, &e);
		REQUIRE(o != NULL);
		REQUIRE((text = json_dumps(o, JSON_COMPACT)) != NULL);
		free(text);
		ips = json_object_get(o, "ips");
		ifs = json_object_get(o, "interfaces");
		REQUIRE(json_array_size(ips) >= 1 && json_array_size(ifs) >= 2);
		REQUIRE((size_t)json_integer_value(json_object_get(
		    json_array_get(ips, json_array_size(ips) - 1),
		    "interface")) == json_array_size(ifs) - 1);
		json_decref(o);
		json_decref(sb);
	}
	cni_req_clear(&req);
	return 0;
}
