# pilot - a pilot-job system for Slurm clusters.  See README.md.
BUILD   ?= build
PREFIX  ?= /usr/local
CC      ?= cc
CSTD     = -std=c17 -D_GNU_SOURCE
WARN     = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wformat=2 -Wpointer-arith -Wwrite-strings -Wundef
OPT     ?= -O2 -g
PKGS     = libzmq libuv sqlite3 msgpack jansson
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CPPFLAGS += -I. $(PKG_CFLAGS)
CFLAGS   += $(CSTD) $(WARN) $(OPT)
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
AGENT_SRC  := $(wildcard agent/*.c)
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

.PHONY: all test check check-e2e asan install clean cluster demo
all: $(BINS)

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
$(LIBC): $(call obj,$(filter-out client/main.c,$(CLIENT_SRC)))
	$(QAR)rm -f $@ && ar rcs $@ $^

$(BUILD)/bin/pilotd: $(BUILD)/daemon/main.o $(LIBD) $(LIBPL)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/bin/pilot-agent: $(BUILD)/agent/main.o $(LIBA) $(LIBPL)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/bin/pilot: $(BUILD)/client/main.o $(LIBC) $(LIBPL)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(LIBD) $(LIBA) $(LIBC) $(LIBPL)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# unit tests only: fast, no cluster
test: $(BINS) $(UNITS)
	prove -f -e '' $(UNITS)

# everything: packages, -Werror build, the dev cluster, unit and e2e tests
check:
	scripts/install-deps.sh
	$(MAKE) WERROR=1 all $(UNITS)
	scripts/dev-cluster.sh status >/dev/null 2>&1 || scripts/dev-cluster.sh start
	PILOT_BIN=$(abspath $(BUILD)/bin) prove -f -e '' $(UNITS) tests/e2e/t*.sh

asan:
	$(MAKE) BUILD=build-asan SANITIZE=address,undefined OPT='-O1 -g' check

cluster:
	scripts/dev-cluster.sh status >/dev/null 2>&1 || scripts/dev-cluster.sh start

demo:
	scripts/install-deps.sh
	$(MAKE) all
	scripts/dev-cluster.sh status >/dev/null 2>&1 || scripts/dev-cluster.sh start
	PILOT_BIN=$(abspath $(BUILD)/bin) scripts/demo.sh

install: $(BINS)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/pilot
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 scripts/pilot.sbatch $(DESTDIR)$(PREFIX)/share/pilot/

clean:
	rm -rf build build-asan

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
