/*
 * internal: what the policy/ files share and nobody else sees.
 *
 * The loaders (policy files and the daemon config) parse YAML once into a
 * small tree that keeps libyaml's positions, then walk it against the
 * schema. Keeping the tree private lets the walkers report every error with
 * FILE:LINE:COL without exposing libyaml to callers, and the compiled policy
 * structs live here so decide.c can read what load.c built.
 */
#ifndef SLUICE_POLICY_INTERNAL_H
#define SLUICE_POLICY_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "policy/policy.h"

#define POL_MAX_FILE	(1024 * 1024)
#define POL_MAX_DEPTH	32
#define POL_MAX_ERRORS	50
#define POL_MAX_NODES	100000

enum ynode_kind { Y_SCALAR = 1, Y_MAP, Y_SEQ };

/* A parsed YAML node. Maps keep keys and values in parallel arrays; keys are
 * always scalars (the parser refuses others). */
struct ynode {
	enum ynode_kind	  kind;
	unsigned	  line, col;	/* 1-based */
	char		 *str;		/* Y_SCALAR */
	bool		  plain;	/* unquoted scalar */
	size_t		  n;
	struct ynode	**keys;		/* Y_MAP */
	struct ynode	**vals;		/* Y_MAP values, Y_SEQ items */
};

/* yaml_load_file: read path (at most 1 MiB, UTF-8) and parse one document.
 * Anchors, aliases, tags, non-scalar keys, duplicate keys and nesting
 * deeper than POL_MAX_DEPTH are errors. digest (may be NULL, 65 bytes) gets
 * the hex SHA-256 of the bytes. Returns the root (caller frees with
 * ynode_free) or NULL with errors in errs. An empty file yields an error. */
struct ynode	*yaml_load_file(const char *path, struct pol_errors *errs,
		    char *digest);
/* yaml_read_file: the bytes of path (a regular file of at most 1 MiB) into
 * *out (caller frees). 0, or -1 with the error in errs. */
int		 yaml_read_file(const char *path, unsigned char **out,
		    size_t *outlen, struct pol_errors *errs);
/* yaml_digest: hex SHA-256 of buf into digest (65 bytes). */
void		 yaml_digest(const unsigned char *buf, size_t len,
		    char *digest);
/* yaml_load_buf: the same over a buffer; name is used in messages. */
struct ynode	*yaml_load_buf(const char *name, const unsigned char *buf,
		    size_t len, struct pol_errors *errs);
void		 ynode_free(struct ynode *n);

/* A schema walk: the file name and where errors go. */
struct ywalk {
	const char		*file;
	struct pol_errors	*errs;
	size_t			 nerr;	/* errors this walk added */
};

void	 yerr(struct ywalk *w, const struct ynode *n, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));
/* ynomem: the error for an allocation that failed while reading n. Every
 * such failure must be an error: a loader that carried on would hand back a
 * policy or config missing the ports, rule or limit that n holds. Returns
 * -1, for use in conditions. */
int	 ynomem(struct ywalk *w, const struct ynode *n);
const char *ykind_name(enum ynode_kind k);
/* ycheck_keys: every key of map must be in allowed (NULL-terminated);
 * others are reported as unknown in where. Returns false if n is not a
 * map (reported). */
bool	 ycheck_map(struct ywalk *w, const struct ynode *n, const char *where,
	    const char *const *allowed);
const struct ynode *yget(const struct ynode *map, const char *key);
bool	 yis(struct ywalk *w, const struct ynode *n, enum ynode_kind k,
	    const char *what);
/* Scalar converters: 0 on success, -1 after reporting an error at n. */
int	 ystr(struct ywalk *w, const struct ynode *n, char **out);
int	 ybool(struct ywalk *w, const struct ynode *n, bool *out);
int	 yuint(struct ywalk *w, const struct ynode *n, uint64_t max,
	    uint64_t *out);
int	 yduration(struct ywalk *w, const struct ynode *n, uint64_t *secs);
int	 ysize(struct ywalk *w, const struct ynode *n, uint64_t *bytes);
/* ystrlist: a sequence of strings into *out (caller frees with strv_free
 * *out, *nout, even on error); a single string is not accepted. 0 or -1
 * after reporting. */
int	 ystrlist(struct ywalk *w, const struct ynode *n, const char *what,
	    char ***out, size_t *nout);
