"""What the ctest checks that start the real fastpath binary from Python share
(tests/prometheus/live_prometheus_test.py, tests/kubernetes/manifests_check.py): a failure
type, one deadline for the whole check, children that die with it, and plain HTTP.
Debian's python3 alone: no pip."""
import ctypes
import json
import signal
import time
import urllib.error
import urllib.request

# The `simple` test model's request (INPUT0 + INPUT1, INT32 [1, 16]).
INFER_BODY = json.dumps({"inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16},
]}).encode()


class Failure(Exception):
    pass


class Deadline:
    def __init__(self, seconds):
        self.start = time.monotonic()
        self.end = self.start + seconds

    def left(self):
        return self.end - time.monotonic()

    def elapsed(self):
        return time.monotonic() - self.start

    def wait_for(self, what, poll, interval=0.2):
        """Calls poll() until it returns a true value, which it returns; Failure at the
        deadline, with the last exception poll() raised."""
        last = None
        while self.left() > 0:
            try:
                value = poll()
                if value:
                    return value
            except (OSError, ValueError, KeyError, urllib.error.URLError) as e:
                last = e
            time.sleep(interval)
        raise Failure("timed out waiting for %s%s" % (what, " (last: %r)" % last if last else ""))


def die_with_parent():
    """In the child (preexec_fn): SIGKILL when the check dies, however it dies (Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def http(method, url, body=None, timeout=5):
    """(status, body text) of one request; an HTTP error status is an answer, not an error."""
    request = urllib.request.Request(url, data=body, method=method,
                                     headers={"Content-Type": "application/json"} if body else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
