# agent/vetcheck.mk - pilot-vetcheck, node vetting's GPU, network and
# NCCL checks (agent/vetcheck.h, docs/vetcheck.md)
#
# Where MPI is (Open MPI's mpicc, $(HAVE_MPI)) the program is built by
# $(MPICC), as the worker is, with its net and nccl checks and the
# worker's loader of NCCL and the CUDA runtime (worker/nccl.c); without
# it, by $(CC) with the gpu check and nccl of one rank (ncclCommInitAll)
# alone (net then exits 3).
# NVML, the CUDA driver and NCCL are loaded at run time (dlopen): no
# CUDA at build time.
VETCHECK := $(BUILD)/bin/pilot-vetcheck
VET_LIBS := $(shell pkg-config --libs jansson 2>/dev/null || echo -ljansson) \
            -ldl -lm
ifneq ($(HAVE_MPI),)
VET_CC       := $(MPICC)
VET_SRC      := $(wildcard agent/vetcheck*.c)
VET_OBJ      := $(call obj,$(VET_SRC)) $(BUILD)/worker/nccl.o
VET_CPPFLAGS :=
else
VET_CC       := $(CC)
VET_SRC      := agent/vetcheck.c agent/vetcheck_main.c agent/vetcheck_gpu.c \
                agent/vetcheck_nccl.c
VET_OBJ      := $(call obj,$(VET_SRC)) $(BUILD)/vetcheck/nccl.o
VET_CPPFLAGS := -DPL_VET_NO_MPI -DPL_NCCL_NO_MPI
endif

.PHONY: vetcheck install-vetcheck
vetcheck: $(VETCHECK)
all: $(VETCHECK)
install: install-vetcheck

# its own flags (MPI or not), as $(BUILD)/.wflags for the worker
VFLAGS_NOW := $(VET_CC) $(VET_CPPFLAGS) $(VET_LIBS)
$(BUILD)/.vflags: FORCE
	@mkdir -p $(BUILD)
	@echo '$(VFLAGS_NOW)' | cmp -s - $@ || echo '$(VFLAGS_NOW)' > $@

# (the stem 'check...' is longer than nothing: this rule, not the
# generic one, builds agent/vetcheck*.o)
$(BUILD)/agent/vet%.o: agent/vet%.c $(BUILD)/.flags $(BUILD)/.vflags
	@mkdir -p $(dir $@)
	$(QCC)$(VET_CC) $(CPPFLAGS) $(VET_CPPFLAGS) $(CFLAGS) -MMD -MP \
	    -c -o $@ $<
# the worker's loader without its MPI part (worker/nccl.h)
$(BUILD)/vetcheck/nccl.o: worker/nccl.c $(BUILD)/.flags $(BUILD)/.vflags
	@mkdir -p $(dir $@)
	$(QCC)$(CC) $(CPPFLAGS) $(VET_CPPFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<
$(VETCHECK): $(VET_OBJ)
	@mkdir -p $(dir $@)
	$(QLD)$(VET_CC) $(LDFLAGS) -o $@ $^ $(VET_LIBS)

# its unit test: the report and the pure parts of the gpu and net
# checks, without MPI or main() (agent/vetcheck_main.c)
$(BUILD)/tests/test_agent_vetcheck: $(BUILD)/tests/unit/test_agent_vetcheck.o \
        $(BUILD)/agent/vetcheck.o $(BUILD)/agent/vetcheck_gpu.o
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(LDFLAGS) -o $@ $^ $(VET_LIBS)

install-vetcheck: $(VETCHECK)
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(VETCHECK) $(DESTDIR)$(PREFIX)/bin/