/* name_ok: s is [a-z0-9][a-z0-9_-]* and at most maxlen long. */
bool	 name_ok(const char *s, size_t maxlen);
/* strv_free: frees v[0..n) and v (NULL is a no-op). */
void	 strv_free(char **v, size_t n);
/* Pure parsers behind the converters (0 or -1). */
int	 pol_parse_duration(const char *s, uint64_t *secs);
int	 pol_parse_size(const char *s, uint64_t *bytes);
int	 pol_parse_uint(const char *s, uint64_t max, uint64_t *out);

/* Host patterns: "name.example" or "*.name.example", stored lower case
 * without the "*." */
struct hostpat {
	char	*name;
	bool	 wildcard;
};
/* hostpat_parse: -1 and a reason in *why if s is not a valid pattern. */
int	 hostpat_parse(const char *s, struct hostpat *out, const char **why);
bool	 hostpat_match(const struct hostpat *hp, const char *name, size_t len);
/* dns_name_valid: a DNS name (letters, digits, '-', '_', labels 1..63,
 * total <= 253, no trailing dot). */
bool	 dns_name_valid(const char *s, size_t len);

struct portrange {
	uint16_t	lo, hi;
};

enum erule_kind { ER_HOST = 1, ER_CIDR };

struct erule {
	enum erule_kind	 kind;
	struct hostpat	 host;
	struct pol_cidr	 cidr;
	uint8_t		 proto;		/* 0 = any (deny rules only) */
	struct portrange *ports;
	size_t		 nports;	/* 0 = every port */
	int		 check;		/* -1: by port, else enum pol_check */
	int		 budget;	/* -1: none, else its id (p->rbudgets) */
	char		 name[40];	/* "egress.allow[3]" */
};

enum arg_type { AT_ANY = 0, AT_STRING, AT_INTEGER, AT_NUMBER, AT_BOOLEAN,
	AT_ARRAY, AT_OBJECT };

struct argc_rule {
	char		 *name;
	enum arg_type	  type;
	bool		  has_max_length;
	uint64_t	  max_length;
	bool		  has_min, has_max;
	int64_t		  min, max;
	char		**enumv;
	size_t		  nenum;
	pcre2_code	 *re;
	char		 *path_prefix;
	struct hostpat	 *url_hosts;
	size_t		  nurl_hosts;
};

enum tool_decision { TD_ALLOW = 1, TD_DENY, TD_ASK };

struct trule {
	char		 *server;
	char		 *tool;		/* "*" = any */
	enum tool_decision decision;
	char		**subjects;
	size_t		  nsubjects;
	char		**label_keys, **label_values;
	size_t		  nlabels;
	char		 *pin;		/* "sha256:..." or NULL */
	int		  classification; /* index into pol_class_names */
	uint64_t	  cost;
	size_t		 *budgets;	/* indexes into policy budgets */
	size_t		  nbudgets;
	struct argc_rule *args;
	size_t		  nargs;
	char		**required;
	size_t		  nrequired;
	bool		  allow_other_args;
	char		  name[40];
};

/* A rule of mcp.resources (policy/mcpres.c): which URIs of a server a
 * sandbox may list, read and subscribe to. */
struct rrule {
	char		 *server;
	char		 *uri;		/* fnmatch glob, no flags; "*" = any */
	char		**schemes;	/* lower case; none = any scheme */
	size_t		  nschemes;
	enum tool_decision decision;
	int		  classification;
	uint64_t	  cost;
	size_t		 *budgets;
	size_t		  nbudgets;
	uint64_t	  max_bytes;	/* 0: mcp.results.max_bytes */
	char		  name[40];	/* "mcp.resources[2]" */
};

struct budget {
	char			*name;
	enum pol_budget_scope	 scope;
	uint64_t		 calls, cost, result_bytes, window_s;
};

struct pol_policy {
	char		 *name;
	char		 *description;
	char		 *path;		/* as given to pol_policy_load_buf */
	char		 *src;		/* its bytes (srclen, not terminated) */
	size_t		  srclen;
	char		  digest[65];
	struct erule	 *allow, *deny, *keep;
	size_t		  nallow, ndeny, nkeep;
	struct pol_net_rule *net_allow, *net_deny, *net_keep;
	size_t		  nnet_allow, nnet_deny, nnet_keep;
	uint64_t	  budget_bytes;
	struct pol_rule_budget rbudgets[POL_MAX_RULE_BUDGETS];
	size_t		  nrbudgets;
	uint64_t	  taint_budget;
	/* dns */
	uint16_t	 *dns_types;
	size_t		  ndns_types;
	struct pol_dns_limits limits;
	/* mcp */
	uint64_t	  approval_timeout_s;
	bool		  audit_digest;
	int		  taint_level;
	uint64_t	  result_max_bytes;
	char		**redact;
	size_t		  nredact;
	pcre2_code	**redact_re;
	size_t		  nredact_re;
	struct budget	 *budgets;
	size_t		  nbudgets;
	struct trule	 *tools;
	size_t		  ntools;
	struct trule	 *prompts;	/* mcp.prompts: tool rules by name */
	size_t		  nprompts;
	struct rrule	 *rres;		/* mcp.resources */
	size_t		  nrres;
	pcre2_match_context *mctx;
	struct sreq	 *sreqs;	/* mcp.server_requests */
	size_t		  nsreqs;
	struct pol_resources resources;
};

