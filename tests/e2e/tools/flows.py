# flows.py: the flow records' test client and server (tests/e2e/t_flows.sh).
#   flows.py serve LOG PORT...        TCP on every address, on each PORT:
#                                     reads to the end, logs "read PORT PEER N"
#                                     (N bytes from peer port PEER), answers
#                                     "ok" and closes
#   flows.py slow ADDR PORT BYTES SECS  one flow: prints "port P", sends
#                                     BYTES spread over SECS seconds, prints
#                                     the answer, then resets
#   flows.py burst ADDR PORTS N        N flows per port (comma-separated),
#                                     alternating, each 100 bytes, all held
#                                     open, then all reset together;
#                                     prints "done M" (M flows that opened)
#   flows.py hold ADDR PORT NAME GO    one HTTP flow for NAME: prints "port P"
#                                     once its request head is sent, holds it
#                                     open until the file GO exists (at most
#                                     900 s), then ends it and prints the answer
#   flows.py churn ADDR PORT NAME N    N HTTP flows for NAME, four at a time,
#                                     each answered, then reset; "done M"
import os, socket, struct, sys, threading, time

def log(path, line):
    with open(path, "a") as f:
        f.write(line + "\n")

def serve(logp, ports):
    def conn(c, port):
        peer = c.getpeername()[1]
        n = 0
        try:
            c.settimeout(930)       # a held flow waits up to 900 s
            while True:
                d = c.recv(65536)
                if not d:
                    break
                n += len(d)
            c.sendall(b"ok\n")
        except OSError:
            pass
        log(logp, "read %d %d %d" % (port, peer, n))
        c.close()
    def listen(port):
        l = socket.socket()
        l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        l.bind(("0.0.0.0", port))
        l.listen(512)
        while True:
            c, _ = l.accept()
            threading.Thread(target=conn, args=(c, port), daemon=True).start()
    for p in ports:
        threading.Thread(target=listen, args=(int(p),), daemon=True).start()
    log(logp, "ready")
    while True:
        time.sleep(3600)

def reset(s):
    # A reset: conntrack forgets the flow in seconds, not minutes.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()

def slow(addr, port, total, secs):
    s = socket.create_connection((addr, int(port)), timeout=10)
    print("port %d" % s.getsockname()[1], flush=True)
    total, secs = int(total), float(secs)
    steps = max(1, int(secs * 10))
    chunk = total // steps
    sent = 0
    for i in range(steps):
        n = chunk if i < steps - 1 else total - sent
        s.sendall(os.urandom(n))
        sent += n
        time.sleep(secs / steps)    # the workload's pace, not a wait for a result
    s.shutdown(socket.SHUT_WR)
    s.settimeout(30)
    try:
        print((s.recv(16).decode(errors="replace").strip() or "eof") + " %d" % sent)
    except OSError as e:
        print("refused " + type(e).__name__)
    reset(s)

def burst(addr, ports, n):
    # Every flow is opened (and carries its bytes) before any ends, and
    # then all end together: their ends fall in the same second or two
    # however slowly a loaded machine opened them, which is what the
    # per-second itemised bound is tested on.
    ports = [int(p) for p in ports.split(",")]
    held = []
    for i in range(int(n)):
        for p in ports:
            try:
                s = socket.create_connection((addr, p), timeout=5)
                s.sendall(b"x" * 100)
                held.append(s)
            except OSError:
                pass
    for s in held:
        reset(s)
    print("done %d" % len(held))

def head(name):
    return ("GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % name).encode()

def hold(addr, port, name, go):
    s = socket.create_connection((addr, int(port)), timeout=10)
    s.sendall(head(name))
    print("port %d" % s.getsockname()[1], flush=True)
    deadline = time.monotonic() + 900
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.1)
    s.sendall(b"x" * 1000)
    s.shutdown(socket.SHUT_WR)
    s.settimeout(30)
    try:
        print(s.recv(16).decode(errors="replace").strip() or "eof")
    except OSError as e:
        print("refused " + type(e).__name__)
    reset(s)

def churn(addr, port, name, n):
    # Four at a time: the gate answers each in turn, the run stays short.
    done = [0] * 4
    def run(k, count):
        for i in range(count):
            try:
                s = socket.create_connection((addr, int(port)), timeout=5)
                s.sendall(head(name))
                s.shutdown(socket.SHUT_WR)
                s.settimeout(5)
                if s.recv(16).startswith(b"ok"):
                    done[k] += 1
                reset(s)
            except OSError:
                pass
    n = int(n)
    ts = [threading.Thread(target=run, args=(k, n // 4 + (k < n % 4)))
          for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("done %d" % sum(done))

if __name__ == "__main__":
    a = sys.argv[1:]
    if a[0] == "serve":
        serve(a[1], a[2:])
    elif a[0] == "slow":
        slow(*a[1:5])
    elif a[0] == "burst":
        burst(*a[1:4])
    elif a[0] == "hold":
        hold(*a[1:5])
    elif a[0] == "churn":
        churn(*a[1:5])
    else:
        sys.exit("unknown mode " + a[0])
