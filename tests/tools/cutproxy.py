#!/usr/bin/python3
"""tests/tools/cutproxy.py - a TCP relay between an agent and pilotd that
cuts the connection when told to, for tests of lost RUN and KILL messages.

    cutproxy.py LISTEN_PORT_FILE UPSTREAM_HOST:PORT CONTROL_FILE LOG_FILE

It listens on 127.0.0.1 (a free port, written to LISTEN_PORT_FILE) and
relays each connection to UPSTREAM.  It reads the ZMTP 3 frames going
from pilotd to the agent (the greeting, then flags, size, body; CURVE
encrypts the bodies, not the frame sizes) and, before relaying each
frame, reads CONTROL_FILE, one line:

    pass            relay everything (also when the file is missing)
    cut-once N      close both sides instead of relaying the next frame of
                    N bytes or more, then behave as 'pass' (rewrites the
                    file to 'pass' and counts the cut)
    cut-always N    close both sides at every frame of N bytes or more

The agent's ZeroMQ socket connects again by itself, through the relay.
Every frame's size goes to LOG_FILE ("s2c SIZE" lines) with each cut
("cut SIZE"), so that a test can learn the sizes of messages.
"""
import os
import selectors
import socket
import sys


def control(path):
    try:
        with open(path) as f:
            words = f.read().split()
    except OSError:
        return ("pass", 0)
    if len(words) == 2 and words[0] in ("cut-once", "cut-always"):
        return (words[0], int(words[1]))
    return ("pass", 0)


class Pair:
    def __init__(self, down, up):
        self.down = down      # the agent's side
        self.up = up          # pilotd's side
        self.buf = b""        # from pilotd, not yet relayed
        self.greeting = 0     # bytes of the 64-byte greeting relayed


def main():
    port_file, upstream, ctl, log_path = sys.argv[1:5]
    host, port = upstream.rsplit(":", 1)
    log = open(log_path, "a", buffering=1)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    os.rename(tmp, port_file)
    sel = selectors.DefaultSelector()
    sel.register(ls, selectors.EVENT_READ, None)

    def close(p):
        for s in (p.down, p.up):
            try:
                sel.unregister(s)
            except (KeyError, ValueError):
                pass
            s.close()

    def relay_frames(p):
        """Relay the whole frames in p.buf; False when the pair was cut."""
        if p.greeting < 64:
            # relayed as it comes: each side sends a part, then waits
            n = min(64 - p.greeting, len(p.buf))
            p.down.sendall(p.buf[:n])
            p.buf = p.buf[n:]
            p.greeting += n
            if p.greeting < 64:
                return True
        while len(p.buf) >= 2:
            flags = p.buf[0]
            if flags & 0x02:
                if len(p.buf) < 9:
                    return True
                size, head = int.from_bytes(p.buf[1:9], "big"), 9
            else:
                size, head = p.buf[1], 2
            if len(p.buf) < head + size:
                return True
            mode, limit = control(ctl)
            if mode != "pass" and size >= limit:
                log.write("cut %d\n" % size)
                if mode == "cut-once":
                    with open(ctl + ".tmp", "w") as f:
                        f.write("pass\n")
                    os.rename(ctl + ".tmp", ctl)
                close(p)
                return False
            log.write("s2c %d\n" % size)
            p.down.sendall(p.buf[:head + size])
            p.buf = p.buf[head + size:]
        return True

    while True:
        for key, _ in sel.select():
            if key.data is None:
                down, _ = ls.accept()
                try:
                    up = socket.create_connection((host, int(port)))
                except OSError:
                    down.close()
                    continue
                p = Pair(down, up)
                sel.register(down, selectors.EVENT_READ, (p, "down"))
                sel.register(up, selectors.EVENT_READ, (p, "up"))
                continue
            p, side = key.data
            try:
                data = key.fileobj.recv(1 << 20)
            except OSError:
                data = b""
            if not data:
                close(p)
                continue
            try:
                if side == "down":
                    p.up.sendall(data)
                else:
                    p.buf += data
                    relay_frames(p)
            except OSError:
                close(p)


if __name__ == "__main__":
    main()
