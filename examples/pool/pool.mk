# examples/pool/pool.mk - the pool examples: a distributed join and sort
# (examples/pool/README.md), included by the Makefile
#
# libpoolex.so holds the pool functions 'join' and 'sort', built with
# MPICC like every MPI program of the examples; only they are exported
# (-fvisibility=hidden), so the helpers cannot clash with the worker's
# symbols.  poolcheck computes their answers in one process, without MPI.
POOLEX_LIB_SRC := examples/pool/join.c examples/pool/sort.c \
                  examples/pool/exch.c examples/pool/table.c
POOLEX_LIB_OBJ := $(patsubst %.c,$(BUILD)/%.pic.o,$(POOLEX_LIB_SRC))
POOLEX_CHK_SRC := examples/pool/poolcheck.c examples/pool/table.c
POOLEX_CHK_OBJ := $(patsubst %.c,$(BUILD)/%.chk.o,$(POOLEX_CHK_SRC))

examples: $(BUILD)/examples/libpoolex.so $(BUILD)/examples/poolcheck

$(BUILD)/examples/pool/%.pic.o: examples/pool/%.c $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(QCC)$(MPICC) -I. -Iworker $(CFLAGS) -Werror -fPIC \
	    -fvisibility=hidden -MMD -MP -c -o $@ $<
$(BUILD)/examples/libpoolex.so: $(POOLEX_LIB_OBJ)
	$(QLD)$(MPICC) $(CFLAGS) -Werror $(LDFLAGS) -shared -o $@ $^ -lm

$(BUILD)/examples/pool/%.chk.o: examples/pool/%.c $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(QCC)$(CC) -I. $(CFLAGS) -Werror -MMD -MP -c -o $@ $<
$(BUILD)/examples/poolcheck: $(POOLEX_CHK_OBJ)
	$(QLD)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ -lm
