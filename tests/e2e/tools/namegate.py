# namegate.py: the name gate's test client and servers (tests/e2e/t_namegate.sh).
#   namegate.py serve LOG CERT KEY ADDR   TLS on ADDR:8443, HTTP on ADDR:8080
#   namegate.py MODE ADDR PORT NAME [GO]   a client; prints "port P" then the
#                                     outcome: "ok ..." (an answer of the
#                                     server), "bytes" (TLS bytes came back)
#                                     or "refused ..." (reset, closed, none)
#   namegate.py reuse ADDR PORT NAME    two flows from one source port, the
#                                     second's request 3 s after its SYN:
#                                     "flow1 ..." and "flow2 ..." outcomes
#   namegate.py many ADDR PORT NAME N   two rounds of N flows, each round
#                                     opened at once: "ok K" answers
#   namegate.py bench ADDR PORT NAME N  N TLS connections one after the
#                                     other: "us X" per connection (connect
#                                     to the answer's first byte), then
#                                     "rate R" connections/s
import os, socket, ssl, struct, sys, threading, time

def log(path, line):
    with open(path, "a") as f:
        f.write(line + "\n")

def serve(logp, cert, key, addr):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    def sni(s, name, c):
        log(logp, "sni %s %d" % (name, s.getpeername()[1]))
    ctx.sni_callback = sni
    def tls_conn(c):
        port = c.getpeername()[1]
        try:
            s = ctx.wrap_socket(c, server_side=True)
            req = s.recv(4096)
            if not req.startswith(b"GET /bench"):
                log(logp, "tls-req %d %r" % (port, req[:60]))
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
            s.close()
        except Exception as e:
            log(logp, "tls-fail %d %s" % (port, type(e).__name__))
    def http_conn(c):
        port = c.getpeername()[1]
        try:
            c.settimeout(5)
            req = c.recv(4096)
            if req:
                log(logp, "http-req %d %r" % (port, req[:80]))
                head, _, body = req.partition(b"\r\n\r\n")
                want = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        want = int(line.split(b":", 1)[1])
                got = len(body)
                while got < want:
                    d = c.recv(65536)
                    if not d:
                        break
                    got += len(d)
                if want:
                    log(logp, "http-body %d %d" % (port, got))
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
            c.close()
        except Exception as e:
            log(logp, "http-fail %d %s" % (port, type(e).__name__))
    def listen(port, fn):
        l = socket.socket()
        l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        l.bind((addr, port))
        l.listen(1024)
        while True:
            c, _ = l.accept()
            threading.Thread(target=fn, args=(c,), daemon=True).start()
    threading.Thread(target=listen, args=(8080, http_conn), daemon=True).start()
    threading.Thread(target=listen, args=(8443, tls_conn), daemon=True).start()
    threading.Thread(target=listen, args=(9443, tls_conn), daemon=True).start()
    log(logp, "ready")
    while True:
        time.sleep(3600)

def ext(t, body):
    return struct.pack("!HH", t, len(body)) + body

def hello(name, ech=None):
    exts = b""
    if name:
        n = name.encode()
        exts += ext(0, struct.pack("!HBH", len(n) + 3, 0, len(n)) + n)
    exts += ext(10, struct.pack("!HH", 2, 29))            # groups: x25519
    exts += ext(13, struct.pack("!HHH", 4, 0x0804, 0x0403))  # sig algs
    exts += ext(43, b"\x02\x03\x03")                      # TLS 1.2
    if ech is not None:
        # An outer ECHClientHello: HPKE suite (HKDF-SHA256, AES-128-GCM),
        # config id, enc, payload.
        body = (b"\x00" + struct.pack("!HH", 1, 1) + bytes([ech]) +
                struct.pack("!H", 32) + os.urandom(32) +
                struct.pack("!H", 144) + os.urandom(144))
        exts += ext(0xfe0d, body)
    ch = (b"\x03\x03" + os.urandom(32) + b"\x00" +
          struct.pack("!H", 4) + b"\xc0\x2f\x00\x9c" + b"\x01\x00" +
          struct.pack("!H", len(exts)) + exts)
    hs = b"\x01" + struct.pack("!I", len(ch))[1:] + ch
    return b"\x16\x03\x01" + struct.pack("!H", len(hs)) + hs

