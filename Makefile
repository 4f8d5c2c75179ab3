# pilot - a pilot-job system for Slurm clusters.  See README.md.
BUILD   ?= build
PREFIX  ?= /usr/local
CC      ?= cc
CSTD     = -std=c17 -D_GNU_SOURCE
WARN     = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wformat=2 -Wpointer-arith -Wwrite-strings -Wundef
OPT     ?= -O2 -g
PKGS     = libzmq libuv sqlite3 msgpack jansson yaml-0.1
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CPPFLAGS += -I. $(PKG_CFLAGS)
# pilotd's metrics server (daemon/metrics_http.c): only pilotd and what links
# its modules (LIBD) need it
MHD_CFLAGS := $(shell pkg-config --cflags libmicrohttpd 2>/dev/null)
MHD_LIBS   := $(shell pkg-config --libs libmicrohttpd 2>/dev/null)
CPPFLAGS += $(MHD_CFLAGS)
# -fPIC: the same objects go into the programs and into libpilot.so
# (lib/lib.mk); Debian builds PIE anyway, so the programs lose nothing.
# A section a function lets the library's link drop what it never
# calls (pl_fatal(), the log's writer: lib/lib.mk checks they are gone)
CFLAGS   += $(CSTD) $(WARN) $(OPT) -fPIC -ffunction-sections -fdata-sections
LDLIBS   += $(PKG_LIBS) -lslurm -lpthread -lm
ifdef WERROR
CFLAGS  += -Werror
endif
ifdef SANITIZE        # make SANITIZE=address,undefined
CFLAGS  += -fsanitize=$(SANITIZE) -fno-sanitize-recover=all \
           -fno-omit-frame-pointer
LDFLAGS += -fsanitize=$(SANITIZE)
endif

ifndef V
Q = @
QCC = @echo "  CC      $@";
QLD = @echo "  LD      $@";
QAR = @echo "  AR      $@";
endif

