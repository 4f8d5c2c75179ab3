# lib/lib.mk - libpilot.so, the client library, and the Python package
# over it (docs/libpilot.md)
#
# The library is lib/*.c over the client modules that find a pilot and
# speak to it (the CLI's own: conn, conn_ops, pilot, spec, spec_set,
# submit, parse, slurm, sub, logsrc) and libpl; every object is built -fPIC (Makefile), so the same objects
# go into the programs and the library.  Only pilot_* is exported
# (lib/libpilot.map), and nothing in it prints or exits (the code that
# would, pl_fatal() and the log, is left out by --gc-sections): the link
# fails if either is not so.
LIBPILOT_SONAME := libpilot.so.1
LIBPILOT_REAL   := libpilot.so.1.0.0
LIBPILOT        := $(BUILD)/lib/$(LIBPILOT_REAL)
LIBPILOT_LINKS  := $(BUILD)/lib/$(LIBPILOT_SONAME) $(BUILD)/lib/libpilot.so
LIBPILOT_OBJ    := $(call obj,$(wildcard lib/*.c) client/conn.c \
                     client/conn_ops.c \
                     client/pilot.c client/spec.c client/spec_py.c \
                     client/spec_out.c client/spec_set.c \
                     client/submit.c client/parse.c client/slurm.c \
                     client/sub.c client/logsrc.c)
LIBPILOT_LIBS   := $(shell pkg-config --libs libzmq libuv sqlite3 msgpack \
                     jansson 2>/dev/null) -lslurm -lpthread -lm
# a program of ours that links the library as others do: -lpilot, found
# next to it at run time
LINK_LIBPILOT    = -L$(BUILD)/lib -lpilot -Wl,-rpath,'$$ORIGIN/../lib'

# the Python package's home for PREFIX: Debian's /usr/bin/python3 looks
# in /usr/local/lib/python3.11/dist-packages (its posix_local scheme)
# and /usr/lib/python3/dist-packages; another prefix gets
# PREFIX/lib/python3.X/site-packages, to put on PYTHONPATH
PYTHON ?= /usr/bin/python3
PYDIR  ?= $(shell $(PYTHON) -c 'import sysconfig as s, sys; p = sys.argv[1]; \
    print(s.get_path("purelib") if p == "/usr/local" else \
          s.get_path("purelib", "deb_system") if p == "/usr" else \
          s.get_path("purelib", "posix_prefix", \
                     vars={"base": p, "platbase": p}))' $(PREFIX) 2>/dev/null)
PY_SRC := $(wildcard python/pilot/*.py)

.PHONY: lib install-lib cdef
all: lib
lib: $(LIBPILOT_LINKS)

$(LIBPILOT): $(LIBPILOT_OBJ) $(LIBPL) lib/libpilot.map
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -shared -Wl,-soname,$(LIBPILOT_SONAME) \
	    -Wl,--version-script=lib/libpilot.map -Wl,--no-undefined \
	    -Wl,--gc-sections -o $@.tmp $(LIBPILOT_OBJ) $(LIBPL) $(LIBPILOT_LIBS)
	$(Q)bad=$$(nm -D --defined-only $@.tmp | awk '$$3 !~ /^(pilot_|PILOT_)/ \
	    { print $$3 }'); if [ -n "$$bad" ]; then \
	    echo "libpilot exports more than pilot_*: $$bad" >&2; \
	    rm -f $@.tmp; exit 1; fi
	$(Q)bad=$$(nm -D -u $@.tmp | awk '{ sub(/@.*/, "", $$2) } $$2 ~ \
	    /^(exit|_exit|printf|fprintf|vfprintf|puts|fputs|fwrite|perror)$$/ \
	    { print $$2 }'); if [ -n "$$bad" ]; then \
	    echo "libpilot calls what prints or exits: $$bad" >&2; \
	    rm -f $@.tmp; exit 1; fi
	$(Q)mv $@.tmp $@
$(LIBPILOT_LINKS): $(LIBPILOT)
	$(Q)ln -sf $(LIBPILOT_REAL) $@

# the declarations cffi reads (python/pilot/_cdef.py), made from the
# header's cdef block; tests/py/test_cdef.py fails when they differ
cdef:
	$(PYTHON) scripts/gen-cdef.py lib/pilot.h > python/pilot/_cdef.py

# unit tests of the library link it as any program would (and libpl,
# to make pilot directories: its pl_* are hidden in the library)
$(BUILD)/tests/test_lib_%: $(BUILD)/tests/unit/test_lib_%.o $(LIBPILOT_LINKS)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -o $@ $< $(LIBPL) $(LINK_LIBPILOT) $(LDLIBS)
# ... and so does the end-to-end test's C client (t1150)
TOOLS += $(BUILD)/tests/libpilot_e2e
$(BUILD)/tests/libpilot_e2e: $(BUILD)/tests/lib/libpilot_e2e.o \
                             $(LIBPILOT_LINKS)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -o $@ $< $(LINK_LIBPILOT) \
	    $(shell pkg-config --libs jansson) -lpthread

# ... and its watch's (t1170)
TOOLS += $(BUILD)/tests/libpilot_watch
$(BUILD)/tests/libpilot_watch: $(BUILD)/tests/lib/libpilot_watch.o \
                               $(LIBPILOT_LINKS)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -o $@ $< $(LINK_LIBPILOT) \
	    $(shell pkg-config --libs jansson) -lpthread

install-lib: lib
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include \
	    $(DESTDIR)$(PYDIR)/pilot
	install -m 755 $(LIBPILOT) $(DESTDIR)$(PREFIX)/lib/
	ln -sf $(LIBPILOT_REAL) $(DESTDIR)$(PREFIX)/lib/$(LIBPILOT_SONAME)
	ln -sf $(LIBPILOT_REAL) $(DESTDIR)$(PREFIX)/lib/libpilot.so
	install -m 644 lib/pilot.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(PY_SRC) $(DESTDIR)$(PYDIR)/pilot/
	echo 'LIBPILOT = "$(PREFIX)/lib/$(LIBPILOT_SONAME)"' \
	    > $(DESTDIR)$(PYDIR)/pilot/_paths.py
	[ -n "$(DESTDIR)" ] || ldconfig
	@case "$(PREFIX)" in /usr|/usr/local) ;; *) echo "install: the" \
	    "Python package is in $(PYDIR): put it on PYTHONPATH";; esac
