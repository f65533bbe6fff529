#!/usr/bin/env python3
"""A real Prometheus scrapes the real fastpath, and answers every query we ship.

Usage: live_prometheus_test.py FASTPATH_BINARY TEST_REPOSITORY DASHBOARD.json RULES.yaml

1. Starts `fastpath serve` on loopback (ports 0, read back from --port-file) with the test
   repository's `simple` model (given a memory cap and a canary every second, so the memory and
   canary families are all there), a
   replayed GPU trace (--gpu-trace: one GPU, every field, a throttle and an application XID,
   so every fastpath_gpu_* family is there and nothing is quarantined) and a drift window of
   seconds, and keeps sending inferences until the end (the drift ratio needs 20 in its window).
2. Starts Debian's Prometheus (/usr/bin/prometheus, tools/setup.sh --test) on a free port with
   a temporary storage folder, the rule file, and one scrape job every second at fastpath's
   metrics port; waits until its HTTP API returns fastpath_server_ready, a fastpath_gpu_* and an
   nv_inference_* series from that job.
3. Sends every dashboard expr (Grafana's variables replaced, grafana_dashboard_check.py) and
   every rule's expr (as Prometheus loaded them, /api/v1/rules) to /api/v1/query: any that
   Prometheus refuses fails the test; every rule must evaluate with health "ok". Every
   fastpath_* and nv_* name the dashboard and the rules use must reach Prometheus within the
   deadline, except NOT_YET_EXPORTED, BUILD_DEPENDENT names this build does not export, and
   the leak gauges (AFTER_THE_LEAK_WINDOW), absent until the leak window is judged.
Everything runs under one deadline (DEADLINE_S); both processes are killed on the way out,
even if the test is killed (PR_SET_PDEATHSIG), and their logs are printed on a failure.
Debian's python3 alone: no pip.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import grafana_dashboard_check as dashboard_check  # noqa: E402
from live_checks import INFER_BODY, Deadline, Failure, die_with_parent, http  # noqa: E402

DEADLINE_S = 60
PROMETHEUS = "/usr/bin/prometheus"

# Names that the dashboard and the rules may use before fastpath exports them (none today).
# Remove each one when it lands on the scrape (the test says so when it sees one there).
NOT_YET_EXPORTED = set()

# Names only some builds export, and the start-up log line that says this one does: the heap's
# gauges come from jemalloc, which sanitizer builds (and -DFASTPATH_ALLOCATOR=system) leave out.
BUILD_DEPENDENT = {"fastpath_heap_bytes": "memory allocator: jemalloc"}

# Names exported once the leak window (60 s at the least) is judged, past this test's
# deadline; tests/server/memory_watch_test.cc sees them on a manual clock.
AFTER_THE_LEAK_WINDOW = {"fastpath_memory_leak_suspected",
                         "fastpath_memory_leak_slope_bytes_per_second"}

# One GPU at rest, then from 300 ms on held down by SW power cap and HW thermal slowdown, with
# an application XID (13: counted, never quarantines).
TRACE = [
    {"t_ms": 0, "gpu": 0, "uuid": "GPU-7e57", "temperature_c": 52, "sm_clock_mhz": 1980,
     "mem_clock_mhz": 2619, "utilization_ratio": 0.4, "memory_used_bytes": 1073741824,
     "memory_total_bytes": 150323855360, "power_w": 310.5, "power_limit_w": 700,
     "clocks_event_reasons": 0, "ecc_uncorrected_volatile": 0, "remapped_rows_uncorrectable": 0},
    {"t_ms": 300, "gpu": 0, "temperature_c": 87, "sm_clock_mhz": 1410, "mem_clock_mhz": 2619,
     "utilization_ratio": 0.97, "memory_used_bytes": 2147483648,
     "memory_total_bytes": 150323855360, "power_w": 690, "power_limit_w": 700,
     "clocks_event_reasons": "0x44", "ecc_uncorrected_volatile": 0,
     "remapped_rows_uncorrectable": 0, "xid": 13},
]

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Processes:
    """The processes this test started, stopped on the way out."""

    def __init__(self):
        self.running = []  # (name, Popen, log path)

    def start(self, name, argv, log):
        with open(log, "wb") as out:
            p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        self.running.append((name, p, log))
        return p

    def stop_all(self):
        for _, p, _ in self.running:
            if p.poll() is None:
                p.terminate()
        for _, p, _ in self.running:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def print_logs(self, lines=80):
        for name, p, log in self.running:
            try:
                with open(log, encoding="utf-8", errors="replace") as f:
                    tail = f.read().splitlines()[-lines:]
            except OSError as e:
                tail = ["(no log: %s)" % e]
            print("---- %s (pid %d, exit %s), last %d lines of %s ----"
                  % (name, p.pid, p.poll(), len(tail), log), file=sys.stderr)
            print("\n".join(tail), file=sys.stderr)


def start_fastpath(procs, deadline, binary, test_repository, work):
    repository = os.path.join(work, "models")
    shutil.copytree(os.path.join(test_repository, "simple"), os.path.join(repository, "simple"))
    with open(os.path.join(repository, "simple", "config.pbtxt"), "a", encoding="utf-8") as f:
        f.write('\nparameters { key: "fastpath.memory.limit_bytes" '
                'value { string_value: "64Mi" } }\n'
                'parameters { key: "fastpath.canary.interval_s" value { string_value: "1" } }\n')
    trace = os.path.join(work, "gpu-trace.jsonl")
    with open(trace, "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(line) + "\n" for line in TRACE))
    port_file = os.path.join(work, "ports")
    p = procs.start("fastpath", [
        binary, "serve", "--model-repository", repository, "--host", "127.0.0.1",
        "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0", "--port-file", port_file,
        "--gpu-trace", trace, "--gpu-sample-interval-ms", "100",
        "--memory-sample-interval-ms", "200", "--drift-window", "5s",
        "--grace-period-secs", "1"],
        os.path.join(work, "fastpath.log"))

    def ports():
        if p.poll() is not None:
            raise Failure("fastpath exited during start-up (exit %s)" % p.returncode)
        with open(port_file, encoding="utf-8") as f:
            fields = dict(item.split("=") for item in f.read().split())
        return {k: int(v) for k, v in fields.items()} if "metrics" in fields else None

    found = deadline.wait_for("fastpath's port file", ports)
    base = "http://127.0.0.1:%d" % found["http"]
    deadline.wait_for("fastpath ready", lambda: http("GET", base + "/v2/health/ready")[0] == 200)
    status, body = http("POST", base + "/v2/models/simple/infer", INFER_BODY)
    if status != 200:
        raise Failure("inference answered %d: %s" % (status, body))
    return found["metrics"], base


class Load:
    """Sends inferences one after another, about 50 a second, until stopped."""

    def __init__(self, base):
        self.base, self.sent, self.failed = base, 0, []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.wait(0.02):
            try:
                status, body = http("POST", self.base + "/v2/models/simple/infer", INFER_BODY)
            except OSError as e:
                status, body = 0, str(e)
            self.sent += 1
            if status != 200 and len(self.failed) < 5:
                self.failed.append("%d: %s" % (status, body[:200]))

    def end(self):
        self.stop.set()
        self.thread.join(timeout=10)


def start_prometheus(procs, deadline, metrics_port, rules, work):
    config = os.path.join(work, "prometheus.yml")
    with open(config, "w", encoding="utf-8") as f:
        f.write("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                "rule_files: [%s]\n"
                "scrape_configs:\n"
                "  - job_name: fastpath\n"
                "    static_configs: [{targets: ['127.0.0.1:%d']}]\n"
                % (json.dumps(os.path.abspath(rules)), metrics_port))
    # The port is free when picked and may not be when Prometheus binds it: try again.
    for attempt in range(3):
        port = free_port()
        p = procs.start("prometheus", [
            PROMETHEUS, "--config.file=" + config,
            "--storage.tsdb.path=" + os.path.join(work, "data-%d" % attempt),
            "--web.listen-address=127.0.0.1:%d" % port, "--log.level=info"],
            os.path.join(work, "prometheus-%d.log" % attempt))
        base = "http://127.0.0.1:%d" % port

        def ready():
            if p.poll() is not None:
                return "exited"
            return http("GET", base + "/-/ready", timeout=2)[0] == 200 and "ready"

        if deadline.wait_for("Prometheus ready", ready) == "ready":
            return base
    raise Failure("Prometheus exited at start three times")


def api(base, path, **params):
    status, body = http("GET", base + path + "?" + urllib.parse.urlencode(params, doseq=True))
    try:
        reply = json.loads(body)
    except ValueError:
        reply = {"status": "error", "errorType": "http %d" % status, "error": body[:200]}
    return reply


def query(base, expr):
    return api(base, "/api/v1/query", query=expr)


def run(binary, test_repository, dashboard_path, rules, work, procs):
    deadline = Deadline(DEADLINE_S)
    if not os.access(PROMETHEUS, os.X_OK):
        raise Failure("%s is missing: it is Debian's 'prometheus' package, which "
                      "tools/setup.sh --test (the test command, tools/test.sh) installs" % PROMETHEUS)
    metrics_port, fastpath = start_fastpath(procs, deadline, binary, test_repository, work)
    load = Load(fastpath)
    try:
        check(deadline, procs, metrics_port, dashboard_path, rules, work)
    finally:
        load.end()
    if load.failed:
        raise Failure("inferences failed: %s" % "; ".join(load.failed))


def check(deadline, procs, metrics_port, dashboard_path, rules, work):
    prometheus = start_prometheus(procs, deadline, metrics_port, rules, work)

    wanted = ['fastpath_server_ready{job="fastpath"}',
              '{__name__=~"fastpath_gpu_.+", job="fastpath"}',
              '{__name__=~"nv_inference_.+", job="fastpath"}']

    def scraped():
        return all(query(prometheus, q).get("data", {}).get("result") for q in wanted)

    deadline.wait_for("Prometheus to return %s" % ", ".join(wanted), scraped, interval=0.5)

    # Every rule evaluated at least once, each with health "ok".
    def rules_evaluated():
        groups = api(prometheus, "/api/v1/rules")["data"]["groups"]
        loaded = [r for g in groups for r in g["rules"]]
        if loaded and all(not r.get("lastEvaluation", "").startswith("0001") for r in loaded):
            return loaded
        return None

    loaded = deadline.wait_for("every rule evaluated", rules_evaluated, interval=0.5)
    errors = []
    for rule in loaded:
        if rule.get("health") != "ok":
            errors.append("rule %s: health %s: %s" % (rule["name"], rule.get("health"),
                                                      rule.get("lastError")))

    dashboard = dashboard_check.load(dashboard_path)
    used = dashboard_check.dashboard_metric_names(dashboard)
    for rule in loaded:
        used |= dashboard_check.metric_names(rule["query"])
    with open(os.path.join(work, "fastpath.log"), encoding="utf-8", errors="replace") as f:
        log = f.read()
    used -= {name for name, line in BUILD_DEPENDENT.items() if line not in log}
    used -= AFTER_THE_LEAK_WINDOW
    names = set()

    def every_name_scraped():
        names.clear()
        names.update(api(prometheus, "/api/v1/label/__name__/values",
                         **{"match[]": '{job="fastpath"}'})["data"])
        return not (used - names - NOT_YET_EXPORTED)

    try:
        deadline.wait_for("every name the dashboard and the rules use", every_name_scraped,
                          interval=0.5)
    except Failure:
        pass  # named one by one below
    print("Prometheus has %d names from fastpath, %d of them fastpath_gpu_*"
          % (len(names), len([n for n in names if n.startswith("fastpath_gpu_")])))

    queries = [(where, dashboard_check.substitute(expr, dashboard))
               for where, expr in dashboard_check.exprs(dashboard)]
    queries += [("rule %s" % r["name"], r["query"]) for r in loaded]
    for where, expr in queries:
        reply = query(prometheus, expr)
        if reply.get("status") != "success":
            errors.append("%s: Prometheus refuses %r: %s: %s"
                          % (where, expr, reply.get("errorType"), reply.get("error")))

    missing = sorted(used - names - NOT_YET_EXPORTED)
    for name in missing:
        errors.append("%s is used by the dashboard or the rules but not on fastpath's scrape" % name)
    for name in sorted(NOT_YET_EXPORTED & names):
        print("NOTE: %s is on the scrape now: remove it from NOT_YET_EXPORTED" % name)

    if errors:
        raise Failure("\n".join(errors))
    print("%d queries (%d dashboard, %d rules) accepted by Prometheus; %d names used, all on "
          "the scrape but %d not yet exported; %.1f s"
          % (len(queries), len(queries) - len(loaded), len(loaded), len(used),
             len(used & NOT_YET_EXPORTED), DEADLINE_S - deadline.left()))


def main(argv):
    if len(argv) != 5:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    binary, test_repository, dashboard_path, rules = argv[1:]
    work = tempfile.mkdtemp(prefix="fastpath_prometheus_")
    procs = Processes()
    # SIGTERM (ctest's timeout, a Ctrl-C'd parent) unwinds through the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ok = False
    try:
        run(binary, test_repository, dashboard_path, rules, work, procs)
        ok = True
    except (Failure, OSError) as e:
        print("FAIL: %s" % e, file=sys.stderr)
    finally:
        procs.stop_all()
        if not ok:
            procs.print_logs()
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
