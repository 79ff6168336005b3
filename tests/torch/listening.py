"""wait_listening(port): for the torch tests that start a process beside a
job whose rank 0 hosts the store on port."""
import time


def wait_listening(port, seconds=60):
    """Until a socket listens on port (read from /proc/net); True if one did.
    A client that retries its connect to a loopback port before then can meet
    itself (TCP's simultaneous open) and take the port from the server to come."""
    until = time.time() + seconds
    while time.time() < until:
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                rows = [r.split() for r in open(table).read().splitlines()[1:]]
            except OSError:
                continue
            if any(r[1].endswith(":%04X" % port) and r[3] == "0A" for r in rows):
                return True
        time.sleep(0.05)
    print("nothing listened on port %d within %d s; starting the outsider anyway" % (port, seconds), flush=True)
    return False