def outcome(s):
    try:
        s.settimeout(5)
        d = s.recv(4096)
    except (ConnectionResetError, socket.timeout, OSError) as e:
        return "refused " + type(e).__name__
    if not d:
        return "refused eof"
    if d[:1] in (b"\x15", b"\x16"):
        return "bytes"
    return "ok " + d.decode(errors="replace").split("\r\n")[0]

def reuse(addr, port, name):
    # Two HTTP flows from one source port, the second opened at once
    # after the first's reset (while the gate still remembers the first)
    # and sending its request only 3 s after its SYN: past the gate's
    # 2 s bound from the first flow's data, within its 30 s from a SYN.
    head = ("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % name).encode()
    sport = 0
    for i in range(2):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("", sport))
        s.settimeout(5)
        s.connect((addr, int(port)))
        sport = s.getsockname()[1]
        print("port %d" % sport, flush=True)
        if i == 1:
            time.sleep(3)       # the workload's pause, not a wait for a result
        s.sendall(head)
        print("flow%d %s" % (i + 1, outcome(s)), flush=True)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()

def many(addr, port, name, n):
    # Two rounds of N HTTP flows: each round opens all N before any sends
    # its request, so all N wait for the gate's verdict at once, and then
    # all are decided; the second round opens while the gate still
    # remembers the first round's decisions. Prints "ok K", K the
    # answers of the server.
    head = ("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % name).encode()
    k = 0
    held = []
    for _ in range(2):
        r = [socket.create_connection((addr, int(port)), timeout=10)
             for _ in range(int(n))]
        for s in r:
            s.sendall(head)
        for s in r:
            if outcome(s).startswith("ok HTTP/1.1 200"):
                k += 1
        held += r
    for s in held:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    print("ok %d" % k)

def client(mode, addr, port, name, go=None):
    port = int(port)
    if mode == "reuse":
        reuse(addr, port, name)
        return
    if mode == "many":
        many(addr, port, name, go)
        return
    s = socket.create_connection((addr, port), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    print("port %d" % s.getsockname()[1], flush=True)
    try:
        if mode in ("tls", "nosni"):
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            try:
                t = ctx.wrap_socket(s, server_hostname=name if mode == "tls" else None)
                t.sendall(("GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % name).encode())
                print(outcome(t))
            except (ssl.SSLError, OSError) as e:
                print("refused " + type(e).__name__)
            return
        if mode == "http":
            s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % name).encode())
        elif mode == "upload":      # a POST of 10 MiB, then a reset
            body = os.urandom(10 * 1024 * 1024)
            s.sendall(("POST /up HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n"
                       % (name, len(body))).encode() + body)
            print(outcome(s))
            # A reset: conntrack forgets the flow in seconds, not minutes.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return
        elif mode == "split":       # one ClientHello in three segments
            h = hello(name)
            a, b = len(h) // 3, 2 * len(h) // 3
            for part in (h[:a], h[a:b], h[b:]):
                s.sendall(part)
                time.sleep(0.05)
        elif mode == "ech":         # the config id the world's DNS publishes
            s.sendall(hello(name, ech=0x2a))
        elif mode == "grease":      # a config id no one publishes
            s.sendall(hello(name, ech=0x17))
        elif mode == "hello":
            s.sendall(hello(name))
        elif mode == "wait":        # a ClientHello once GO exists, then a wait
            while not os.path.exists(go):
                time.sleep(0.05)
            s.sendall(hello(name))
            print("sent", flush=True)
            s.settimeout(20)
            try:
                d = s.recv(4096)
                print("bytes" if d else "refused eof")
            except OSError as e:
                print("refused " + type(e).__name__)
            return
        print(outcome(s))
    finally:
        s.close()

def bench(addr, port, name, n):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    req = ("GET /bench HTTP/1.1\r\nHost: %s\r\n\r\n" % name).encode()
    t0 = time.perf_counter()
    for _ in range(int(n)):
        a = time.perf_counter()
        s = socket.create_connection((addr, int(port)), timeout=5)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t = ctx.wrap_socket(s, server_hostname=name)
        t.sendall(req)
        if not t.recv(1):
            sys.exit("no answer")
        print("us %.1f" % ((time.perf_counter() - a) * 1e6))
        t.close()
    print("rate %.1f" % (int(n) / (time.perf_counter() - t0)))

if sys.argv[1] == "serve":
    serve(*sys.argv[2:6])
elif sys.argv[1] == "bench":
    bench(*sys.argv[2:6])
else:
    client(*sys.argv[1:6])
