#!/usr/bin/env python3
"""hostile.py: the hostile sandbox of t_hostile_limits.sh (standard library
only). Every mode is bounded in count and in time, and talks only to the
address it is given (the service address of the world's sluiced).

  hold HOST PORT N SECONDS KIND
      open up to N TCP connections to HOST:PORT and keep them for SECONDS;
      KIND http: each sends half a request (the request line and one header,
      never the blank line), dns: each sends one byte of a length prefix.
      Prints "opened O" once all are made (O connected and sent), then
      "alive A": A of them were still open (not closed or reset by the
      server) after SECONDS.
  slowloris HOST PORT SECONDS
      one HTTP request whose headers are sent a byte a second, for at most
      SECONDS; prints "closed-after S" (the server closed it after S
      seconds) or "open-after S" (it was still open when we stopped).
  flood HOST PORT SECONDS MAX NAME
      UDP queries for <random>.NAME, as fast as the socket takes them, for
      SECONDS or MAX queries; prints "started", then "sent N".
  lat HOST PORT NAME COUNT
      COUNT A queries for NAME one after another (1 s bound each); prints
      the median latency in microseconds and how many got no answer:
      "median_us M lost L".
  tcpq HOST PORT NAME
      one A query over TCP (3 s bound); prints the rcode, or "none".
"""
import os
import random
import socket
import struct
import sys
import time


def query(name, qid, qtype=1):
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\x00" + struct.pack(">HH", qtype, 1)


def hold(host, port, n, seconds, kind):
    socks = []
    deadline = time.monotonic() + seconds
    for i in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        try:
            s.connect((host, port))
            if kind == "http":
                s.sendall(b"POST /mcp/x HTTP/1.1\r\nHost: " +
                          host.encode() + b"\r\n")
            else:
                s.sendall(b"\x00")
        except OSError:
            s.close()
            continue
        s.setblocking(False)
        socks.append(s)
    print("opened %d" % len(socks), flush=True)
    while time.monotonic() < deadline:
        time.sleep(0.2)
    alive = 0
    for s in socks:
        try:
            # b"": closed by the server (data: answered, then closed).
            s.recv(1)
        except BlockingIOError:
            alive += 1
        except OSError:
            pass
        s.close()
    print("alive %d" % alive, flush=True)


def slowloris(host, port, seconds):
    s = socket.create_connection((host, port), timeout=3)
    req = (b"POST /mcp/x HTTP/1.1\r\nHost: " + host.encode() +
           b"\r\nX-Padding: " + b"a" * 4096)
    t0 = time.monotonic()
    s.setblocking(False)
    i = 0
    while time.monotonic() - t0 < seconds:
        try:
            d = s.recv(4096)
            if d == b"" or d:
                # Closed (or answered, e.g. 408, then closed).
                print("closed-after %.1f" % (time.monotonic() - t0))
                return
        except BlockingIOError:
            pass
        except OSError:
            print("closed-after %.1f" % (time.monotonic() - t0))
            return
        try:
            s.send(req[i % len(req):i % len(req) + 1])
            i += 1
        except OSError:
            print("closed-after %.1f" % (time.monotonic() - t0))
            return
        time.sleep(1)
    print("open-after %.1f" % (time.monotonic() - t0))


def flood(host, port, seconds, maxn, name):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
    s.connect((host, port))
    s.setblocking(False)
    t_end = time.monotonic() + seconds
    sent = 0
    rnd = random.Random(os.getpid())
    print("started", flush=True)
    while sent < maxn and time.monotonic() < t_end:
        q = query("f%08x.%s" % (rnd.getrandbits(32), name),
                  rnd.getrandbits(16))
        try:
            s.send(q)
            sent += 1
        except BlockingIOError:
            time.sleep(0.0005)
        except OSError:
            time.sleep(0.001)
        # Answers are not wanted: drop what has come in.
        if sent % 64 == 0:
            try:
                while True:
                    s.recv(4096)
            except OSError:
                pass
    print("sent %d" % sent)


def lat(host, port, name, count):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((host, port))
    s.settimeout(1)
    rnd = random.Random(os.getpid() ^ 0x5a5a)
    res = []
    lost = 0
    for i in range(count):
        qid = rnd.getrandbits(16)
        t0 = time.monotonic()
        s.send(query(name, qid))
        while True:
            try:
                d = s.recv(4096)
            except socket.timeout:
                lost += 1
                break
            if len(d) >= 2 and struct.unpack(">H", d[:2])[0] == qid:
                res.append(time.monotonic() - t0)
                break
        time.sleep(0.01)
    # A lost query counts as a 1 s answer: a flood that makes the
    # listener drop queries raises latency as surely as one that delays.
    res += [1.0] * lost
    res.sort()
    med = res[len(res) // 2]
    p90 = res[(len(res) * 9) // 10]
    print("median_us %d p90_us %d lost %d" % (int(med * 1e6),
          int(p90 * 1e6), lost))


def tcpq(host, port, name):
    try:
        s = socket.create_connection((host, port), timeout=3)
        s.settimeout(3)
        q = query(name, 0x1234)
        s.sendall(struct.pack(">H", len(q)) + q)
        hdr = b""
        while len(hdr) < 2:
            d = s.recv(2 - len(hdr))
            if not d:
                raise OSError("closed")
            hdr += d
        n = struct.unpack(">H", hdr)[0]
        m = b""
        while len(m) < n:
            d = s.recv(n - len(m))
            if not d:
                raise OSError("closed")
            m += d
        print(m[3] & 0xF)
    except OSError:
        print("none")


def main(a):
    if len(a) >= 6 and a[0] == "hold":
        hold(a[1], int(a[2]), int(a[3]), float(a[4]), a[5])
    elif len(a) == 4 and a[0] == "slowloris":
        slowloris(a[1], int(a[2]), float(a[3]))
    elif len(a) == 6 and a[0] == "flood":
        flood(a[1], int(a[2]), float(a[3]), int(a[4]), a[5])
    elif len(a) == 5 and a[0] == "lat":
        lat(a[1], int(a[2]), a[3], int(a[4]))
    elif len(a) == 4 and a[0] == "tcpq":
        tcpq(a[1], int(a[2]), a[3])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
