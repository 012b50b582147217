/*
 * check_ctl: the control server (gateway/ctl/ctl.c) end to end in one process.
 * Each test starts a real ctl on a temporary Unix socket with the ev loop in
 * a second thread, and talks to it with libcurl, as `sluice` does: the
 * routing, the error replies every endpoint relies on (404, 405 + Allow,
 * 413, 415, 400), suspension, the counters and the socket file rules.
 * Synchronisation is by the HTTP exchange itself (a reply means the handler
 * ran) and by joining the loop thread; nothing waits on a clock.
 */
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "gateway/ctl/ctl.h"
#include "gateway/ev.h"
#include "gateway/log.h"

static char		 tdir[128];
static char		 sock[192];
static struct ev_loop	*loop;
static struct ctl	*ctl;
static pthread_t	 loop_thr;
static int		 stop_fd = -1;
static int		 loop_running;

/* State the handlers write (loop thread) and tests read after a reply. */
static int		 cancelled;
static sem_t		 parked_sem;
static struct ctl_req	*parked_req;

/* ------------------------------------------------------------ handlers */

static enum ctl_rc
h_ping(struct ctl_req *req, void *arg)
{
	(void)arg;
	return ctl_reply_json(req, 200, json_pack("{s:b}", "pong", 1));
}

static enum ctl_rc
h_thing(struct ctl_req *req, void *arg)
{
	const char *q = ctl_req_query(req, "q");

	(void)arg;
	return ctl_reply_json(req, 200, json_pack("{s:s, s:s?, s:s}", "id",
	    ctl_req_param(req, "id"), "q", q, "method", ctl_req_method(req)));
}

static enum ctl_rc
h_two(struct ctl_req *req, void *arg)
{
	(void)arg;
	return ctl_reply_json(req, 200, json_pack("{s:s, s:s}", "a",
	    ctl_req_param(req, "a"), "b", ctl_req_param(req, "b")));
}

static enum ctl_rc
h_echo(struct ctl_req *req, void *arg)
{
	json_t *b = ctl_req_body(req);

	(void)arg;
	if (b == NULL)
		return ctl_reply_json(req, 200, json_pack("{s:b}", "empty",
		    1));
	(void)ctl_reply_header(req, "Location", "/v1/echo/1");
	return ctl_reply_json(req, 201, json_incref(b));
}

static enum ctl_rc
h_silent(struct ctl_req *req, void *arg)
{
	(void)req;
	(void)arg;
	return CTL_DONE;	/* forgot to reply: ctl must answer 500 */
}

static enum ctl_rc
h_null(struct ctl_req *req, void *arg)
{
	(void)arg;
	/* What a failed json_pack hands over: must not become a 200. */
	return ctl_reply_json(req, 200, NULL);
}

/* Who connected, as ctl_req_peer reports it: what approvals rely on. */
static enum ctl_rc
h_who(struct ctl_req *req, void *arg)
{
	uid_t uid;
	gid_t gid;
	pid_t pid;

	(void)arg;
	if (ctl_req_peer(req, &uid, &gid, &pid) == -1)
		return ctl_reply_error(req, 403, "nobody", "no credentials");
	/* NULL outputs are allowed. */
	if (ctl_req_peer(req, NULL, NULL, NULL) == -1)
		return ctl_reply_error(req, 500, "internal", "inconsistent");
	return ctl_reply_json(req, 200, json_pack("{s:I, s:I, s:I}", "uid",
	    (json_int_t)uid, "gid", (json_int_t)gid, "pid", (json_int_t)pid));
}

static struct ctl_req	*held;

static enum ctl_rc
h_hold(struct ctl_req *req, void *arg)
{
	(void)arg;
	held = req;
	sem_post(&parked_sem);
	return CTL_SUSPEND;
}

static enum ctl_rc
h_release(struct ctl_req *req, void *arg)
{
	(void)arg;
	if (held == NULL)
		return ctl_reply_error(req, 409, "nothing_held", "none");
	/* The held request's client is gone; answering it must be safe. */
	ctl_reply_json(held, 200, json_object());
	held = NULL;
	return ctl_reply_json(req, 200, json_pack("{s:b}", "released", 1));
}

static enum ctl_rc
h_twice(struct ctl_req *req, void *arg)
{
	(void)arg;
	ctl_reply_json(req, 200, json_pack("{s:i}", "n", 1));
	/* The second reply is refused; the first one goes out. */
	ctl_reply_json(req, 500, json_pack("{s:i}", "n", 2));
	return CTL_DONE;
}

static void
later_reply(struct ev_loop *l, void *arg)
{
	(void)l;
	ctl_reply_json(arg, 202, json_pack("{s:s}", "answered", "later"));
}

static enum ctl_rc
h_async(struct ctl_req *req, void *arg)
{
	(void)arg;
	/* Answer from another event of the loop, as approvals will. */
	if (ev_timer_add(loop, 0, later_reply, req) == NULL)
		return ctl_reply_error(req, 500, "internal", "timer");
	return CTL_SUSPEND;
}

static void
on_cancel(struct ctl_req *req, void *arg)
{
	(void)arg;
	ck_assert_ptr_eq(req, parked_req);
	cancelled++;
}

static enum ctl_rc
h_park(struct ctl_req *req, void *arg)
{
	(void)arg;
	parked_req = req;
	ctl_req_on_cancel(req, on_cancel, NULL);
	sem_post(&parked_sem);
	return CTL_SUSPEND;	/* never answered: ctl_free must */
}

/* --------------------------------------------------------------- fixture */

