#!/usr/bin/env python3
# fork_bomb.py [ATTEMPTS]: a fork bomb that ends. Forks up to ATTEMPTS
# (default 500) children that each sleep 60 s, counts the forks the kernel
# refused, then kills and reaps every child it got and prints
# "started=N failed=M". Used where a pids limit must hold one (the
# resources scenario and the demo); run it only under such a limit.
import os
import signal
import sys

attempts = int(sys.argv[1]) if len(sys.argv) > 1 else 500
kids, failed = [], 0
for _ in range(attempts):
    try:
        pid = os.fork()
    except OSError:
        failed += 1
        continue
    if pid == 0:
        os.execv('/bin/sleep', ['sleep', '60'])
    kids.append(pid)
for k in kids:
    os.kill(k, signal.SIGKILL)
for k in kids:
    os.waitpid(k, 0)
print('started=%d failed=%d' % (len(kids), failed))
