# Sluice build. Wireguard-tools' shape: pkg-config for every library, quiet
# lines unless V=1, dependency files, PREFIX/DESTDIR for install.
#
#   make            build/sluiced and build/sluice (optimised, -Werror)
#   make test       deps, cppcheck, ASan+UBSan build, unit suites and
#                   end-to-end scenarios, then memcheck over the unit suites
#   make demo       the guided demo (examples/demo/)
#   make bench      benchmarks against the anchors (tests/bench/)
#   make lint       cppcheck over every C file (part of make test)
#   make valgrind   unit suites and fuzz targets under memcheck (in make test)
#
# Module objects are grouped so that a unit suite links only the module it
# tests (check_policy* -> policy/, check_audit* -> audit/, check_ns*/check_fw*
# -> netns/, check_privsep* -> gateway/privsep/ with the loop and the log
# it runs on); anything else links every library object of the daemon. gateway/privsep/ is part of the daemon (in
# GW_OBJ with the rest of gateway/), never of the CLI.
#
# The CLI (gateway/cli/) is a room of its own: build/sluice links its own
# objects and the module files it calls (CLI_OBJ below), never the daemon's
# (the rest of gateway/), and only the libraries those need (CLI_PKGS).

PREFIX  ?= /usr/local
DESTDIR ?=
CC      ?= cc
PKGS    := libnftnl libmnl libmicrohttpd jansson yaml-0.1 libpcre2-8 libcrypto \
           sqlite3 libcurl ldns libseccomp libpq
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c17 -D_GNU_SOURCE -Wall -Wextra -Werror -MMD -MP -I. \
           $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS  += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -lm
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null)

ifeq ($(SAN),1)
B       ?= build/asan
CFLAGS  += -O1 -fsanitize=address,undefined -fno-omit-frame-pointer \
           -fno-sanitize-recover=all
LDFLAGS += -fsanitize=address,undefined
else
B       ?= build
endif

ifeq ($(V),1)
Q :=
qcc = 
qld =
else
Q := @
qcc = @printf '  CC      %s\n' $<;
qld = @printf '  LD      %s\n' $@;
endif

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))

GW_MAINS   := gateway/sluiced.c
POLICY_OBJ := $(call obj,$(wildcard policy/*.c))
AUDIT_OBJ  := $(call obj,$(wildcard audit/*.c))
NETNS_OBJ  := $(call obj,$(wildcard netns/*.c))
# The fleet's store library: the daemon links it with the rest of gateway/,
# the CLI and check_fleet on their own.
FLEET_SRC  := gateway/fleet/aq.c gateway/fleet/budget.c gateway/fleet/pg.c gateway/fleet/wload.c
FLEET_OBJ  := $(call obj,$(FLEET_SRC))
PRIV_OBJ   := $(call obj,$(wildcard gateway/privsep/*.c))
GW_OBJ     := $(call obj,$(filter-out $(GW_MAINS) gateway/cli/% gateway/cni/% $(FLEET_SRC),$(wildcard gateway/*.c gateway/*/*.c)))
LIB_OBJ    := $(GW_OBJ) $(POLICY_OBJ) $(AUDIT_OBJ) $(NETNS_OBJ) $(FLEET_OBJ)