static void
on_stop(struct ev_loop *l, int fd, unsigned events, void *arg)
{
	uint64_t v;

	(void)events;
	(void)arg;
	(void)read(fd, &v, sizeof(v));
	ev_stop(l);
}

static void *
loop_main(void *arg)
{
	(void)arg;
	ev_run(loop);
	return NULL;
}

static void
stop_loop(void)
{
	uint64_t one = 1;

	if (!loop_running)
		return;
	ck_assert_int_eq(write(stop_fd, &one, sizeof(one)), sizeof(one));
	pthread_join(loop_thr, NULL);
	loop_running = 0;
}

/* What the refused hook was told (the loop thread writes, tests read once
 * the reply is in). */
static pthread_mutex_t	refused_mu = PTHREAD_MUTEX_INITIALIZER;
static int		nrefused;
static char		refused_code[32], refused_path[64];

static void
on_refused(const char *method, const char *path, unsigned status,
    const char *code, const char *message, pid_t pid, void *arg)
{
	(void)method;
	(void)status;
	(void)message;
	(void)arg;
	pthread_mutex_lock(&refused_mu);
	nrefused++;
	snprintf(refused_code, sizeof(refused_code), "%s", code);
	snprintf(refused_path, sizeof(refused_path), "%s", path);
	/* The caller is known: this process (its own credentials). */
	if (pid != getpid())
		refused_code[0] = '\0';
	pthread_mutex_unlock(&refused_mu);
}

/* The peer check every test's server runs (the daemon's refuses callers
 * in a sandbox's network namespace): here, any namespace but ours. */
static int
other_netns(pid_t pid, void *arg)
{
	struct stat a, b;
	char path[64];

	(void)arg;
	snprintf(path, sizeof(path), "/proc/%ld/ns/net", (long)pid);
	return stat(path, &a) == -1 || stat("/proc/self/ns/net", &b) == -1 ||
	    a.st_ino != b.st_ino || a.st_dev != b.st_dev;
}

static void
setup(void)
{
	char err[256];

	log_init(1, "check_ctl");
	snprintf(tdir, sizeof(tdir), "/tmp/check_ctl.%ld.XXXXXX",
	    (long)getpid());
	ck_assert_ptr_nonnull(mkdtemp(tdir));
	snprintf(sock, sizeof(sock), "%s/run/sub/ctl.sock", tdir);
	ck_assert_ptr_nonnull(loop = ev_new());
	ck_assert_ptr_nonnull(ctl = ctl_new(loop));
	ck_assert_int_eq(ctl_route(ctl, "GET", "/v1/ping", h_ping, NULL), 0);
	ck_assert_int_eq(ctl_route(ctl, "GET", "/v1/things/{id}", h_thing,
	    NULL), 0);
	ck_assert_int_eq(ctl_route(ctl, "DELETE", "/v1/things/{id}", h_thing,
	    NULL), 0);
	ck_assert_int_eq(ctl_route(ctl, "GET", "/v1/x/{a}/y/{b}", h_two,
	    NULL), 0);
	ck_assert_int_eq(ctl_route(ctl, "POST", "/v1/echo", h_echo, NULL), 0);
	ck_assert_int_eq(ctl_route(ctl, "GET", "/v1/silent", h_silent, NULL),
	    0);
	ck_assert_int_eq(ctl_route(ctl, "GET", "/v1/twice", h_twice, NULL),
	    0);
	ck_assert_int_eq(ctl_route(ctl, "GET", "/v1/async", h_async, NULL),
	    0);
	ck_assert_int_eq(ctl_route(ctl, "GET", "/v1/park", h_park, NULL), 0);
	ck_assert_int_eq(ctl_route(ctl, "GET", "/v1/null", h_null, NULL), 0);
	ck_assert_int_eq(ctl_route(ctl, "GET", "/v1/hold", h_hold, NULL), 0);
	ck_assert_int_eq(ctl_route(ctl, "GET", "/v1/who", h_who, NULL), 0);
	ck_assert_int_eq(ctl_route(ctl, "POST", "/v1/release", h_release,
	    NULL), 0);
	ctl_set_peer_check(ctl, other_netns, NULL);
	ctl_set_refused_hook(ctl, on_refused, NULL);
	nrefused = 0;
	held = NULL;
	ck_assert_msg(ctl_listen(ctl, sock, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_ge(stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), 0);
	ck_assert_int_eq(ev_add(loop, stop_fd, EV_READ, on_stop, NULL), 0);
	cancelled = 0;
	parked_req = NULL;
	sem_init(&parked_sem, 0, 0);
	ck_assert_int_eq(pthread_create(&loop_thr, NULL, loop_main, NULL), 0);
	loop_running = 1;
}

static void
teardown(void)
{
	char cmd[256];

	stop_loop();
	ctl_free(ctl);
	ctl = NULL;
	ev_del(loop, stop_fd);
	close(stop_fd);
	stop_fd = -1;
	ev_free(loop);
	loop = NULL;
	sem_destroy(&parked_sem);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tdir);
	(void)system(cmd);
}

/* ---------------------------------------------------------------- client */

struct resp {
	long	 status;
	char	*body;
	size_t	 len;
	char	 allow[128];
	char	 location[128];
	char	 ctype[128];
	json_t	*json;
};

static size_t
on_body(char *d, size_t sz, size_t n, void *arg)
{
	struct resp *r = arg;
	char *p = realloc(r->body, r->len + sz * n + 1);

	if (p == NULL)
		return 0;
	memcpy(p + r->len, d, sz * n);
	r->body = p;
	r->len += sz * n;
	r->body[r->len] = '\0';
	return sz * n;
}

