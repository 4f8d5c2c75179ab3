#!/bin/bash
# t1130-pyrefs.sh - Python calls that receive other calls' values (refs,
# issue 14), and many results in one request: calls pickled by
# /usr/bin/python3 with cloudpickle and a persistent_id pickler (a
# Future is ("pilot-ref", ID)), given as base64 "input" in a task file
# (pilot submit --file) and through libpilot's pilot_submit(); a value
# inline (small) and in a result file (over 64 KiB); a chain of 3; a
# ref to a call that failed (the dependent does not run: after:ok); a
# ref to a command or to no task, refused; the worker's guard for a
# ref that raised; pilot_call "results" of 1,000 ids in one request.
# On a local pilot.
. "$(dirname "$0")/lib.sh"

plan 25

export PILOT_LIBPILOT=$PILOT_BIN/../lib/libpilot.so.1
export PYTHONPATH=$REPO/python${PYTHONPATH:+:$PYTHONPATH}
CODE=$WORK/code
mkdir -p "$CODE"
# mkref.py KIND ARGS...: one task-file line, a call pickled with its
# refs as persistent ids, as a client's Futures are
cat >"$CODE/mkref.py" <<'EOF'
import base64, io, json, pickle, sys
import cloudpickle

class Ref:
    def __init__(self, i):
        self.id = i

class Pickler(cloudpickle.Pickler):
    def persistent_id(self, obj):
        return ("pilot-ref", obj.id) if isinstance(obj, Ref) else None

def dumps(call):
    b = io.BytesIO()
    Pickler(b, protocol=pickle.HIGHEST_PROTOCOL).dump(call)
    return b.getvalue()

def boom():
    raise ValueError("no value")

kind, ids = sys.argv[1], [int(x) for x in sys.argv[2:]]
refs = []
if kind == "val":
    call = (lambda n: n, (ids[0],), {})
elif kind == "big":
    call = (lambda n: b"y" * n, (ids[0],), {})
elif kind == "boom":
    call = (boom, (), {})
elif kind == "add":
    call = (lambda a, b: a + b, (Ref(ids[0]), Ref(ids[1])), {})
    refs = ids
elif kind == "inc":
    call = (lambda a: a + 1, (Ref(ids[0]),), {})
    refs = ids
elif kind == "len":
    call = (lambda x, k=0: (len(x), x[:3], k), (Ref(ids[0]),), {"k": 7})
    refs = ids
elif kind == "nested":
    # a ref deep in a structure, twice: unpickled once
    call = (lambda d: d["a"][0] is d["b"] and d["b"] * 2,
            ({"a": [Ref(ids[0])], "b": Ref(ids[0])},), {})
    refs = ids
line = {"input": base64.b64encode(dumps(call)).decode(), "argv": [kind]}
if refs:
    line["refs"] = refs
print(json.dumps(line))
EOF
cd "$CODE" || abort "no $CODE"

field() { pilot show "$1" --json | json "j.get(\"$2\")"; }
value() { pilot result "$1" | "$PY" -c 'import pickle, sys; print(repr(pickle.load(sys.stdin.buffer)))'; }
sub() {
    "$PY" "$CODE/mkref.py" "$@" >"$WORK/one.jsonl" || return 1
    pilot submit --file "$WORK/one.jsonl"
}
ended() { capture pilot wait "$1" --timeout "${2:-60}"; }

pilot_up_local || abort "no local pilot"
export PILOT_ID=$PILOT_UP_ID
DIR=$(pilot_dir "$PILOT_ID")

# a value inline, and a chain of 3: add(20, 22) -> inc -> inc
A=$(sub val 20)
B=$(sub val 22)
C=$(sub add "$A" "$B")
D=$(sub inc "$C")
E=$(sub inc "$D")
ended "$E"
is "$(field "$C" state) $(value "$C")" "done 42" "a call of two refs receives their values: 20 + 22"
is "$(field "$C" after)" "[{\"id\": $A, \"any\": false}, {\"id\": $B, \"any\": false}]" \
    "... its refs were added to its after, :ok"
is "$(field "$E" state) $(value "$E")" "done 44" "a chain of 3: add -> inc -> inc gives 44"
is "$(field "$C" argv)" '["add"]' "... the command words are the label"

# a value over 64 KiB: its result is a file in the pilot directory
G=$(sub big 100000)
H=$(sub len "$G")
N=$(sub nested "$B")
ended "$H"
ended "$N"
like "$(field "$G" result_file)" "^$DIR/tasks/" "a result of 100,000 bytes is a file in the pilot directory"
is "$(field "$H" state) $(value "$H")" "done (100000, b'yyy', 7)" "... a call of that ref receives it whole"
is "$(value "$N")" 44 "a ref named twice deep in the arguments: one value (d['a'][0] is d['b'])"

# a ref to a call that failed: the dependent never runs
F=$(sub boom)
I=$(sub inc "$F")
ended "$I"
is "$(field "$F" state)" failed "the call that raises fails"
is "$(field "$I" state)" failed "a call of its value fails without running (after :ok)"
like "$(field "$I" reason)" "dependency: task $F failed" "... the reason names the dependency"
is "$(field "$I" attempts) $(field "$I" start_time)" "0 null" "... it never started"

