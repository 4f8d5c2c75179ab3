#!/bin/bash
# t1125-pyresult.sh - pilot result of a result file (over 64 KiB) that is
# not as pilotd recorded it: removed (its error, not "not under the
# pilot's tasks/"), cut short or grown (refused before a byte reaches
# stdout: it printed the file, then failed), a fifo in its place (it
# hung in open()), a link (refused); then as it was, whole.  And a
# refused submit of a call over 256 KiB leaves no file under inputs/
# (pilot submit --input, --file, libpilot's pilot_submit() through the
# Python client): each left its staged copy there for good.  On a local
# pilot, /usr/bin/python3.
. "$(dirname "$0")/lib.sh"

plan 19

CODE=$WORK/code
mkdir -p "$CODE"
cat >"$CODE/bigmod.py" <<'PYEOF'
def big(n):
    return b"x" * int(n)
PYEOF
cd "$CODE" || abort "no $CODE"

pilot_up_local || abort "pilot up --local failed"
P=$PILOT_UP_ID
capture pilot submit --parsable --python /usr/bin/python3 \
    --py-call bigmod:big -- 100000
ID=$OUT
capture pilot wait "$ID" --timeout 60
is "$RC" 0 "a call of a 100,000-byte value ends done" || diag "$ERR"
F=$(pilot show "$ID" --json | json 'j["result_file"]')
SIZE=$(pilot show "$ID" --json | json 'j["result_size"]')
ok "its result is a file ($F, $SIZE bytes)" test -f "$F"
cp "$F" "$WORK/keep"

# result OUTFILE: pilot result ID into OUTFILE, RC and ERR
result() {
    RC=0
    run_timeout 10 pilot result "$ID" >"$1" 2>"$WORK/.err" || RC=$?
    ERR=$(<"$WORK/.err")
}

rm -f "$F"
result "$WORK/gone"
is "$RC" 1 "the file removed: exit 1"
like "$ERR" "result file $F: No such file or directory" \
    "... the error says it is not there"

head -c 1000 "$WORK/keep" >"$F"
result "$WORK/cut"
is "$RC" 1 "the file cut short: exit 1"
like "$ERR" "1000 bytes, not the $SIZE recorded" "... the error says so"
is "$(stat -c %s "$WORK/cut")" 0 "... and nothing was written to stdout"

cat "$WORK/keep" "$WORK/keep" >"$F"
result "$WORK/grown"
is "$RC,$(stat -c %s "$WORK/grown")" "1,0" \
    "the file grown: exit 1, nothing written"

rm -f "$F"
mkfifo "$F"
result "$WORK/fifo"
is "$RC" 1 "a fifo in its place: exit 1 at once (no hang in open())"
like "$ERR" "not a regular file" "... 'not a regular file'"

rm -f "$F"
ln -s "$WORK/keep" "$F"
result "$WORK/link"
is "$RC,$(stat -c %s "$WORK/link")" "1,0" \
    "a link in its place (to a copy elsewhere): refused"

rm -f "$F"
cp "$WORK/keep" "$F"
result "$WORK/whole"
is "$RC" 0 "the file as it was: exit 0"
ok "... the pickle whole" cmp -s "$WORK/whole" "$WORK/keep"

export PILOT_LIBPILOT=$PILOT_BIN/../lib/libpilot.so.1
export PYTHONPATH=$REPO/python${PYTHONPATH:+:$PYTHONPATH}
INPUTS=$(pilot_dir "$P")/inputs
staged() { find "$INPUTS" -type f 2>/dev/null | wc -l; }
"$PY" -c 'import cloudpickle, sys
sys.stdout.buffer.write(cloudpickle.dumps((len, (b"z" * 400000,), {})))' \
    >"$WORK/big.pkl"
B64=$(base64 -w0 "$WORK/big.pkl")
capture pilot submit --python /usr/bin/python3 --input "$WORK/big.pkl" \
    --after 999999
is "$RC,$(staged)" "1,0" \
    "a 400 KB --input refused by pilotd (no task 999999): inputs/ empty" \
    || diag "$ERR"
printf '{"input": "%s"}\n{"argv": ["true"], "after": ["nosuch"]}\n' \
    "$B64" >"$WORK/two.jsonl"
capture pilot submit --file "$WORK/two.jsonl"
is "$RC,$(staged)" "1,0" \
    "a task file of a 400 KB input and a refused line: inputs/ empty" \
    || diag "$ERR"
capture "${PYLIB[@]}" -c 'import base64, sys, pilot
c = pilot.Client()
b64 = base64.b64encode(open(sys.argv[1], "rb").read()).decode()
try:
    c.submit_many([{"input": b64}, {"argv": ["true"], "after": [999999]}])
except pilot.Error as e:
    print("refused:", e)' "$WORK/big.pkl"
is "$RC,$(staged)" "0,0" \
    "the same through pilot_submit() (the Python client): inputs/ empty" \
    || diag "$OUT" "$ERR"
like "$OUT" "refused" "... it was refused"
capture pilot submit --parsable --python /usr/bin/python3 \
    --input "$WORK/big.pkl"
pilot wait "$OUT" --timeout 60 >/dev/null 2>&1
is "$(staged),$(pilot show "$OUT" --json | json 'j["result_repr"]')" \
    "1,400000" "one submitted: its input stays staged, and it runs"

capture pilot down --pilot "$P"
is "$RC" 0 "pilot down" || diag "$ERR"
