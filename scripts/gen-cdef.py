#!/usr/bin/python3
"""scripts/gen-cdef.py - the cffi declarations of libpilot, from its header

Prints python/pilot/_cdef.py: the block of lib/pilot.h between the
"cdef: begin" and "cdef: end" comments, comments and blank lines
removed, as the string CDEF (make cdef; tests/py/test_cdef.py checks
the file in the tree is what this prints).

usage: gen-cdef.py lib/pilot.h > python/pilot/_cdef.py
"""
import re
import sys


def cdef(header_text):
    """The declarations of the header's cdef block, one a line."""
    m = re.search(r"/\* cdef: begin \*/\n(.*?)/\* cdef: end \*/",
                  header_text, re.S)
    if not m:
        raise SystemExit("gen-cdef: no cdef block in the header")
    text = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    lines = [line.rstrip() for line in text.splitlines()]
    return "\n".join(line for line in lines if line.strip()) + "\n"


def module(header_text):
    """python/pilot/_cdef.py's text."""
    return ('"""pilot._cdef - libpilot\'s declarations for cffi (made by '
            'scripts/gen-cdef.py\nfrom lib/pilot.h: do not edit; make cdef '
            'writes it again)"""\n\nCDEF = """\n' + cdef(header_text)
            + '"""\n')


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: gen-cdef.py lib/pilot.h")
    with open(sys.argv[1]) as f:
        sys.stdout.write(module(f.read()))