static void
grab(char *dst, size_t dlen, const char *line, const char *name)
{
	size_t n = strlen(name);

	if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
		snprintf(dst, dlen, "%s", line + n + 1 + (line[n + 1] == ' '));
		dst[strcspn(dst, "\r\n")] = '\0';
	}
}

static size_t
on_header(char *d, size_t sz, size_t n, void *arg)
{
	struct resp *r = arg;
	char line[256];

	snprintf(line, sizeof(line), "%.*s", (int)(sz * n), d);
	grab(r->allow, sizeof(r->allow), line, "Allow");
	grab(r->location, sizeof(r->location), line, "Location");
	grab(r->ctype, sizeof(r->ctype), line, "Content-Type");
	return sz * n;
}

/* One request; ctype NULL sends no Content-Type; chunked sends the body
 * without a Content-Length. Returns 0 when an HTTP answer came back. */
static int
request(const char *method, const char *path, const char *ctype,
    const char *body, size_t len, int chunked, struct resp *r)
{
	struct curl_slist *h = NULL;
	char url[512], hdr[256];
	CURLcode cc;
	CURL *c;

	memset(r, 0, sizeof(*r));
	ck_assert_ptr_nonnull(c = curl_easy_init());
	snprintf(url, sizeof(url), "http://localhost%s", path);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, sock);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	/* A bound, not a wait: a hung server fails the test. */
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	h = curl_slist_append(h, "Expect:");
	if (ctype != NULL) {
		snprintf(hdr, sizeof(hdr), "Content-Type: %s", ctype);
		h = curl_slist_append(h, hdr);
	} else
		h = curl_slist_append(h, "Content-Type:");
	if (body != NULL) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		if (chunked)
			h = curl_slist_append(h, "Transfer-Encoding: chunked");
		else
			curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
			    (curl_off_t)len);
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	cc = curl_easy_perform(c);
	if (cc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	if (r->body != NULL)
		r->json = json_loads(r->body, 0, NULL);
	return cc == CURLE_OK ? 0 : -1;
}

static void
resp_free(struct resp *r)
{
	free(r->body);
	json_decref(r->json);
	memset(r, 0, sizeof(*r));
}

static const char *
jstr(const struct resp *r, const char *key)
{
	return json_string_value(json_object_get(r->json, key));
}

static void
get(const char *path, struct resp *r)
{
	ck_assert_int_eq(request("GET", path, NULL, NULL, 0, 0, r), 0);
}

/* The error shape every failure has, and the server still serving. */
static void
assert_error(struct resp *r, long status, const char *code)
{
	struct resp p;

	ck_assert_int_eq(r->status, status);
	ck_assert_msg(r->json != NULL, "error body is not JSON: %s",
	    r->body ? r->body : "(none)");
	ck_assert_str_eq(jstr(r, "error"), code);
	ck_assert_ptr_nonnull(jstr(r, "message"));
	ck_assert_str_eq(r->ctype, "application/json");
	get("/v1/ping", &p);
	ck_assert_int_eq(p.status, 200);
	ck_assert(json_is_true(json_object_get(p.json, "pong")));
	resp_free(&p);
}

/* ------------------------------------------------------------------ Core */