/* ybudget_key: the `budget:` and `window:` of rule map n into r->budget
 * (-1 for none) and p's budget table, every error reported where it is
 * written; budgets: n is an egress.allow rule (policy/egress_budget.c). */
void	 ybudget_key(struct ywalk *w, struct pol_policy *p,
	    const struct ynode *n, struct erule *r, bool budgets);

/* One entry of mcp.server_requests (policy/srvreq.c). */
struct sreq {
	char			*server;	/* a server name or "*" */
	enum pol_verdict	 verdict[POL_SREQ_NKINDS];
};

/* The policy loader's walk: where errors go, the config server names are
 * checked against, and the policy being built. */
struct lctx {
	struct ywalk		 w;
	const struct pol_config	*cfg;
	struct pol_policy	*p;
};

/* ytool: one rule of mcp.tools (prompt false) or mcp.prompts (prompt
 * true: keyed "prompt", no pin) into *t (policy/load.c). */
void	 ytool(struct lctx *c, const struct ynode *n, const char *where,
	    struct trule *t, bool prompt);
/* ydecision: a rule's required `decision:` (allow | deny | ask) into
 * *out; yclassification: its optional `classification:` (0, public, when
 * absent). Errors reported at n's keys. */
void	 ydecision(struct lctx *c, const struct ynode *n, const char *where,
	    enum tool_decision *out);
void	 yclassification(struct lctx *c, const struct ynode *n, int *out);
/* ybudget_refs: a rule's `budgets:` list of budget names into indexes
 * (*out, caller frees, at most POL_MAX_RESERVATIONS), errors reported. */
void	 ybudget_refs(struct lctx *c, const struct ynode *v, size_t **out,
	    size_t *nout);
/* ymcpres: mcp.resources and mcp.prompts of the mcp map n, after its
 * budgets (policy/mcpres.c); rmcpres_free frees what it built. */
void	 ymcpres(struct lctx *c, const struct ynode *n);
void	 mcpres_free(struct pol_policy *p);
/* ysrvreq: mcp.server_requests of the mcp map n (policy/srvreq.c);
 * srvreq_free frees what it built. */
void	 ysrvreq(struct lctx *c, const struct ynode *n);
void	 srvreq_free(struct pol_policy *p);
/* trule_free: what one tool or prompt rule holds (policy/load.c). */
void	 trule_free(struct trule *t);

/* pol_budgets_reserve: check the budgets idx[0..n) of a rule whose call
 * costs cost against the use in uses, filling out->res; -1 (out denied
 * "budget_exhausted" by rule, noun in the message) when one is used up.
 * pol_verdict_set: out allowed (or ask) by rule. (policy/decide.c) */
int	 pol_budgets_reserve(const struct pol_policy *p, const size_t *idx,
	    size_t n, uint64_t cost, const struct pol_budget_use *uses,
	    size_t nuses, struct pol_tool_decision *out, const char *rule,
	    const char *noun);
void	 pol_verdict_set(struct pol_tool_decision *out, const char *rule,
	    bool ask);

/* yresources: the `resources:` map n into *out, every error reported at
 * its key or value (policy/resources.c). */
void	 yresources(struct ywalk *w, const struct ynode *n,
	    struct pol_resources *out);

extern const char *const pol_class_names[];	/* public..secret, NULL */
int	 pol_class_index(const char *s);

/* pol_regex_compile: PCRE2 (UTF) compile; NULL and a message in err. */
pcre2_code *pol_regex_compile(const char *pat, char *err, size_t errlen);
/* pol_arg_regex_compile: the same for argument constraints, where `$`
 * means the very end of the value (PCRE2_DOLLAR_ENDONLY), never "before a
 * final newline". */
pcre2_code *pol_arg_regex_compile(const char *pat, char *err,
	    size_t errlen);
/* pol_match_context: a match context with limits for untrusted subjects. */
pcre2_match_context *pol_match_context(void);

#endif /* SLUICE_POLICY_INTERNAL_H */
