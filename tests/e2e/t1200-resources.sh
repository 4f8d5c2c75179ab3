#!/bin/bash
# t1200-resources.sh - per-task resource use on a local pilot: a task
# that burns one core for 1 s has a CPU efficiency over 70% (when the
# machine gives it a core: else the efficiency the task saw itself), and
# its CPU is what it burned; 'sleep 1' is under 10%; a Python task that
# touches 200 MB has a peak RSS of 200 MB or more; a task of 2 ranks
# sums both ranks' CPU; one killed by its timeout still gets its CPU
# figures; 'pilot ls --long', 'pilot show' and its --json give them.
# The pilot's agent is given 2 fake GPUs (CUDA_VISIBLE_DEVICES) and no
# NVML loads here: its GPU sampler's child starts, says why it samples
# nothing, and a GPU task ends done with null GPU figures.
. "$(dirname "$0")/lib.sh"

plan 25

field() { pilot show "$1" --json | json "j[\"$2\"]"; }
# cmp A OP B: a float comparison (OP: < <= > >=)
cmp() { "$PY" -c 'import sys, operator as o
a, op, b = sys.argv[1:]
f = {"<": o.lt, "<=": o.le, ">": o.gt, ">=": o.ge}[op]
sys.exit(not f(float(a), float(b)))' "$@"; }

# burns N s of CPU (its own clock), then prints the CPU it used (user +
# system, as its parent's wait4() will see it) and its own wall time
BURN='import os, sys, time
t0 = time.time()
end = time.process_time() + float(sys.argv[1])
while time.process_time() < end:
    pass
t = os.times()
print(t.user + t.system, time.time() - t0)'

# 2 GPUs that do not exist, no NVML: the sampler starts and gives up
export CUDA_VISIBLE_DEVICES=0,1 PILOT_GPU_SAMPLE=0.2
pilot_up_local || abort "pilot up --local --wait failed"
unset CUDA_VISIBLE_DEVICES PILOT_GPU_SAMPLE
P=$PILOT_UP_ID
DIR=$(pilot_dir "$P")

# --- one core busy for 1 s; a sleep ------------------------------------
B=$(pilot submit --name burn -- /usr/bin/python3 -c "$BURN" 1)
S=$(pilot submit --name nap -- sleep 1)
capture pilot wait "$B" "$S" --timeout 60
is "$RC" 0 "the busy task and the sleep end done"
EFF=$(field "$B" cpu_eff)
CPU=$(pilot show "$B" --json | json 'j["cpu_user"] + j["cpu_sys"]')
read -r OWN OWNWALL < <(pilot logs "$B")
SEEN=$("$PY" -c "print($OWN / $OWNWALL)")
diag "busy task: $CPU s of CPU (it says $OWN s), efficiency $EFF, wall" \
    "$(field "$B" wall) s; it saw $SEEN of a core ($(cat /proc/loadavg))"
ok "its CPU time is what it burned ($CPU s >= its own $OWN s - 0.02)" \
    cmp "$CPU" ">=" "$("$PY" -c "print($OWN - 0.02)")"
ok "... and no more than its wall" cmp "$CPU" "<=" "$(field "$B" wall)"
# N.B. 6 helpers share this 2-core machine: a busy task may get a part
# of a core; its efficiency is then what it saw itself (less the start)
if cmp "$SEEN" ">" 0.85; then
    ok "its CPU efficiency is over 70% ($EFF)" cmp "$EFF" ">" 0.70
else
    ok "its CPU efficiency ($EFF) is the share of a core it got ($SEEN)" \
        cmp "$("$PY" -c "print(abs($EFF - $SEEN))")" "<" 0.15
fi
EFF=$(field "$S" cpu_eff)
ok "sleep 1: CPU efficiency under 10% ($EFF)" cmp "$EFF" "<" 0.10
is "$(pilot show "$S" --json | json '[type(j[k]).__name__ for k in ("cpu_user", "cpu_sys")]')" \
    '["float", "float"]' "... its CPU figures are measured (numbers, not null)"

# --- peak memory of a Python task ---------------------------------------
M=$(pilot submit --name mem -- /usr/bin/python3 -c \
    'b = b"x" * (200 << 20); print(len(b))')
capture pilot wait "$M" --timeout 60
RSS=$(field "$M" maxrss_kb)
ok "a Python task that touched 200 MB: maxrss $RSS kB >= 200 MB" \
    cmp "$RSS" ">=" $((200 * 1024))

# --- two ranks: their CPU summed ----------------------------------------
R=$(pilot submit --name two --ranks 2 -- /usr/bin/python3 -c "$BURN" 0.6)
capture pilot wait "$R" --timeout 60
is "$RC" 0 "a task of 2 ranks, each burning 0.6 s, ends done"
CPU=$(pilot show "$R" --json | json 'j["cpu_user"] + j["cpu_sys"]')
ok "its CPU is both ranks' summed ($CPU s >= 1.15)" cmp "$CPU" ">=" 1.15
ok "... not more than two ranks' wall" \
    cmp "$CPU" "<=" "$("$PY" -c "print(2 * $(field "$R" wall))")"
EFF=$(field "$R" cpu_eff)
ok "... its efficiency counts its 2 cores: $EFF <= 1" cmp "$EFF" "<=" 1.0

# --- a task killed by its timeout ---------------------------------------
T=$(pilot submit --name spin --timeout 1 -- /usr/bin/python3 -c \
    'while True: pass')
capture pilot wait "$T" --timeout 60
is "$(field "$T" state)" timeout "a spinning task with --timeout 1 ends in timeout"
CPU=$(pilot show "$T" --json | json 'j["cpu_user"] + j["cpu_sys"]')
ok "... with its CPU figures ($CPU s > 0.1)" cmp "$CPU" ">" 0.1

# --- pilot ls --long, pilot show, --json --------------------------------
capture pilot ls --long "$B" "$S" "$M"
is "$RC" 0 "pilot ls --long exits 0"
like "$(head -n 1 <<<"$OUT")" \
    '^ID +NAME +STATE +NODE +EXIT +WALL +CPU +EFF +MAXRSS +COMMAND' \
    "... its header has CPU, EFF and MAXRSS before COMMAND"
like "$(grep -E "^$B " <<<"$OUT")" \
    "^$B +burn +done +[^ ]+ +0 +[^ ]+ +[0-9]+\.[0-9]{2} +[0-9]+% +[0-9.]+ ?[KMG]" \
    "... the busy task's row: its CPU seconds, efficiency, peak RSS"
like "$(grep -E "^$M " <<<"$OUT")" "^$M +mem +done .* 2[0-9]{2}(\.[0-9])? ?M" \
    "... the memory task's: its peak RSS in MB"
capture pilot ls "$B"
unlike "$OUT" 'EFF' "pilot ls without --long has no EFF column"
capture pilot show "$B"
like "$(grep '^cpu:' <<<"$OUT")" '^cpu: +[0-9.]+ s user, [0-9.]+ s system$' \
    "pilot show: a cpu line, user and system"
like "$(grep '^cpu eff:' <<<"$OUT")" '^cpu eff: +[0-9.]+% of 1 core x ' \
    "... and the efficiency over 1 core x its wall"
unlike "$OUT" 'gpu use:' "... no GPU line: no GPU was sampled"
is "$(pilot show "$B" --json | json '[k for k in ("cpu_user", "cpu_sys", "cpu_eff", "maxrss_kb", "gpu_util", "gpu_mem_mb", "gpu_power_w") if k in j]')" \
    '["cpu_user", "cpu_sys", "cpu_eff", "maxrss_kb", "gpu_util", "gpu_mem_mb", "gpu_power_w"]' \
    "pilot show --json carries the raw figures"
is "$(pilot ls --json "$B" | json '[j[0][k] for k in ("gpu_util", "gpu_mem_mb", "gpu_power_w")]')" \
    "[null, null, null]" "... and pilot ls --json; GPU figures null here"

# --- fake GPUs, no NVML: the sampler says why, GPU figures null --------
like "$(grep 'GPU sampling' "$DIR"/logs/agent-local.log | head -n 1)" \
    'notice: GPU sampling: off: libnvidia-ml\.so\.1: cannot open' \
    "the agent's GPU sampler started and said why it samples nothing"
G=$(pilot submit --name gpu --gpus-per-rank 1 -- sleep 0.5)
capture pilot wait "$G" --timeout 60
is "$(pilot show "$G" --json | json '[j["state"], j["gpus"], j["gpu_util"], j["gpu_mem_mb"], j["gpu_power_w"], j["cpu_user"] is not None]')" \
    '["done", [0], null, null, null, true]' \
    "a task holding a GPU ends done: GPU figures null, CPU measured"
