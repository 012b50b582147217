/*
 * pin: the hash that pins a tool's whole definition.
 *
 * An upstream that quietly changes a tool's description or schema can
 * change what an agent does with it ("tool poisoning"), so the policy pins
 * a hash of the definition and the bridge withholds a tool whose hash moved.
 * The hash is over canonical JSON (sorted keys, no whitespace, ASCII
 * escapes) so that re-serialisation by an upstream does not move it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "policy/policy.h"

int
pol_tool_pin(const char *tool_json, char *out, size_t outlen)
{
	static const char *const members[] = { "name", "title",
	    "description", "inputSchema", "outputSchema", "annotations", NULL };
	json_t		*in, *sel, *v;
	json_error_t	 jerr;
	char		*canon = NULL;
	unsigned char	 md[EVP_MAX_MD_SIZE];
	unsigned int	 mdlen = 0;
	size_t		 i;
	int		 rc = -1;

	if (tool_json == NULL || out == NULL || outlen < 72)
		return -1;
	if ((in = json_loads(tool_json, JSON_REJECT_DUPLICATES, &jerr)) == NULL)
		return -1;
	if (!json_is_object(in) || !json_is_string(json_object_get(in,
	    "name")) || (sel = json_object()) == NULL) {
		json_decref(in);
		return -1;
	}
	for (i = 0; members[i] != NULL; i++)
		if ((v = json_object_get(in, members[i])) != NULL &&
		    json_object_set(sel, members[i], v) == -1)
			goto out;
	canon = json_dumps(sel, JSON_SORT_KEYS | JSON_COMPACT |
	    JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
	if (canon == NULL || EVP_Digest(canon, strlen(canon), md, &mdlen,
	    EVP_sha256(), NULL) != 1 || mdlen != 32)
		goto out;
	memcpy(out, "sha256:", 7);
	for (i = 0; i < 32; i++)
		snprintf(out + 7 + 2 * i, 3, "%02x", md[i]);
	rc = 0;
out:
	free(canon);
	json_decref(sel);
	json_decref(in);
	return rc;
}
