# worker/worker.mk - pilot-worker, the pool's MPI worker (docs/pool.md)
#
# MPI is opt-in: 'all' does not build the worker; 'make worker' does,
# with $(MPICC).  Python functions need python3-embed (Debian:
# python3-dev); without it, or with WITH_PYTHON=0, the worker runs C
# functions only and answers a --py call with an error.  NCCL and CUDA
# are loaded at run time (dlopen): no CUDA at build time.
WORKER      := $(BUILD)/bin/pilot-worker
WORKER_SRC  := $(wildcard worker/*.c)
WORKER_OBJ  := $(call obj,$(WORKER_SRC))
WITH_PYTHON ?= $(shell pkg-config --exists python3-embed 2>/dev/null \
                       && echo 1 || echo 0)
ifeq ($(WITH_PYTHON),1)
# -isystem: Python's headers are not held to our warnings
WORKER_CPPFLAGS := -DPL_WITH_PYTHON \
    $(patsubst -I%,-isystem %,$(shell pkg-config --cflags python3-embed))
WORKER_LIBS     := $(shell pkg-config --libs python3-embed)
endif
WORKER_LIBS += $(shell pkg-config --libs msgpack) -ldl

.PHONY: worker install-worker
worker: $(WORKER)

# the worker's own flags, so that a change of them (WITH_PYTHON, MPICC)
# rebuilds it, as $(BUILD)/.flags does for the rest
WFLAGS_NOW := $(MPICC) $(WORKER_CPPFLAGS) $(WORKER_LIBS)
$(BUILD)/.wflags: FORCE
	@mkdir -p $(BUILD)
	@echo '$(WFLAGS_NOW)' | cmp -s - $@ || echo '$(WFLAGS_NOW)' > $@

$(BUILD)/worker/%.o: worker/%.c $(BUILD)/.flags $(BUILD)/.wflags
	@mkdir -p $(dir $@)
	$(QCC)$(MPICC) $(CPPFLAGS) $(WORKER_CPPFLAGS) $(CFLAGS) -MMD -MP \
	    -c -o $@ $<
$(WORKER): $(WORKER_OBJ) $(LIBPL)
	@mkdir -p $(dir $@)
	$(QLD)$(MPICC) $(LDFLAGS) -o $@ $^ $(WORKER_LIBS)

# the worker and the functions' header (#include <pilot_fn.h>)
install-worker: $(WORKER)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include
	install -m 755 $(WORKER) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 worker/pilot_fn.h $(DESTDIR)$(PREFIX)/include/
