/*
 * sink.h: a sink's state, shared by the files that make up the SOC feed
 * (audit/sink*.c) and by nobody else. A sink is one object -- its cursor,
 * its shipper thread, one transport -- split by concern across files: the
 * loop and the cursor (sink_loop.c) read a batch (sink_batch.c) and hand it
 * to the transport of the sink's type (sink_file.c, sink_syslog.c,
 * sink_http.c), which all see struct aud_sink.
 */
#ifndef SLUICE_AUDIT_SINK_H
#define SLUICE_AUDIT_SINK_H

#include <pthread.h>
#include <stdatomic.h>

#include <curl/curl.h>

#include "audit/priv.h"

/* The longest bearer or HEC token a sink reads and sends. */
#define SINK_TOKEN_MAX		4096

enum { TR_UNIX = 1, TR_UDP, TR_TCP };

struct aud_sk_item {
	int		 ckpt;		/* 1: a checkpoint, seq is its size */
	uint64_t	 seq;
	int64_t		 ts_ns;
	int		 sev;		/* syslog severity */
	char		 msgid[33];
	char		 origin[256];
	char		 hash[2 * AUD_HASH_LEN + 1];
	char		*body;		/* one JSON line, no newline */
	size_t		 blen;
	json_t		*ev;		/* the same event as an object */
};

struct aud_sk_batch {
	struct aud_sk_item	*it;
	size_t		 n, cap;
	size_t		 nrec, nck;
	uint64_t	 next;		/* cursor after an ack */
	uint64_t	 ck_next;	/* newest checkpoint size after an ack */
};

struct aud_sink {
	char		 name[33];
	char		 ckname[40];
	int		 type, format, hec;
	char		*target;
	char		*token;
	uint64_t	 lag_alert;
	unsigned	 batch_max, timeout_ms, bo_min, bo_max, poll_ms;

	/* Owned by the shipper (or by aud_sink_ship's caller). */
	sqlite3		*rd, *wr;
	sqlite3_stmt	*q_rec, *q_ck, *q_head, *q_upd;
	uint64_t	 ck_next;
	int		 fd;		/* syslog connection */
	int		 dir_synced;	/* file: its directory entry is durable */
	int		 tr;
	char		 host[256];
	char		 addr[256];	/* syslog host or unix path */
	char		 port[16];
	CURL		*curl;
	struct curl_slist *hdrs;
	char		 hostname[256];
	uint64_t	 rnd;
	int		 alerted;

	const struct aud_sink_hooks *hooks;
	struct aud_sink_hooks hooks_copy;

	pthread_t	 thr;
	int		 running;
	atomic_int	 stopping;
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	int		 kicked;
	struct aud_sink_stats st;	/* under mu */
};

/* ---- the cursor and the loop (audit/sink_loop.c) ---- */
/* aud_sk_now_ms: CLOCK_MONOTONIC in milliseconds. */
int64_t	aud_sk_now_ms(void);
/* aud_sk_refresh_head: reads the log's head, for the lag. */
void	aud_sk_refresh_head(struct aud_sink *s);

/* ---- reading and formatting (audit/sink_batch.c) ---- */
/* aud_sk_load_batch: the next batch from the cursor, records and the
 * checkpoints they complete, formatted. 0 with b filled (b->n == 0:
 * nothing to do), or -1 with a message. */
int	aud_sk_load_batch(struct aud_sink *s, struct aud_sk_batch *b, char *err,
	    size_t errlen);
/* aud_sk_batch_clear: frees b's items and zeroes it. */
void	aud_sk_batch_clear(struct aud_sk_batch *b);

/* ---- transports: 0 only once the receiver acknowledged the whole batch,
 * else -1 with errno and a message ---- */
/* aud_sk_send_file: appends b to the file and fsyncs it (sink_file.c). */
int	aud_sk_send_file(struct aud_sink *s, struct aud_sk_batch *b, char *err,
	    size_t errlen);
/* aud_sk_send_syslog: one RFC 5424 message per item (sink_syslog.c). */
int	aud_sk_send_syslog(struct aud_sink *s, struct aud_sk_batch *b,
	    char *err, size_t errlen);
/* aud_sk_send_webhook: one POST of NDJSON or HEC events (sink_http.c). */
int	aud_sk_send_webhook(struct aud_sink *s, struct aud_sk_batch *b,
	    char *err, size_t errlen);
/* aud_sk_parse_syslog: sets s's transport and address from a syslog
 * target. 0, or -1 with a message. */
int	aud_sk_parse_syslog(struct aud_sink *s, const char *t, char *err,
	    size_t errlen);
/* aud_sk_sock_close: closes the syslog connection, if any. */
void	aud_sk_sock_close(struct aud_sink *s);

#endif /* SLUICE_AUDIT_SINK_H */