# refused at submit
X=$(pilot submit -- true)
"$PY" "$CODE/mkref.py" inc "$X" >"$WORK/bad.jsonl"
capture pilot submit --file "$WORK/bad.jsonl"
one_error_line "a ref to a command is refused" "refs: task $X is not a Python call"
"$PY" "$CODE/mkref.py" inc 987654 >"$WORK/bad.jsonl"
capture pilot submit --file "$WORK/bad.jsonl"
one_error_line "a ref to no task is refused" "refs: no task 987654"
"$PY" - "$A" >"$WORK/bad.jsonl" <<'EOF'
import json, sys
print(json.dumps({"input": "gAVLBS4=", "refs": [int(sys.argv[1])],
                  "after": [sys.argv[1] + ":any"]}))
EOF
capture pilot submit --file "$WORK/bad.jsonl"
one_error_line "a ref in after with :any is refused" "refs: $A is in after with :any"
echo '{"py_call": "mod:f", "refs": [1]}' >"$WORK/bad.jsonl"
capture pilot submit --file "$WORK/bad.jsonl"
one_error_line "refs on a --py-call call are refused" "through its pickle"
echo '{"argv": ["true"], "refs": [1]}' >"$WORK/bad.jsonl"
capture pilot submit --file "$WORK/bad.jsonl"
one_error_line "refs on a command are refused" "only a Python call"
echo '{"input": "not base64!"}' >"$WORK/bad.jsonl"
capture pilot submit --file "$WORK/bad.jsonl"
one_error_line "bad base64 is refused" "field 'input': want the pickled call in base64"

# the worker's guard: a ref whose result is an exception, or that is
# not one of the call's refs (cannot come from pilotd: tested alone)
capture "$PY" - "$REPO/python/pilot" <<'EOF'
import io, pickle, sys
sys.path.insert(0, sys.argv[1])
import cloudpickle, _pyworker as w
class P(cloudpickle.Pickler):
    def persistent_id(self, o):
        return ("pilot-ref", 5) if o == "REF" else None
b = io.BytesIO()
P(b).dump((len, ("REF",), {}))
for refs in ({5: {"status": "raised", "data": pickle.dumps(1)}}, {}):
    try:
        w.load_call(b.getvalue(), refs)
    except w.RefError as e:
        print(e)
print(w.load_call(b.getvalue(), {5: {"status": "ok",
                                     "data": pickle.dumps("abc")}})[1])
EOF
is "$OUT" "ref 5: that call raised, it has no value
the call names the value of call 5, which is not one of its refs
('abc',)" "the worker refuses a ref that raised, or one not given, saying which"

# libpilot: pilot_submit with refs, and 1,000 results in one request
capture "${PYLIB[@]}" - "$A" "$B" "$G" "$F" "$X" <<'EOF'
import base64, io, json, pickle, sys, time
import cloudpickle
from pilot._ffi import ffi, lib
L = lib()
a, b, g, f, x = (int(v) for v in sys.argv[1:])
class Ref:
    def __init__(self, i): self.id = i
class P(cloudpickle.Pickler):
    def persistent_id(self, o):
        return ("pilot-ref", o.id) if isinstance(o, Ref) else None
def b64(call):
    s = io.BytesIO(); P(s, protocol=5).dump(call)
    return base64.b64encode(s.getvalue()).decode()
err = ffi.new("struct pilot_error *")
out = ffi.new("char **")
p = L.pilot_open(ffi.NULL, ffi.NULL, 0, err)
def call(op, args):
    if L.pilot_call(p, op.encode(), json.dumps(args).encode(), out, err):
        raise SystemExit("%s: %s" % (op, ffi.string(err.text).decode()))
    r = json.loads(ffi.string(out[0])); L.pilot_free(out[0]); return r
specs = [{"input": b64((lambda u, v: u * v, (Ref(a), Ref(b)), {})),
          "argv": ["mul"], "refs": [a, b]}]
if L.pilot_submit(p, json.dumps(specs).encode(), out, err):
    raise SystemExit("submit: " + ffi.string(err.text).decode())
(m,) = json.loads(ffi.string(out[0]))["ids"]
L.pilot_free(out[0])
for _ in range(300):
    if call("show", {"id": m})["state"] in ("done", "failed"):
        break
    time.sleep(0.1)
ids = [m, a, g, f, x] + list(range(10 ** 6, 10 ** 6 + 995))
t0 = time.time()
r = call("results", {"ids": ids})
dt = time.time() - t0
print(len(r), [e["id"] for e in r[:5]] == ids[:5])
print(pickle.loads(base64.b64decode(r[0]["result"])), r[0]["status"])
print(pickle.loads(base64.b64decode(r[1]["result"])), r[1]["size"])
print(r[2]["status"], r[2]["result_file"].startswith("/"), r[2]["size"] > 100000)
print(r[3]["status"], type(pickle.loads(base64.b64decode(r[3]["result"]))[0]).__name__)
print(r[4], all(e["status"] is None for e in r[5:]))
sys.stderr.write("1000 ids: %.3f s\n" % dt)
EOF
is "$RC" 0 "libpilot: a submit with refs and a results request run ($ERR)"
lines=$(sed -n 1p <<<"$OUT")
is "$lines" "1000 True" "results: 1,000 ids, one entry each, in order"
is "$(sed -n 2p <<<"$OUT")" "440 ok" "libpilot: pilot_submit of a call with refs: 20 * 22"
is "$(sed -n 3p <<<"$OUT")" "20 5" "results: an inline result, base64, its size"
is "$(sed -n 4p <<<"$OUT")" "ok True True" "results: a result in a file: its path and size"
is "$(sed -n 5p <<<"$OUT")" "raised ValueError" "results: a call that raised: status raised, (exception, traceback)"
is "$(sed -n 6p <<<"$OUT")" "{'id': $X, 'status': None} True" \
    "results: a command and unknown ids: status null"
diag "$ERR"

capture pilot down
unset PILOT_ID