PROTO_SRC  := $(wildcard proto/*.c)
DAEMON_SRC := $(wildcard daemon/*.c)
# (agent/vetcheck*.c: pilot-vetcheck, a program of its own, agent/vetcheck.mk)
AGENT_SRC  := $(filter-out agent/vetcheck%,$(wildcard agent/*.c))
CLIENT_SRC := $(wildcard client/*.c)
UNIT_SRC   := $(wildcard tests/unit/test_*.c)

obj = $(patsubst %.c,$(BUILD)/%.o,$(1))
LIBPL   := $(BUILD)/libpl.a
# each program's modules without its main(), for the unit tests
LIBD    := $(BUILD)/libpilotd.a
LIBA    := $(BUILD)/libagent.a
LIBC    := $(BUILD)/libclient.a
BINS    := $(BUILD)/bin/pilotd $(BUILD)/bin/pilot-agent $(BUILD)/bin/pilot
UNITS   := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
# programs the e2e tests drive besides pilot's own (tests/tools/)
TOOLS   := $(patsubst tests/tools/%.c,$(BUILD)/tests/%,\
                      $(wildcard tests/tools/*.c))

# libFuzzer targets (tests/fuzz/fuzz_*.c, what each covers: the head of
# tests/fuzz/run.sh), built by clang with ASan and UBSan in their own
# directory; each runs FUZZ_SECONDS (0: only replay the corpus and the
# regression inputs), CHECK_FUZZ_SECONDS in 'check' (about 2 minutes in
# all).  FUZZ_TARGETS=fuzz_x runs only those.
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
CHECK_FUZZ_SECONDS ?= 17
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
# the fuzzers that run a program's modules, not libpl's alone
FUZZ_CLIENT  := fuzz_taskfile fuzz_reply
FUZZ_DAEMON  := fuzz_agentseq
FUZZ_BINS    := $(patsubst %,$(BUILD)/fuzz/%,$(FUZZ_TARGETS))
# (clang takes daemon/auth.c's table of two-line messages for a missing
# comma: -Wno-string-concatenation)
FUZZ_FLAGS    = CC=clang SANITIZE=fuzzer-no-link,address,undefined \
                OPT='-O1 -g -Wno-string-concatenation' WERROR=1

.PHONY: all test check soak check-e2e asan install clean cluster demo \
        demo-sbatch examples fuzz fuzz-bins fuzz-corpus bench
# the warm Python workers' script (python/pilot/_pyworker.py, in the
# client package's directory), where the agent looks for it: beside its
# program, BIN/../python/pilot/ (agent/pyw.h); only the script, the
# package itself is used from python/ (t1160) or installed (install-lib)
PYFILES := $(BUILD)/python/pilot/_pyworker.py
$(BUILD)/python/%.py: python/%.py
	@mkdir -p $(dir $@)
	$(Q)cp $< $@
all: $(BINS) $(PYFILES)

# libpilot and the Python package (lib/, python/)
include lib/lib.mk

# a change of flags rebuilds everything
FLAGS_NOW := $(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $(LDLIBS)
$(BUILD)/.flags: FORCE
	@mkdir -p $(BUILD)
	@echo '$(FLAGS_NOW)' | cmp -s - $@ || echo '$(FLAGS_NOW)' > $@
FORCE:

$(BUILD)/%.o: %.c $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(QCC)$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

$(LIBPL): $(call obj,$(PROTO_SRC))
	$(QAR)rm -f $@ && ar rcs $@ $^

$(LIBD): $(call obj,$(filter-out daemon/main.c,$(DAEMON_SRC)))
	$(QAR)rm -f $@ && ar rcs $@ $^
$(LIBA): $(call obj,$(filter-out agent/main.c,$(AGENT_SRC)))
	$(QAR)rm -f $@ && ar rcs $@ $^
$(LIBC): $(call obj,$(filter-out client/main.c,$(CLIENT_SRC))) \
         $(BUILD)/client/report_assets.o
	$(QAR)rm -f $@ && ar rcs $@ $^
# pilot report's script and style, kept as sources, in the binary
$(BUILD)/client/report_assets.o: client/report_assets.S client/report.js \
                                 client/report.css $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(QCC)$(CC) -c -o $@ $<

$(BUILD)/bin/pilotd: $(BUILD)/daemon/main.o $(LIBD) $(LIBPL)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(MHD_LIBS)
$(BUILD)/bin/pilot-agent: $(BUILD)/agent/main.o $(LIBA) $(LIBPL)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/bin/pilot: $(BUILD)/client/main.o $(LIBC) $(LIBPL)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
# a unit test test_<dir>_<module> links its program's modules and libpl
$(BUILD)/tests/test_proto_%: $(BUILD)/tests/unit/test_proto_%.o $(LIBPL)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/tests/test_daemon_%: $(BUILD)/tests/unit/test_daemon_%.o $(LIBD) \
                              $(LIBPL)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(MHD_LIBS)
$(BUILD)/tests/test_agent_%: $(BUILD)/tests/unit/test_agent_%.o $(LIBA) \
                             $(LIBPL)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/tests/test_client_%: $(BUILD)/tests/unit/test_client_%.o $(LIBC) \
                              $(LIBPL)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
# the tools, the corpus writer and the fuzzers: libpl alone (the wire is
# defined there and nowhere else)
$(BUILD)/tests/%: $(BUILD)/tests/tools/%.o $(LIBPL)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
# ... but watchends, a watch's client as pilot wait is one (client/sub.c)
$(BUILD)/tests/watchends: $(BUILD)/tests/tools/watchends.o $(LIBC) $(LIBPL)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/tests/mkcorpus: $(BUILD)/tests/fuzz/mkcorpus.o $(LIBPL)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/fuzz/%: $(BUILD)/tests/fuzz/%.o $(BUILD)/tests/fuzz/body.o $(LIBPL)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)
# ... but the CLI's readers (client/taskfile.c, the replies) and pilotd's
# agent handling (fuzz_agentseq) link their program's modules
$(patsubst %,$(BUILD)/fuzz/%,$(FUZZ_CLIENT)): $(BUILD)/fuzz/%: \
        $(BUILD)/tests/fuzz/%.o $(LIBC) $(LIBPL)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)
$(patsubst %,$(BUILD)/fuzz/%,$(FUZZ_DAEMON)): $(BUILD)/fuzz/%: \
        $(BUILD)/tests/fuzz/%.o $(LIBD) $(LIBPL)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS) $(MHD_LIBS)

# the pipeline demo's MPI stage (examples/pipeline/): MPI is opt-in, so
# 'all' does not build it; 'demo' and 'examples' do
MPICC    ?= mpicc
EXAMPLES := $(BUILD)/examples/prep $(BUILD)/examples/libprep.so
examples: $(EXAMPLES) worker
$(BUILD)/examples/prep: examples/pipeline/prep.c worker/pilot_fn.h \
                        $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(QLD)$(MPICC) -Iworker $(CFLAGS) -Werror $(LDFLAGS) -o $@ $< -lm
# the same prep as a pool function, prep_fn (make demo POOL=1); only it is
# exported, as in examples/pool/pool.mk
$(BUILD)/examples/libprep.so: examples/pipeline/prep.c worker/pilot_fn.h \
                              $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(QLD)$(MPICC) -Iworker $(CFLAGS) -Werror -fPIC -fvisibility=hidden \
	    $(LDFLAGS) -shared -o $@ $< -lm

include worker/worker.mk examples/pool/pool.mk

# the pool's worker comes with 'all' where MPI is (Open MPI's mpicc);
# 'check' needs it
HAVE_MPI := $(shell command -v $(MPICC) 2>/dev/null)
ifneq ($(HAVE_MPI),)
all: worker
install: install-worker
endif
include agent/vetcheck.mk

# the benchmark's helpers (bench/): the fork/exec limit, a bulk feeder
BENCH_BINS := $(BUILD)/bench/limit $(BUILD)/bench/feed
$(BUILD)/bench/limit: $(BUILD)/bench/limit.o
	$(QLD)$(CC) $(LDFLAGS) -o $@ $^
$(BUILD)/bench/feed: $(BUILD)/bench/feed.o $(LIBPL)
	$(QLD)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
# scenario 6's pool functions (stamp, noop) and the examples it runs
ifneq ($(HAVE_MPI),)
BENCH_BINS += $(BUILD)/bench/libpoolfn.so $(BUILD)/examples/libpoolex.so \
              $(BUILD)/examples/poolcheck
endif
$(BUILD)/bench/libpoolfn.so: bench/poolfn.c $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(QLD)$(MPICC) -Iworker $(CFLAGS) -Werror -shared -fPIC $(LDFLAGS) \
	    -o $@ $<

# every scenario of docs/PERFORMANCE.md (QUICK=1: small, under 2 minutes);
# not part of check
bench:
	$(MAKE) all $(BENCH_BINS)
	scripts/dev-cluster.sh status >/dev/null 2>&1 || scripts/dev-cluster.sh start
	PILOT_BIN=$(abspath $(BUILD)/bin) /usr/bin/python3 bench/bench.py \
	    --build $(abspath $(BUILD)) $(if $(QUICK),--quick)

# unit tests only: fast, no cluster
test: $(BINS) $(PYFILES) $(UNITS) $(TOOLS)
	prove -f -e '' $(UNITS)

# the fuzzers, FUZZ_SECONDS each (tests/fuzz/run.sh); fails on a finding
fuzz:
	$(MAKE) BUILD=$(FUZZ_BUILD) $(FUZZ_FLAGS) fuzz-bins
	tests/fuzz/run.sh $(FUZZ_BUILD)/fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)
fuzz-bins: $(FUZZ_BINS)
# keep the objects make reaches through a chain of pattern rules
.SECONDARY: $(call obj,$(wildcard tests/fuzz/*.c tests/tools/*.c))

# rewrite the seed corpus from tests/fuzz/mkcorpus.c
fuzz-corpus: $(BUILD)/tests/mkcorpus
	$(BUILD)/tests/mkcorpus tests/fuzz/corpus

# everything: packages, -Werror build, the dev cluster, unit and e2e tests
# kill -9 of pilotd (100) and agents (50) under a stream of tasks on the
# dev cluster, then the counts (not in check: about 15 minutes)
soak: all
	scripts/dev-cluster.sh status >/dev/null 2>&1 || scripts/dev-cluster.sh start
	PILOT_BIN=$(abspath $(BUILD)/bin) scripts/soak.sh $(SOAK_ARGS)

check:
	scripts/install-deps.sh
	$(MAKE) WERROR=1 all worker $(UNITS) $(TOOLS) $(BENCH_BINS)
	scripts/dev-cluster.sh status >/dev/null 2>&1 || scripts/dev-cluster.sh start
	PILOT_BIN=$(abspath $(BUILD)/bin) prove -f -e '' $(UNITS) tests/e2e/t*.sh
	$(MAKE) fuzz FUZZ_SECONDS=$(CHECK_FUZZ_SECONDS)

asan:
	$(MAKE) BUILD=build-asan SANITIZE=address,undefined OPT='-O1 -g' check

cluster:
	scripts/dev-cluster.sh status >/dev/null 2>&1 || scripts/dev-cluster.sh start

# the pipeline demo (examples/pipeline/, docs/pipeline.md) on a 4-node pilot;
# POOL=1: its stage 1 on a pool of MPI workers
demo:
	scripts/install-deps.sh
	$(MAKE) all examples
	scripts/dev-cluster.sh status >/dev/null 2>&1 || scripts/dev-cluster.sh start
	PILOT_BIN=$(abspath $(BUILD)/bin) scripts/demo.sh $(if $(POOL),--pool)

# the same three stages as an sbatch --dependency=afterok chain, to compare
demo-sbatch:
	scripts/install-deps.sh
	$(MAKE) examples
	scripts/dev-cluster.sh status >/dev/null 2>&1 || scripts/dev-cluster.sh start
	PREP=$(abspath $(BUILD)/examples/prep) examples/pipeline/sbatch.sh

# the agent's copy of _pyworker.py goes to PREFIX/share/pilot/python/pilot/
# (where it looks, beside its program, whatever PREFIX); the package
# install-lib installs has it too
install: $(BINS) install-lib
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/pilot \
	    $(DESTDIR)$(PREFIX)/share/pilot/python/pilot
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 python/pilot/_pyworker.py \
	    $(DESTDIR)$(PREFIX)/share/pilot/python/pilot/
	install -m 644 scripts/pilot.sbatch $(DESTDIR)$(PREFIX)/share/pilot/

clean:
	rm -rf build build-asan build-fuzz

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