# The CLI, file by file, so that what it carries is a decision in review:
# of policy/ the loader and the deciders (`policy check|explain`; not the
# pins nor redaction), of audit/ the readers and the verifier (the offline
# `audit` commands; not the writer, the reservations nor the sinks), of
# netns/ only what `exec` and `run` need to enter a sandbox (ns_enter.c,
# ns_cgroup.c;
# ns.c and its rtnetlink half for the id syntax and the error helper), not
# the nftables half (fw*.c, ct.c): libmnl, not libnftnl nor libmicrohttpd.
# A call into a file left out fails the link; it never pulls in the daemon.
CLI_OBJ    := $(call obj,$(wildcard gateway/cli/*.c) \
              policy/check.c policy/classify.c policy/config.c policy/decide.c \
              policy/egress_budget.c policy/errors.c policy/load.c \
              policy/mcpres.c policy/reason.c \
              policy/resources.c policy/srvreq.c policy/yaml.c \
              audit/canon.c audit/canon_check.c audit/canon_parse.c \
              audit/ckpt.c audit/merkle.c audit/ocsf.c \
              audit/store.c audit/verify.c audit/verify_ckpt.c \
              audit/verify_proof.c audit/verify_ra.c audit/verify_scan.c \
              netns/ns_enter.c netns/ns_cgroup.c netns/ns.c netns/ns_rtnl.c \
              gateway/fleet/pg.c gateway/fleet/wload.c)
CLI_PKGS   := libmnl jansson yaml-0.1 libpcre2-8 libcrypto sqlite3 libcurl libpq
CLI_LDLIBS := $(shell pkg-config --libs $(CLI_PKGS) 2>/dev/null) -lpthread -lm

# The CNI plugin (gateway/cni/) is another room: build/sluice-cni is run by a
# container runtime, as root, on a pod's config, so it links its own files
# and the CLI's HTTP client to reach sluiced, and nothing else.
CNI_CONF_OBJ := $(call obj,gateway/cni/cni_conf.c)
CNI_OBJ    := $(call obj,$(wildcard gateway/cni/*.c) gateway/cli/cli_http.c)
CNI_LDLIBS := $(shell pkg-config --libs jansson libcurl 2>/dev/null)
CNI_BIN_DIR ?= $(PREFIX)/lib/cni

UNIT_SRC   := $(wildcard tests/unit/check_*.c)
UNIT_BIN   := $(patsubst tests/unit/%.c,$(B)/tests/%,$(UNIT_SRC))
FUZZ_SRC   := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN   := $(patsubst tests/fuzz/%.c,$(B)/fuzz/%,$(FUZZ_SRC))

# Fuzz targets link like unit suites: fuzz_addr*/fuzz_policy* -> policy/,
# fuzz_audit* -> audit/, anything else every library object. The gcc build
# adds tests/fuzz/driver.c as main(); FUZZ_ENGINE=libfuzzer (clang) uses
# libFuzzer's main instead.
fuzz_deps = $(strip \
  $(if $(filter fuzz_addr% fuzz_policy%,$(1)),$(POLICY_OBJ), \
  $(if $(filter fuzz_audit%,$(1)),$(AUDIT_OBJ), \
  $(if $(filter fuzz_cni%,$(1)),$(CNI_CONF_OBJ) $(POLICY_OBJ), \
  $(LIB_OBJ)))))
ifeq ($(FUZZ_ENGINE),libfuzzer)
CFLAGS  += -fsanitize=fuzzer-no-link
FUZZ_MAIN :=
FUZZ_LDFLAGS := -fsanitize=fuzzer
else
FUZZ_MAIN := $(B)/obj/tests/fuzz/driver.o
FUZZ_LDFLAGS :=
endif

unit_deps = $(strip \
  $(if $(filter check_policy%,$(1)),$(POLICY_OBJ), \
  $(if $(filter check_audit%,$(1)),$(AUDIT_OBJ), \
  $(if $(filter check_ns% check_fw%,$(1)),$(NETNS_OBJ), \
  $(if $(filter check_privsep%,$(1)),$(PRIV_OBJ) $(POLICY_OBJ) $(call obj,gateway/ev.c gateway/log.c), \
  $(if $(filter check_cni%,$(1)),$(CNI_CONF_OBJ), \
  $(if $(filter check_fleet%,$(1)),$(FLEET_OBJ) $(POLICY_OBJ), \
  $(LIB_OBJ))))))))

.PHONY: all deps test unit e2e demo bench clean install fuzz fuzz-bins unit-bins \
        lint valgrind
all: $(B)/sluiced $(B)/sluice $(B)/sluice-cni

$(B)/sluiced: $(B)/obj/gateway/sluiced.o $(LIB_OBJ)
	$(qld)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/sluice: $(CLI_OBJ)
	$(qld)$(CC) $(LDFLAGS) -o $@ $^ $(CLI_LDLIBS)

$(B)/sluice-cni: $(CNI_OBJ)
	$(qld)$(CC) $(LDFLAGS) -o $@ $^ $(CNI_LDLIBS)

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(qcc)$(CC) $(CFLAGS) -c -o $@ $<

.SECONDARY:
.SECONDEXPANSION:
$(B)/tests/check_%: $(B)/obj/tests/unit/check_%.o $$(call unit_deps,check_$$*)
	@mkdir -p $(dir $@)
	$(qld)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(CHECK_LIBS)

# check_policy_oom fails the loaders' allocations one at a time: it wraps
# the allocators policy/ calls (tests/unit/check_policy_oom.c).
$(B)/tests/check_policy_oom: LDFLAGS += -Wl,--wrap=malloc,--wrap=calloc,--wrap=reallocarray,--wrap=strdup,--wrap=strndup,--wrap=asprintf

# check_sbx_kernel makes ns_exists and ns_delete fail on demand (a passing
# kernel error at restart, a rollback that cannot remove what it made).
$(B)/tests/check_sbx_kernel: LDFLAGS += -Wl,--wrap=ns_exists,--wrap=ns_delete

# check_audit_oom fails the audit writer's submit allocations one at a time,
# and a COMMIT (tests/unit/check_audit_oom.c).
$(B)/tests/check_audit_oom: LDFLAGS += -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=sqlite3_exec

unit-bins: $(UNIT_BIN)

$(B)/fuzz/fuzz_%: $(B)/obj/tests/fuzz/fuzz_%.o $(FUZZ_MAIN) $$(call fuzz_deps,fuzz_$$*)
	@mkdir -p $(dir $@)
	$(qld)$(CC) $(LDFLAGS) $(FUZZ_LDFLAGS) -o $@ $^ $(LDLIBS)

fuzz-bins: $(FUZZ_BIN)

# libFuzzer builds of the same targets (needs clang); see tests/fuzz/README.md.
fuzz:
	$(Q)$(MAKE) --no-print-directory CC=clang SAN=1 B=build/libfuzzer \
	    FUZZ_ENGINE=libfuzzer fuzz-bins

deps:
	$(Q)tests/deps.sh

# The test build is separate (build/asan) so `make` and `make test` never
# mix objects built with different flags. Lint first: it is the fastest to
# fail; memcheck last, over the suites it can run (see valgrind below).
test: deps
	$(Q)$(MAKE) --no-print-directory lint
	$(Q)$(MAKE) --no-print-directory SAN=1 all unit-bins fuzz-bins
	$(Q)$(MAKE) --no-print-directory all
	$(Q)tests/run.sh all build/asan
	$(Q)$(MAKE) --no-print-directory valgrind

# cppcheck's findings fail the build; tests/lint/ holds its macro
# definitions and the suppressions, each with its reason.
LINT_DIRS := policy audit netns gateway tests/unit tests/fuzz tests/bench
lint:
	$(Q)echo "== lint: cppcheck"
	$(Q)cppcheck -q -j2 --std=c11 -D_GNU_SOURCE -I. \
	    --enable=warning,portability,performance --inline-suppr \
	    --library=posix --library=tests/lint/sluice.cfg \
	    --suppressions-list=tests/lint/suppressions.txt \
	    --error-exitcode=1 $(LINT_DIRS)
	$(Q)echo "== lint: no tracker issue or session numbers in the tree"
	$(Q)tests/lint/no_tracker.sh
	$(Q)echo "== lint: README performance table against tests/bench/RESULTS.md"
	$(Q)python3 tests/bench/readme_table.py --check tests/bench/RESULTS.md README.md

# Memcheck over the unit suites that need no kernel state and the fuzz
# targets, built without sanitizers (build/valgrind): what ASan cannot see,
# such as reads of uninitialised memory. See tests/lint/valgrind.sh.
valgrind:
	$(Q)$(MAKE) --no-print-directory B=build/valgrind unit-bins fuzz-bins
	$(Q)tests/lint/valgrind.sh build/valgrind

unit:
	$(Q)$(MAKE) --no-print-directory SAN=1 all unit-bins fuzz-bins
	$(Q)tests/run.sh unit build/asan

e2e:
	$(Q)$(MAKE) --no-print-directory SAN=1 all
	$(Q)tests/run.sh e2e build/asan

demo: deps all
	$(Q)if [ -x examples/demo/run.sh ]; then examples/demo/run.sh $(DEMO_ARGS); \
	else echo "make demo: examples/demo/run.sh is missing"; fi

bench: deps all
	$(Q)if [ -x tests/bench/run.sh ]; then tests/bench/run.sh; \
	else echo "make bench: tests/bench/run.sh is missing"; fi

install: all
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(B)/sluiced $(DESTDIR)$(PREFIX)/sbin/sluiced
	install -m 0755 $(B)/sluice $(DESTDIR)$(PREFIX)/bin/sluice
	install -d $(DESTDIR)$(CNI_BIN_DIR)
	install -m 0755 $(B)/sluice-cni $(DESTDIR)$(CNI_BIN_DIR)/sluice-cni
	install -d $(DESTDIR)$(PREFIX)/share/sluice/policies
	install -m 0644 examples/sluice.yaml $(DESTDIR)$(PREFIX)/share/sluice/sluice.yaml
	install -m 0644 examples/policies/*.yaml $(DESTDIR)$(PREFIX)/share/sluice/policies/

clean:
	rm -rf build

-include $(shell find build $(B) -name '*.d' 2>/dev/null | sort -u)
