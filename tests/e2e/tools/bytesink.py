#!/usr/bin/env python3
# bytesink.py: counts what one side of a TCP flow really delivered, for the
# byte budget scenarios (t_budget.sh).
#   serve LOG ADDR PORT...  listen on ADDR at each PORT; for every
#                           connection, when it ends (EOF or reset), write
#                           "done LPORT RPORT BYTES" to LOG; "ready" first
#   send HOST PORT N        connect, send N bytes, print "port LOCALPORT"
#                           then "sent BYTES ok|reset|timeout"
# Bounded: a connection lives at most 20 s, a sender at most 20 s.
import socket
import sys
import threading
import time


def serve(log, addr, ports):
    out = open(log, "a", buffering=1)
    lock = threading.Lock()

    def one(c, lport):
        rport = c.getpeername()[1]
        c.settimeout(20)
        n = 0
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    break
                n += len(b)
        except OSError:
            pass
        c.close()
        with lock:
            out.write("done %d %d %d\n" % (lport, rport, n))

    def listen(port):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, port))
        s.listen(64)
        while True:
            c, _ = s.accept()
            threading.Thread(target=one, args=(c, port), daemon=True).start()

    for p in ports:
        threading.Thread(target=listen, args=(p,), daemon=True).start()
    time.sleep(0.2)
    out.write("ready\n")
    while True:
        time.sleep(3600)


def send(host, port, n):
    s = socket.create_connection((host, port), timeout=10)
    print("port %d" % s.getsockname()[1], flush=True)
    s.settimeout(10)
    buf = b"x" * 4096
    sent, how = 0, "ok"
    deadline = time.monotonic() + 20
    try:
        while sent < n and time.monotonic() < deadline:
            sent += s.send(buf[: min(len(buf), n - sent)])
        s.shutdown(socket.SHUT_WR)
        # The far side closes when it has read all: wait for that (or
        # for the reset of a spent budget), bounded by the timeout.
        while s.recv(4096):
            pass
    except socket.timeout:
        how = "timeout"
    except OSError:
        how = "reset"
    s.close()
    print("sent %d %s" % (sent, how), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3], [int(p) for p in sys.argv[4:]])
    elif sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit("usage: bytesink.py serve LOG ADDR PORT... | send HOST PORT N")
