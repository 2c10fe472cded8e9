#!/usr/bin/env python3
"""An interactive agent for the tests: it echoes its user's lines, says
each SIGINT it gets, and ignores SIGTERM (so only SIGKILL ends it)."""
import signal, sys
signal.signal(signal.SIGINT, lambda *a: print("got INT", flush=True))
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
for line in sys.stdin:
    print("heard", line.strip(), flush=True)
    if line.strip() == "bye":
        sys.exit(0)
    if line.strip() == "fail":
        sys.exit(4)
