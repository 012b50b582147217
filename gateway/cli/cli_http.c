/*
 * cli_http.c: the CLI's one way to reach sluiced: HTTP/1.1 over the control
 * Unix socket with libcurl, JSON in and out. Every command that talks to the
 * daemon goes through cli_request, so "daemon not running" reads the same
 * everywhere and no reply can grow without bound.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "gateway/cli/cli.h"

#define CLI_REPLY_MAX	(16 * 1024 * 1024)	/* bytes kept of a reply */
#define CLI_TIMEOUT_S	60L

static const char *cli_sock = CLI_DEFAULT_SOCKET;

void
cli_set_socket(const char *path)
{
	cli_sock = path;
}

const char *
cli_socket(void)
{
	return cli_sock;
}

struct buf {
	char	*p;
	size_t	 len;
	int	 over;
};

static size_t
on_data(char *data, size_t size, size_t nmemb, void *arg)
{
	struct buf *b = arg;
	size_t n = size * nmemb;
	char *p;

	if (b->len + n > CLI_REPLY_MAX) {
		b->over = 1;
		return 0;	/* makes curl fail with CURLE_WRITE_ERROR */
	}
	if ((p = realloc(b->p, b->len + n + 1)) == NULL)
		return 0;
	memcpy(p + b->len, data, n);
	b->p = p;
	b->len += n;
	b->p[b->len] = '\0';
	return n;
}

int
cli_request(const char *method, const char *path, json_t *body,
    long *status, json_t **reply, char **text, char *err, size_t errlen)
{
	struct curl_slist *hdrs = NULL;
	struct buf b = { NULL, 0, 0 };
	char url[512], *payload = NULL;
	CURLcode cc;
	CURL *c;
	int rc = -1;

	*reply = NULL;
	if (text != NULL)
		*text = NULL;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
	    (c = curl_easy_init()) == NULL) {
		snprintf(err, errlen, "cannot initialise libcurl");
		return -1;
	}
	/* The host name is never resolved: the socket is the address. */
	snprintf(url, sizeof(url), "http://localhost%s", path);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, cli_sock);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, CLI_TIMEOUT_S);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
	if (body != NULL) {
		if ((payload = json_dumps(body, JSON_COMPACT)) == NULL) {
			snprintf(err, errlen, "cannot encode the request");
			goto out;
		}
		hdrs = curl_slist_append(hdrs,
		    "Content-Type: application/json");
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE,
		    (long)strlen(payload));
	} else if (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
	}
	/* No "Expect: 100-continue" round trip for small bodies. */
	hdrs = curl_slist_append(hdrs, "Expect:");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	cc = curl_easy_perform(c);
	if (cc == CURLE_COULDNT_CONNECT) {
		snprintf(err, errlen, "cannot connect to sluiced at %s (is the "
		    "daemon running? -s SOCKET or SLUICE_SOCKET selects "
		    "another socket)", cli_sock);
		goto out;
	}
	if (cc != CURLE_OK) {
		snprintf(err, errlen, "%s: %s", cli_sock, b.over ?
		    "reply too large" : curl_easy_strerror(cc));
		goto out;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	if (b.len > 0)
		*reply = json_loadb(b.p, b.len, 0, NULL);
	if (*reply == NULL && text == NULL) {
		snprintf(err, errlen, "%s: the daemon answered %ld with no "
		    "JSON", cli_sock, *status);
		goto out;
	}
	if (*reply == NULL) {
		*text = b.p != NULL ? b.p : strdup("");
		b.p = NULL;
	}
	rc = 0;
out:
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	curl_global_cleanup();
	free(payload);
	free(b.p);
	return rc;
}