START_TEST(route_with_param_and_query)
{
	struct resp r;

	get("/v1/things/sb-1?q=hello", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(jstr(&r, "id"), "sb-1");
	ck_assert_str_eq(jstr(&r, "q"), "hello");
	ck_assert_str_eq(jstr(&r, "method"), "GET");
	resp_free(&r);
	ck_assert_int_eq(request("DELETE", "/v1/things/other", NULL, NULL, 0,
	    0, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(jstr(&r, "id"), "other");
	ck_assert_str_eq(jstr(&r, "method"), "DELETE");
	resp_free(&r);
}
END_TEST

START_TEST(route_two_params)
{
	struct resp r;

	get("/v1/x/one/y/two", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(jstr(&r, "a"), "one");
	ck_assert_str_eq(jstr(&r, "b"), "two");
	resp_free(&r);
}
END_TEST

/* Percent-encoded path parameters: decoded once, and a "%00" never cuts an
 * id short ("abc%00def" must not name "abc"). */
static const struct {
	const char	*path;
	long		 status;
	const char	*id;	/* what the handler saw, for a 200 */
} odd_ids[] = {
	{ "/v1/things/abc%00def", 200, "abc%00def" },
	{ "/v1/things/abc%00", 200, "abc%00" },
	{ "/v1/things/%00", 200, "%00" },
	{ "/v1/things/%00abc?q=x", 200, "%00abc" },
	{ "/v1/things/a%2db", 200, "a-b" },
	{ "/v1/things/%2e%2e", 200, ".." },
	{ "/v1/things/abc%2500", 200, "abc%00" },
	{ "/v1/things/a%zz", 200, "a%zz" },
	{ "/v1/things/a%2", 200, "a%2" },
	{ "/v1/things/a%2Fb", 404, NULL },	/* a '/' in an id: no route */
};

START_TEST(odd_path_params)
{
	struct resp r;

	get(odd_ids[_i].path, &r);
	ck_assert_msg(r.status == odd_ids[_i].status, "%s: %ld %s",
	    odd_ids[_i].path, r.status, r.body ? r.body : "");
	if (odd_ids[_i].id != NULL)
		ck_assert_str_eq(jstr(&r, "id"), odd_ids[_i].id);
	resp_free(&r);
}
END_TEST

/* The same for query arguments. */
START_TEST(query_nul_not_cut)
{
	struct resp r;

	get("/v1/things/x?q=abc%00def", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(jstr(&r, "q"), "abc%00def");
	resp_free(&r);
	get("/v1/things/x?q=a%20b+c", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(jstr(&r, "q"), "a b c");
	resp_free(&r);
}
END_TEST

START_TEST(body_reaches_handler)
{
	static const char body[] = "{\"policy\":\"dev\",\"labels\":{\"k\":1}}";
	struct resp r;

	ck_assert_int_eq(request("POST", "/v1/echo", "application/json", body,
	    strlen(body), 0, &r), 0);
	ck_assert_int_eq(r.status, 201);
	ck_assert_str_eq(jstr(&r, "policy"), "dev");
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(
	    r.json, "labels"), "k")), 1);
	ck_assert_str_eq(r.location, "/v1/echo/1");
	resp_free(&r);
	/* Chunked bodies are accepted too, and parameters on the type. */
	ck_assert_int_eq(request("POST", "/v1/echo",
	    "Application/JSON; charset=utf-8", body, strlen(body), 1, &r), 0);
	ck_assert_int_eq(r.status, 201);
	ck_assert_str_eq(jstr(&r, "policy"), "dev");
	resp_free(&r);
}
END_TEST

START_TEST(empty_body_is_null)
{
	struct resp r;

	/* No body: no content type needed, the handler sees NULL. */
	ck_assert_int_eq(request("POST", "/v1/echo", NULL, "", 0, 0, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert(json_is_true(json_object_get(r.json, "empty")));
	resp_free(&r);
}
END_TEST

START_TEST(handler_without_reply_is_500)
{
	struct resp r;

	get("/v1/silent", &r);
	assert_error(&r, 500, "internal");
	resp_free(&r);
}
END_TEST

START_TEST(null_body_is_500)
{
	struct resp r;

	get("/v1/null", &r);
	assert_error(&r, 500, "internal");
	resp_free(&r);
}
END_TEST

START_TEST(parked_client_gone)
{
	static const char req[] = "GET /v1/hold HTTP/1.1\r\nHost: x\r\n\r\n";
	struct sockaddr_un sun;
	struct resp r;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, sock, strlen(sock));
	ck_assert_int_ge(fd = socket(AF_UNIX, SOCK_STREAM, 0), 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	ck_assert_int_eq(write(fd, req, sizeof(req) - 1), sizeof(req) - 1);
	sem_wait(&parked_sem);	/* parked by the handler */
	close(fd);		/* and the client hangs up */
	ck_assert_int_eq(request("POST", "/v1/release", NULL, "", 0, 0, &r),
	    0);
	ck_assert_int_eq(r.status, 200);
	ck_assert(json_is_true(json_object_get(r.json, "released")));
	resp_free(&r);
	get("/v1/ping", &r);
	ck_assert_int_eq(r.status, 200);
	resp_free(&r);
}
END_TEST

START_TEST(second_reply_refused)
{
	struct resp r;

	get("/v1/twice", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(json_integer_value(json_object_get(r.json, "n")), 1);
	resp_free(&r);
}
END_TEST

START_TEST(suspended_request_answered_later)
{
	struct resp r;
	int i;

	/* Several in a row: a parked connection must not wedge the next. */
	for (i = 0; i < 3; i++) {
		get("/v1/async", &r);
		ck_assert_int_eq(r.status, 202);
		ck_assert_str_eq(jstr(&r, "answered"), "later");
		resp_free(&r);
	}
	get("/v1/ping", &r);
	ck_assert_int_eq(r.status, 200);
	resp_free(&r);
}
END_TEST

struct bg {
	pthread_t	t;
	struct resp	r;
	int		rc;
};

static void *
bg_park(void *arg)
{
	struct bg *b = arg;

	b->rc = request("GET", "/v1/park", NULL, NULL, 0, 0, &b->r);
	return NULL;
}

START_TEST(parked_request_cancelled_on_free)
{
	struct bg b;

	memset(&b, 0, sizeof(b));
	ck_assert_int_eq(pthread_create(&b.t, NULL, bg_park, &b), 0);
	sem_wait(&parked_sem);	/* the handler has parked it */
	stop_loop();
	ctl_free(ctl);
	ctl = NULL;
	ck_assert_int_eq(cancelled, 1);
	pthread_join(b.t, NULL);
	/* The client is not left hanging: it gets a 503 before the server
	 * goes away. */
	ck_assert_int_eq(b.rc, 0);
	ck_assert_int_eq(b.r.status, 503);
	ck_assert_str_eq(jstr(&b.r, "error"), "shutting_down");
	resp_free(&b.r);
}
END_TEST

START_TEST(counters_and_metrics)
{
	struct resp r;
	char *buf = NULL;
	size_t len = 0;
	FILE *fp;

	get("/v1/ping", &r);
	resp_free(&r);
	get("/nope", &r);
	resp_free(&r);
	get("/nope/either", &r);
	resp_free(&r);
	stop_loop();
	/* ping x1 + the ping of each assert_error: here none. */
	ck_assert_uint_eq(ctl_requests_total(ctl, 200), 1);
	ck_assert_uint_eq(ctl_requests_total(ctl, 404), 2);
	ck_assert_uint_eq(ctl_requests_total(ctl, 405), 0);
	ck_assert_uint_eq(ctl_requests_total(ctl, 99999), 0);
	ck_assert_ptr_nonnull(fp = open_memstream(&buf, &len));
	ctl_metrics_print(ctl, fp);
	fclose(fp);
	ck_assert_ptr_nonnull(strstr(buf,
	    "# TYPE sluice_control_requests_total counter\n"));
	ck_assert_ptr_nonnull(strstr(buf,
	    "sluice_control_requests_total{code=\"200\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(buf,
	    "sluice_control_requests_total{code=\"404\"} 2\n"));
	ck_assert_ptr_null(strstr(buf, "code=\"405\""));
	free(buf);
}
END_TEST

START_TEST(socket_mode_and_removal)
{
	struct stat st;
	char dir[256];

	ck_assert_int_eq(lstat(sock, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_int_eq(st.st_mode & 0777, 0660);
	snprintf(dir, sizeof(dir), "%s/run/sub", tdir);
	ck_assert_int_eq(stat(dir, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0750);
	ck_assert_str_eq(ctl_socket_path(ctl), sock);
	stop_loop();
	ctl_free(ctl);
	ctl = NULL;
	ck_assert_int_eq(lstat(sock, &st), -1);
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

START_TEST(free_null)
{
	ctl_free(NULL);
	ck_assert_ptr_null(ctl_socket_path(NULL));
}
END_TEST

/* ---------------------------------------------------------------- Limits */

START_TEST(unknown_path_404)
{
	static const char *const paths[] = {
		"/", "/v1", "/v1/", "/v1/ping/", "/v1/things/", "/v1/things",
		"/v1/things/a/b", "//v1/ping", "/V1/PING", "/v1/x/a/y/",
		"/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z",
	};
	struct resp r;
	size_t i;

	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		get(paths[i], &r);
		ck_assert_msg(r.status == 404, "%s: %ld", paths[i], r.status);
		assert_error(&r, 404, "not_found");
		resp_free(&r);
	}
}
END_TEST

START_TEST(wrong_method_405_with_allow)
{
	struct resp r;

	ck_assert_int_eq(request("PUT", "/v1/things/a", NULL, NULL, 0, 0, &r),
	    0);
	ck_assert_str_eq(r.allow, "GET, DELETE");
	assert_error(&r, 405, "method_not_allowed");
	resp_free(&r);
	ck_assert_int_eq(request("POST", "/v1/ping", "application/json", "{}",
	    2, 0, &r), 0);
	ck_assert_str_eq(r.allow, "GET");
	assert_error(&r, 405, "method_not_allowed");
	resp_free(&r);
	ck_assert_int_eq(request("GET", "/v1/echo", NULL, NULL, 0, 0, &r), 0);
	ck_assert_str_eq(r.allow, "POST");
	assert_error(&r, 405, "method_not_allowed");
	resp_free(&r);
	/* A method that is not UTF-8, quoted in the message: still a 405
	 * with a JSON body (those bytes shown as '?'), not a 500. */
	ck_assert_int_eq(request("\xc3X", "/v1/ping", NULL, NULL, 0, 0, &r),
	    0);
	assert_error(&r, 405, "method_not_allowed");
	ck_assert_ptr_nonnull(strstr(jstr(&r, "message"), "?X"));
	resp_free(&r);
}
END_TEST

static const struct {
	const char	*body;
	size_t		 len;	/* 0: strlen */
} bad_json[] = {
	{ "{", 0 },
	{ "[1,", 0 },
	{ "{\"a\":1,\"a\":2}", 0 },		/* duplicate key */
	{ "\"just a string\"", 0 },		/* not object or array */
	{ "42", 0 },
	{ "{\"a\":1} trailing", 0 },
	{ "{\"a\":\"\xff\xfe\"}", 0 },		/* invalid UTF-8 */
	{ "{\"a\":\"x\\u0000y\"}", 0 },		/* NUL inside a string */
	{ "{\"a\":1}\0{", 9 },			/* NUL byte in the body */
	{ "nul", 0 },
	{ "{'a':1}", 0 },
};

START_TEST(malformed_json_400)
{
	const char *b = bad_json[_i].body;
	size_t len = bad_json[_i].len ? bad_json[_i].len : strlen(b);
	struct resp r;

	ck_assert_int_eq(request("POST", "/v1/echo", "application/json", b,
	    len, 0, &r), 0);
	ck_assert_msg(r.status == 400, "case %d: %ld", _i, r.status);
	assert_error(&r, 400, "bad_json");
	resp_free(&r);
	/* Refused before the handler: the owner is told, so it can record
	 * the refusal. */
	pthread_mutex_lock(&refused_mu);
	ck_assert_int_eq(nrefused, 1);
	ck_assert_str_eq(refused_code, "bad_json");
	ck_assert_str_eq(refused_path, "/v1/echo");
	pthread_mutex_unlock(&refused_mu);
}
END_TEST

/* No endpoint reached (404, 405) or the handler's own answer: not a
 * refusal of ctl's to report. */
START_TEST(refused_hook_only_for_ctl_refusals)
{
	struct resp r;

	get("/v1/nope", &r);
	ck_assert_int_eq(r.status, 404);
	resp_free(&r);
	ck_assert_int_eq(request("DELETE", "/v1/echo", NULL, NULL, 0, 0, &r),
	    0);
	ck_assert_int_eq(r.status, 405);
	resp_free(&r);
	get("/v1/things/abc", &r);
	ck_assert_int_eq(r.status, 200);
	resp_free(&r);
	pthread_mutex_lock(&refused_mu);
	ck_assert_int_eq(nrefused, 0);
	pthread_mutex_unlock(&refused_mu);
	ck_assert_int_eq(request("POST", "/v1/echo", "text/plain", "{}", 2, 0,
	    &r), 0);
	ck_assert_int_eq(r.status, 415);
	resp_free(&r);
	pthread_mutex_lock(&refused_mu);
	ck_assert_int_eq(nrefused, 1);
	ck_assert_str_eq(refused_code, "unsupported_media_type");
	pthread_mutex_unlock(&refused_mu);
}
END_TEST

START_TEST(deep_nesting_400)
{
	size_t n = 60000;
	char *b = malloc(n);
	struct resp r;

	ck_assert_ptr_nonnull(b);
	memset(b, '[', n);
	ck_assert_int_eq(request("POST", "/v1/echo", "application/json", b, n,
	    0, &r), 0);
	assert_error(&r, 400, "bad_json");
	resp_free(&r);
	free(b);
}
END_TEST

/* {"a":"xxx..."} of exactly len bytes. */
static char *
json_of_len(size_t len)
{
	char *b = malloc(len + 1);

	memcpy(b, "{\"a\":\"", 6);
	memset(b + 6, 'x', len - 8);
	memcpy(b + len - 2, "\"}", 3);
	return b;
}

START_TEST(body_cap_boundary)
{
	char *b = json_of_len(CTL_BODY_MAX);
	struct resp r;

	ck_assert_int_eq(request("POST", "/v1/echo", "application/json", b,
	    CTL_BODY_MAX, 0, &r), 0);
	ck_assert_int_eq(r.status, 201);
	ck_assert_uint_eq(strlen(jstr(&r, "a")), CTL_BODY_MAX - 8);
	resp_free(&r);
	free(b);
}
END_TEST

START_TEST(oversized_body_413)
{
	size_t sizes[] = { CTL_BODY_MAX + 1, 1024 * 1024 };
	struct resp r;
	size_t i;

	for (i = 0; i < 2; i++) {
		char *b = json_of_len(sizes[i]);

		/* Announced with Content-Length, refused before reading. */
		ck_assert_int_eq(request("POST", "/v1/echo",
		    "application/json", b, sizes[i], 0, &r), 0);
		assert_error(&r, 413, "body_too_large");
		resp_free(&r);
		/* Chunked: only counted while it arrives. */
		ck_assert_int_eq(request("POST", "/v1/echo",
		    "application/json", b, sizes[i], 1, &r), 0);
		assert_error(&r, 413, "body_too_large");
		resp_free(&r);
		free(b);
	}
}
END_TEST

/* A chunked body without end: what a client sends, counted by libcurl's
 * read callback; it stops at limit. */
struct flood {
	size_t	sent, limit;
};

static size_t
flood_read(char *buf, size_t sz, size_t n, void *arg)
{
	struct flood *f = arg;
	size_t len = sz * n;

	if (f->sent >= f->limit)
		return 0;
	if (len > f->limit - f->sent)
		len = f->limit - f->sent;
	memset(buf, ' ', len);
	f->sent += len;
	return len;
}

/* A refused body is read only up to the drain bound, chunked or not: a
 * client streaming without end is cut off instead of holding one of the
 * control connections forever, and the API keeps serving. */
START_TEST(refused_body_drain_bounded)
{
	struct flood f = { 0, (size_t)64 * 1024 * 1024 };
	struct curl_slist *h = NULL;
	struct resp r;
	CURL *c = curl_easy_init();
	CURLcode cc;
	int chunked = _i;

	memset(&r, 0, sizeof(r));
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, sock);
	curl_easy_setopt(c, CURLOPT_URL, "http://localhost/v1/echo");
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_READFUNCTION, flood_read);
	curl_easy_setopt(c, CURLOPT_READDATA, &f);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
	h = curl_slist_append(h, "Expect:");
	h = curl_slist_append(h, "Content-Type: application/json");
	if (chunked)
		h = curl_slist_append(h, "Transfer-Encoding: chunked");
	else
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
		    (curl_off_t)f.limit);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	cc = curl_easy_perform(c);
	if (cc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	/* Cut off (or answered 413) well before the 64 MiB were sent. */
	ck_assert_msg(f.sent < (size_t)16 * 1024 * 1024,
	    "server read %zu bytes of a refused body (curl: %d, status %ld)",
	    f.sent, (int)cc, r.status);
	ck_assert_msg(cc != CURLE_OK || r.status == 413, "status %ld",
	    r.status);
	free(r.body);
	get("/v1/ping", &r);
	ck_assert_int_eq(r.status, 200);
	resp_free(&r);
}
END_TEST

START_TEST(bad_content_length_413)
{
	struct resp r;
	struct curl_slist *h = NULL;
	CURL *c = curl_easy_init();

	/* A length that does not parse is not trusted. */
	memset(&r, 0, sizeof(r));
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, sock);
	curl_easy_setopt(c, CURLOPT_URL, "http://localhost/v1/echo");
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
	h = curl_slist_append(h, "Content-Length: 99999999999999999999999");
	h = curl_slist_append(h, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	/* MHD itself may refuse it first (400); either way not accepted. */
	ck_assert_msg(r.status == 413 || r.status == 400, "%ld", r.status);
	free(r.body);
	get("/v1/ping", &r);
	ck_assert_int_eq(r.status, 200);
	resp_free(&r);
}
END_TEST

static const char *const bad_types[] = {
	NULL, "text/plain", "application/x-www-form-urlencoded",
	"application/jsonx", "application/json-patch+json", "json",
	"multipart/form-data; boundary=x",
};

START_TEST(wrong_content_type_415)
{
	struct resp r;

	ck_assert_int_eq(request("POST", "/v1/echo", bad_types[_i], "{}", 2, 0,
	    &r), 0);
	ck_assert_msg(r.status == 415, "type %s: %ld",
	    bad_types[_i] ? bad_types[_i] : "(none)", r.status);
	assert_error(&r, 415, "unsupported_media_type");
	resp_free(&r);
}
END_TEST

START_TEST(route_registration_errors)
{
	static ctl_handler *const fn = h_ping;

	/* Routes are registered before serving, from the loop's thread. */
	stop_loop();
	errno = 0;
	ck_assert_int_eq(ctl_route(ctl, "GET", "/v1/ping", fn, NULL), -1);
	ck_assert_int_eq(errno, EINVAL);	/* duplicate */
	ck_assert_int_eq(ctl_route(ctl, "GET", "v1/nolead", fn, NULL), -1);
	ck_assert_int_eq(ctl_route(ctl, "GET", "/v1/{", fn, NULL), -1);
	ck_assert_int_eq(ctl_route(ctl, "GET", "/v1/a{b}", fn, NULL), -1);
	ck_assert_int_eq(ctl_route(ctl, "GET", "/v1/{}", fn, NULL), -1);
	ck_assert_int_eq(ctl_route(ctl, "GET", "/{a}/{b}/{c}/{d}/{e}", fn,
	    NULL), -1);
	ck_assert_int_eq(ctl_route(ctl, "", "/v1/e", fn, NULL), -1);
	ck_assert_int_eq(ctl_route(ctl, "GET", NULL, fn, NULL), -1);
	ck_assert_int_eq(ctl_route(ctl, "GET", "/v1/e", NULL, NULL), -1);
	ck_assert_int_eq(errno, EINVAL);
	/* The same pattern with another method is fine. */
	ck_assert_int_eq(ctl_route(ctl, "HEAD", "/v1/ping", fn, NULL), 0);
}
END_TEST

START_TEST(listen_refuses_live_and_foreign)
{
	struct ev_loop *l2;
	struct ctl *c2;
	char err[256], path[256];
	struct stat st;
	int fd;

	ck_assert_ptr_nonnull(l2 = ev_new());
	ck_assert_ptr_nonnull(c2 = ctl_new(l2));
	/* A live server answers on sock: refused, and its file kept. */
	ck_assert_int_eq(ctl_listen(c2, sock, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EADDRINUSE);
	ck_assert_int_eq(lstat(sock, &st), 0);
	/* A regular file is never deleted. */
	snprintf(path, sizeof(path), "%s/file.sock", tdir);
	ck_assert_int_ge(fd = open(path, O_CREAT | O_WRONLY, 0600), 0);
	close(fd);
	ck_assert_int_eq(ctl_listen(c2, path, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EEXIST);
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	/* Too long for sun_path. */
	memset(path, 'a', sizeof(path) - 1);
	path[0] = '/';
	path[sizeof(path) - 1] = '\0';
	ck_assert_int_eq(ctl_listen(c2, path, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENAMETOOLONG);
	ctl_free(c2);
	ev_free(l2);
	/* The failed attempts did not disturb the live server. */
	{
		struct resp r;

		get("/v1/ping", &r);
		ck_assert_int_eq(r.status, 200);
		resp_free(&r);
	}
}
END_TEST

START_TEST(listen_replaces_stale_socket)
{
	struct sockaddr_un sun;
	struct ev_loop *l2;
	struct ctl *c2;
	char err[256], path[256];
	struct stat st;
	int fd;

	/* A socket file nobody listens on, as a crashed daemon leaves. */
	snprintf(path, sizeof(path), "%s/stale.sock", tdir);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	ck_assert_uint_lt(strlen(path), sizeof(sun.sun_path));
	memcpy(sun.sun_path, path, strlen(path));
	ck_assert_int_ge(fd = socket(AF_UNIX, SOCK_STREAM, 0), 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	close(fd);
	ck_assert_int_eq(chmod(path, 0666), 0);
	ck_assert_ptr_nonnull(l2 = ev_new());
	ck_assert_ptr_nonnull(c2 = ctl_new(l2));
	ck_assert_msg(ctl_listen(c2, path, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0660);
	ctl_free(c2);
	ev_free(l2);
	ck_assert_int_eq(lstat(path, &st), -1);
}
END_TEST

/* The caller's identity comes from the kernel: our own uid, gid and pid
 * for a request this process makes. */
START_TEST(peer_credentials_self)
{
	struct resp r;

	get("/v1/who", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(json_integer_value(json_object_get(r.json, "uid")),
	    getuid());
	ck_assert_int_eq(json_integer_value(json_object_get(r.json, "gid")),
	    getgid());
	ck_assert_int_eq(json_integer_value(json_object_get(r.json, "pid")),
	    getpid());
	resp_free(&r);
}
END_TEST

/* In a test's child: one raw GET /v1/who on the socket, the whole answer
 * into buf (NUL-terminated). Exits 11/12 when it cannot ask. */
static void
raw_who(char *buf, size_t size)
{
	static const char req[] = "GET /v1/who HTTP/1.0\r\nHost: x\r\n\r\n";
	struct sockaddr_un sun;
	size_t len = 0;
	ssize_t n;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, sock, strlen(sock));
	if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) == -1 ||
	    connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1)
		_exit(11);
	if (write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1))
		_exit(12);
	while (len < size - 1 &&
	    (n = read(fd, buf + len, size - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	close(fd);
}

/* Child of peer_credentials_other_user: as uid/gid 65534, one raw request.
 * Exit 0 only when the server named this uid and pid. */
static void
who_as_nobody(void)
{
	char buf[2048], want[64];

	/* A bound on a broken server, not a wait: nothing sleeps. */
	alarm(60);
	if (setgroups(0, NULL) == -1 || setgid(65534) == -1 ||
	    setuid(65534) == -1 || getuid() != 65534)
		_exit(10);
	raw_who(buf, sizeof(buf));
	if (strncmp(buf, "HTTP/1.", 7) != 0 || strstr(buf, " 200 ") == NULL)
		_exit(13);
	if (strstr(buf, "\"uid\":65534") == NULL)
		_exit(14);
	snprintf(want, sizeof(want), "\"pid\":%ld", (long)getpid());
	_exit(strstr(buf, want) != NULL ? 0 : 15);
}

/* Another user on the same socket is told apart: the uid is what it is,
 * not what the process might claim. */
START_TEST(peer_credentials_other_user)
{
	char path[256];
	int status;
	pid_t pid;

	/* Let uid 65534 reach the socket (the test's directories are 0700
	 * and the socket 0660). */
	ck_assert_int_eq(chmod(tdir, 0755), 0);
	snprintf(path, sizeof(path), "%s/run", tdir);
	ck_assert_int_eq(chmod(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/run/sub", tdir);
	ck_assert_int_eq(chmod(path, 0755), 0);
	ck_assert_int_eq(chmod(sock, 0666), 0);
	if (getuid() != 0)
		return;		/* setuid needs root; the self test covers
				   the rest */
	ck_assert_int_ge(pid = fork(), 0);
	if (pid == 0)
		who_as_nobody();
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "child status %d", status);
}
END_TEST


/* Child of peer_check_refuses: one raw request from a new network
 * namespace (as `sluice exec` puts a command in a sandbox's), with the
 * same files and uid. Exit 0 only when it was refused with 403
 * "from_sandbox"; 20 when unshare is not permitted here. */
static void
who_from_other_netns(void)
{
	char buf[2048];

	alarm(60);	/* a bound on a broken server, not a wait */
	if (unshare(CLONE_NEWNET) == -1)
		_exit(20);
	raw_who(buf, sizeof(buf));
	if (strncmp(buf, "HTTP/1.", 7) != 0 || strstr(buf, " 403 ") == NULL)
		_exit(13);
	_exit(strstr(buf, "\"from_sandbox\"") != NULL ? 0 : 14);
}

/* A caller the peer check refuses (here: one in another network
 * namespace, as a command started in a sandbox with the host's files) is
 * refused whatever it asks, before any handler; the same request from
 * this namespace is answered. */
START_TEST(peer_check_refuses)
{
	struct resp r;
	int status;
	pid_t pid;

	get("/v1/who", &r);
	ck_assert_int_eq(r.status, 200);
	resp_free(&r);
	if (getuid() != 0)
		return;		/* unshare needs root */
	ck_assert_int_ge(pid = fork(), 0);
	if (pid == 0)
		who_from_other_netns();
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "child status %d", status);
}
END_TEST

static Suite *
ctl_suite(void)
{
	Suite *s = suite_create("ctl");
	TCase *core = tcase_create("Core");
	TCase *lim = tcase_create("Limits");

	tcase_add_checked_fixture(core, setup, teardown);
	tcase_set_timeout(core, 120);
	tcase_add_test(core, route_with_param_and_query);
	tcase_add_test(core, route_two_params);
	tcase_add_loop_test(core, odd_path_params, 0,
	    sizeof(odd_ids) / sizeof(odd_ids[0]));
	tcase_add_test(core, query_nul_not_cut);
	tcase_add_test(core, body_reaches_handler);
	tcase_add_test(core, empty_body_is_null);
	tcase_add_test(core, handler_without_reply_is_500);
	tcase_add_test(core, second_reply_refused);
	tcase_add_test(core, null_body_is_500);
	tcase_add_test(core, parked_client_gone);
	tcase_add_test(core, suspended_request_answered_later);
	tcase_add_test(core, parked_request_cancelled_on_free);
	tcase_add_test(core, counters_and_metrics);
	tcase_add_test(core, socket_mode_and_removal);
	tcase_add_test(core, free_null);
	tcase_add_test(core, peer_credentials_self);
	tcase_add_test(core, peer_credentials_other_user);
	tcase_add_test(core, peer_check_refuses);
	tcase_add_test(core, refused_hook_only_for_ctl_refusals);
	suite_add_tcase(s, core);

	tcase_add_checked_fixture(lim, setup, teardown);
	tcase_set_timeout(lim, 120);
	tcase_add_test(lim, unknown_path_404);
	tcase_add_test(lim, wrong_method_405_with_allow);
	tcase_add_loop_test(lim, malformed_json_400, 0,
	    sizeof(bad_json) / sizeof(bad_json[0]));
	tcase_add_test(lim, deep_nesting_400);
	tcase_add_test(lim, body_cap_boundary);
	tcase_add_test(lim, oversized_body_413);
	tcase_add_test(lim, bad_content_length_413);
	tcase_add_loop_test(lim, refused_body_drain_bounded, 0, 2);
	tcase_add_loop_test(lim, wrong_content_type_415, 0,
	    sizeof(bad_types) / sizeof(bad_types[0]));
	tcase_add_test(lim, route_registration_errors);
	tcase_add_test(lim, listen_refuses_live_and_foreign);
	tcase_add_test(lim, listen_replaces_stale_socket);
	suite_add_tcase(s, lim);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	sr = srunner_create(ctl_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	curl_global_cleanup();
	return failed == 0 ? 0 : 1;
}
