#!/usr/bin/env python3
"""The Kubernetes manifests (deploy/kubernetes) against the real fastpath.

Usage: manifests_check.py FASTPATH_BINARY TEST_REPOSITORY MANIFEST_DIR

1. Parses every YAML document of every *.yaml / *.yml file under MANIFEST_DIR (recursively)
   and checks each one's (apiVersion, kind) against KNOWN: an unknown one fails, naming the
   file and the document.
2. Finds the fastpath containers (image named fastpath) of the Deployments, Argo Rollouts and
   KServe ServingRuntimes, and checks what can be checked without a cluster: args start with
   `serve`; every containerPort and every probe port (a number, or a port name of the
   container) is a port fastpath listens on with those args (probes on the HTTP port); the
   metrics annotations (prometheus.io/* on a Deployment's pod template, prometheus.kserve.io/*
   on a ServingRuntime) name the metrics port; --version-lock is a file of a ConfigMap of the
   manifests mounted at that folder, whose lock has the keys `fastpath doctor --lock` writes;
   a ServingRuntime has what KServe expects of a v2 runtime (KSERVE_* below); an
   InferenceService names a runtime of the manifests that supports its model format and
   protocol; an HPA scales a Deployment of the manifests on Pods metrics that a Prometheus
   adapter rule (a ConfigMap of the manifests holding the adapter's config) serves; a Rollout
   has a canary strategy whose stable and canary Services are of the manifests, select its
   pods and forward to its container's ports, and an analysis step whose AnalysisTemplate
   runs `fastpath gate` in a Job (the Rollout's image, backoffLimit 0, restartPolicy Never)
   with --baseline the stable Service and --candidate the canary Service on fastpath's HTTP
   port, every {{args.*}} given a value. An AnalysisTemplate of Argo's `web` provider asks
   GET /v2/rollout/verdict of the canary Service on fastpath's HTTP port, with the stable
   Service as its baseline, one that the Rollout's fastpath allows
   (--rollout-verdict-baseline), a timeoutSeconds a measurement fits in, and a jsonPath of the
   verdict; one that no Rollout step names is checked as an alternative to its Job template.
3. Starts the binary once per fastpath container with the flags the manifests pass, mapped:
   ports to 0 (read back from --port-file), --host to loopback, --model-repository to a copy
   of the test repository's `simple` model, --version-lock to a lock of this machine
   (`fastpath doctor --lock`; the manifests' lock pins a GPU node pool). A flag fastpath
   rejects exits 2 at once, which fails the check, naming the flags. Then calls every probe's
   path on the port it names (mapped) until it answers 200, connects to every containerPort
   (mapped), fetches the metrics annotations' path, sends one inference and checks that every
   fastpath_* / nv_* name the adapter rules use is on the scrape; and stops it with SIGTERM,
   expecting exit 0 (the drain). A control run with one unknown flag added must exit 2.
   Before a Rollout's fastpath is stopped, each gate command line of its AnalysisTemplates is
   run by the binary with both Services mapped to that live server and the model to `simple`:
   it must measure (exit 0 or 1, JSON with "passed" on stdout); against an unreachable server
   it must exit 3, not 2 (a flag it rejected); with an unknown flag added, 2. Each web
   template's URL is asked of that live server, the Services and its baseline mapped to it
   (its --rollout-verdict-baseline too): it must answer 200 with a verdict whose jsonPath
   field is "passed" or "refused", and 400 with an unknown query field added.
4. Runs every adapter rule's queries (templates filled in) through promtool (on PATH or
   /usr/bin: Debian's `prometheus`, tools/setup.sh --test); fails without it.
Prints a one-line summary. Everything runs under one deadline (DEADLINE_S); every fastpath
started is killed on the way out, even if this check is killed (PR_SET_PDEATHSIG), and its log
is printed on a failure. Debian's python3 and python3-yaml alone.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from live_checks import INFER_BODY, Deadline, Failure, die_with_parent, http  # noqa: E402

try:
    import yaml
except ImportError:  # pragma: no cover
    print("FAIL: python3-yaml is missing: Debian's python3-yaml, which tools/setup.sh --test "
          "installs", file=sys.stderr)
    sys.exit(1)

DEADLINE_S = 60
PROMTOOL = "/usr/bin/promtool"

# The (apiVersion, kind) pairs the manifests may use. Add one here with its checks.
KNOWN = {
    ("apps/v1", "Deployment"),
    ("v1", "ConfigMap"),
    ("v1", "Service"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
    ("serving.kserve.io/v1alpha1", "ServingRuntime"),
    ("serving.kserve.io/v1beta1", "InferenceService"),
    ("argoproj.io/v1alpha1", "Rollout"),
    ("argoproj.io/v1alpha1", "AnalysisTemplate"),
}

# `fastpath gate`'s exit codes (src/cli/cli.h): 0 passed, 1 refused, 2 usage, 3 not measured.
GATE_USAGE, GATE_NOT_MEASURED = 2, 3
GATE_TIMEOUT_S = 30
# GET /v2/rollout/verdict (docs/rollouts.md): its path, the serve flag that turns it on, the
# shortest web timeoutSeconds a measurement fits in (Argo's default is 10 s), the outcomes
# that are a measurement.
VERDICT_PATH = "/v2/rollout/verdict"
VERDICT_FLAG = "--rollout-verdict-baseline"
VERDICT_MIN_TIMEOUT_S = 60
VERDICT_MEASURED = ("passed", "refused")
JSON_PATH = re.compile(r"^\{\$\.([A-Za-z0-9_]+)\}$")

# What KServe expects of a v2 runtime, as its kserve-tritonserver ClusterServingRuntime does it
# (kserve/kserve config/runtimes/kserve-tritonserver.yaml): the storage initializer's model
# folder, HTTP on 8080, gRPC on 9000, the container KServe merges the predictor into.
KSERVE_MODEL_DIR = "/mnt/models"
KSERVE_HTTP_PORT = 8080
KSERVE_GRPC_PORT = 9000
KSERVE_CONTAINER = "kserve-container"
KSERVE_PROTOCOLS = {"v2", "grpc-v2"}

# fastpath serve's port flags and their defaults (`fastpath serve --help`).
PORT_FLAGS = {"--http-port": ("http", 8000), "--grpc-port": ("grpc", 8001),
              "--metrics-port": ("metrics", 8002)}
PROBES = ("startupProbe", "readinessProbe", "livenessProbe")

def http_get(url, body=None, timeout=3):
    return http("POST" if body else "GET", url, body, timeout)


# ---- the documents ----

class Doc:
    def __init__(self, path, index, obj):
        self.path, self.index, self.obj = path, index, obj

    @property
    def kind(self):
        return self.obj.get("kind")

    @property
    def name(self):
        return (self.obj.get("metadata") or {}).get("name")

    def __str__(self):
        return "%s: document %d (%s/%s)" % (self.path, self.index + 1, self.kind, self.name)


def load_documents(manifest_dir):
    files = []
    for root, dirs, names in os.walk(manifest_dir):
        dirs.sort()
        files += [os.path.join(root, n) for n in sorted(names)
                  if n.endswith((".yaml", ".yml"))]
    if not files:
        raise Failure("no *.yaml under %s" % manifest_dir)
    docs, errors = [], []
    for f in files:
        rel = os.path.relpath(f, manifest_dir)
        try:
            with open(f, encoding="utf-8") as stream:
                loaded = list(yaml.safe_load_all(stream))
        except yaml.YAMLError as e:
            errors.append("%s: not YAML: %s" % (rel, e))
            continue
        for i, obj in enumerate(loaded):
            if obj is None:
                continue  # an empty document (a trailing ---)
            if not isinstance(obj, dict):
                errors.append("%s: document %d is a %s, not a Kubernetes object"
                              % (rel, i + 1, type(obj).__name__))
                continue
            doc = Doc(rel, i, obj)
            key = (obj.get("apiVersion"), obj.get("kind"))
            if key not in KNOWN:
                errors.append("%s: unknown apiVersion/kind %s/%s (known: %s)" % (
                    doc, key[0], key[1],
                    ", ".join("%s %s" % k for k in sorted(KNOWN))))
            elif not doc.name:
                errors.append("%s: no metadata.name" % doc)
            else:
                docs.append(doc)
    return files, docs, errors


def find(docs, kind, name=None):
    return [d for d in docs if d.kind == kind and (name is None or d.name == name)]


# ---- fastpath's command line as the manifests give it ----

def parse_flags(args):
    """[(flag, value or None)] from `--flag=value`, `--flag value` or `--flag`."""
    flags, i = [], 0
    while i < len(args):
        a = str(args[i])
        if not a.startswith("--"):
            raise ValueError("%r is not a flag" % a)
        if "=" in a:
            name, value = a.split("=", 1)
        elif i + 1 < len(args) and not str(args[i + 1]).startswith("--"):
            name, value = a, str(args[i + 1])
            i += 1
        else:
            name, value = a, None
        flags.append((name, value))
        i += 1
    return flags


class Container:
    """A fastpath container of a Deployment or ServingRuntime, and what its pod says of it."""

    def __init__(self, doc, spec, container, metrics_annotations):
        self.doc, self.spec, self.c = doc, spec, container
        self.name = container.get("name")
        self.where = "%s container %s" % (doc, self.name)
        self.args = [str(a) for a in container.get("args") or []]
        self.flags = parse_flags(self.args[1:]) if self.args[:1] == ["serve"] else []
        self.values = {k: v for k, v in self.flags}
        self.ports = {}  # role (http, grpc, metrics) -> port fastpath listens on
        for flag, (role, default) in PORT_FLAGS.items():
            self.ports[role] = int(self.values.get(flag, default))
        if self.values.get("--allow-metrics", "true") == "false":
            del self.ports["metrics"]
        self.container_ports = [(p.get("name"), int(p["containerPort"]))
                                for p in container.get("ports") or []]
        self.probes = []  # (probe, path, manifest port)
        self.metrics = metrics_annotations  # (port, path) or None
        self.lock = None  # (ConfigMap doc, the lock's fields) of --version-lock

    def role_of(self, port):
        return next((r for r, p in self.ports.items() if p == port), None)

    def resolve(self, port):
        """A probe's port: a number, or the name of one of the container's ports."""
        if isinstance(port, int):
            return port
        if isinstance(port, str) and port.isdigit():
            return int(port)
        by_name = dict(self.container_ports)
        if port not in by_name:
            raise Failure("%s: probe port %r is not a port name of the container (%s)"
                          % (self.where, port, ", ".join(n for n, _ in self.container_ports
                                                         if n) or "none named"))
        return by_name[port]


def fastpath_containers(docs):
    found = []
    for doc in find(docs, "Deployment") + find(docs, "Rollout") + find(docs, "ServingRuntime"):
        if doc.kind in ("Deployment", "Rollout"):  # a Rollout's spec.template is a Deployment's
            template = (doc.obj.get("spec") or {}).get("template") or {}
            spec = template.get("spec") or {}
            annotations = (template.get("metadata") or {}).get("annotations") or {}
            metrics = None
            if str(annotations.get("prometheus.io/scrape")) == "true":
                metrics = (annotations.get("prometheus.io/port"),
                           annotations.get("prometheus.io/path", "/metrics"))
        else:
            spec = doc.obj.get("spec") or {}
            annotations = spec.get("annotations") or {}
            metrics = None
            if "prometheus.kserve.io/port" in annotations:
                metrics = (annotations.get("prometheus.kserve.io/port"),
                           annotations.get("prometheus.kserve.io/path", "/metrics"))
        for c in spec.get("containers") or []:
            if "fastpath" in str(c.get("image", "")):
                if metrics is not None:
                    metrics = (int(metrics[0]), metrics[1])
                found.append(Container(doc, spec, c, metrics))
    return found


def check_termination(c, errors):
    """The pod's grace outlasts the preStop wait and fastpath's drain: Kubernetes sends SIGTERM
    once preStop returns and SIGKILL at terminationGracePeriodSeconds (30 by default) from the
    start, so a drain still running then loses every answer it owes."""
    grace = int(c.values.get("--grace-period-secs", 30))
    wait = 0
    pre_stop = (c.c.get("lifecycle") or {}).get("preStop") or {}
    if "sleep" in pre_stop:
        wait = int(pre_stop["sleep"].get("seconds", 0))
    elif "exec" in pre_stop:
        command = [str(a) for a in pre_stop["exec"].get("command") or []]
        if command[:1] == ["sleep"] and len(command) == 2 and command[1].isdigit():
            wait = int(command[1])
        else:
            errors.append("%s: preStop exec %s: only `sleep N` is checked here" % (c.where, command))
    total = c.spec.get("terminationGracePeriodSeconds")
    if c.doc.kind == "ServingRuntime" or total is None:
        total = 30  # not a ServingRuntime field: Kubernetes' default
    if total <= wait + grace:
        errors.append("%s: terminationGracePeriodSeconds %d is not above the preStop wait %d s "
                      "plus --grace-period-secs %d: Kubernetes would kill the drain"
                      % (c.where, total, wait, grace))


def check_container(c, docs, errors):
    if c.args[:1] != ["serve"]:
        errors.append("%s: args must start with `serve` (got %s)" % (c.where, c.args[:1]))
        return
    if "--model-repository" not in c.values:
        errors.append("%s: no --model-repository" % c.where)
    if "--port-file" in c.values:
        errors.append("%s: --port-file is for tests" % c.where)
    listening = ", ".join("%s %d" % (r, p) for r, p in sorted(c.ports.items()))
    for name, port in c.container_ports:
        if c.role_of(port) is None:
            errors.append("%s: containerPort %d (%s) is none of the ports fastpath listens on "
                          "with these args (%s)" % (c.where, port, name, listening))
    for probe in PROBES:
        p = c.c.get(probe)
        if p is None:
            continue
        get = p.get("httpGet")
        if not get:
            errors.append("%s: %s is not an httpGet probe" % (c.where, probe))
            continue
        try:
            port = c.resolve(get.get("port"))
        except Failure as e:
            errors.append(str(e))
            continue
        if port != c.ports["http"]:
            errors.append("%s: %s on port %d, not the HTTP port %d (the health endpoints are "
                          "served there)" % (c.where, probe, port, c.ports["http"]))
            continue
        c.probes.append((probe, get.get("path", "/"), port))
    if not any(c.c.get(probe) for probe in PROBES):
        errors.append("%s: no probes" % c.where)
    if c.metrics is None:
        errors.append("%s: no metrics annotations (prometheus.io/* on a Deployment's pod "
                      "template, prometheus.kserve.io/* on a ServingRuntime)" % c.where)
    elif c.metrics[0] != c.ports.get("metrics"):
        errors.append("%s: the metrics annotation names port %d, fastpath serves metrics on %s"
                      % (c.where, c.metrics[0], c.ports.get("metrics", "no port")))

    mounts = {m.get("mountPath"): m.get("name") for m in c.c.get("volumeMounts") or []}
    volumes = {v.get("name"): v for v in c.spec.get("volumes") or []}
    lock = c.values.get("--version-lock")
    if lock:
        folder, key = os.path.split(lock)
        volume = volumes.get(mounts.get(folder))
        config_map = ((volume or {}).get("configMap") or {}).get("name")
        if not config_map:
            errors.append("%s: --version-lock %s: %s is not a ConfigMap volume mounted there"
                          % (c.where, lock, folder))
        else:
            maps = find(docs, "ConfigMap", config_map)
            data = (maps[0].obj.get("data") or {}) if maps else {}
            if key not in data:
                errors.append("%s: --version-lock %s: no ConfigMap %s with the key %s in the "
                              "manifests" % (c.where, lock, config_map, key))
            else:
                try:
                    c.lock = (maps[0], json.loads(data[key]))
                except ValueError as e:
                    errors.append("%s: data %s is not JSON: %s" % (maps[0], key, e))
    check_termination(c, errors)
    repository = c.values.get("--model-repository")
    if c.doc.kind == "ServingRuntime":
        check_serving_runtime(c, errors)
    elif repository and not any(repository == m or repository.startswith(m.rstrip("/") + "/")
                                for m in mounts):
        errors.append("%s: --model-repository %s is not on a mounted volume"
                      % (c.where, repository))


def check_serving_runtime(c, errors):
    spec = c.doc.obj.get("spec") or {}
    if c.name != KSERVE_CONTAINER:
        errors.append("%s: KServe merges the predictor into the container named %s"
                      % (c.where, KSERVE_CONTAINER))
    if c.values.get("--model-repository") != KSERVE_MODEL_DIR:
        errors.append("%s: --model-repository must be %s (where KServe's storage initializer "
                      "puts the storageUri)" % (c.where, KSERVE_MODEL_DIR))
    if c.ports["http"] != KSERVE_HTTP_PORT or c.ports["grpc"] != KSERVE_GRPC_PORT:
        errors.append("%s: KServe's v2 runtimes serve HTTP on %d and gRPC on %d (got %d, %d)"
                      % (c.where, KSERVE_HTTP_PORT, KSERVE_GRPC_PORT, c.ports["http"],
                         c.ports["grpc"]))
    missing = KSERVE_PROTOCOLS - set(spec.get("protocolVersions") or [])
    if missing:
        errors.append("%s: protocolVersions lacks %s" % (c.doc, ", ".join(sorted(missing))))
    if len(c.container_ports) > 1:
        errors.append("%s: Knative (KServe's Serverless mode) accepts one container port, "
                      "there are %d" % (c.where, len(c.container_ports)))
    if not any(f.get("name") == "onnx" and f.get("autoSelect") is True
               for f in spec.get("supportedModelFormats") or []):
        errors.append("%s: supportedModelFormats has no onnx with autoSelect: true" % c.doc)


def check_inference_services(docs, errors):
    for doc in find(docs, "InferenceService"):
        model = ((doc.obj.get("spec") or {}).get("predictor") or {}).get("model") or {}
        fmt = (model.get("modelFormat") or {}).get("name")
        if not model.get("storageUri"):
            errors.append("%s: predictor.model.storageUri is missing" % doc)
        runtime = model.get("runtime")
        if not runtime:
            continue  # KServe picks one by format: nothing of ours to check against
        runtimes = find(docs, "ServingRuntime", runtime)
        if not runtimes:
            errors.append("%s: runtime %s is no ServingRuntime of the manifests" % (doc, runtime))
            continue
        spec = runtimes[0].obj.get("spec") or {}
        if fmt not in [f.get("name") for f in spec.get("supportedModelFormats") or []]:
            errors.append("%s: runtime %s does not support the model format %s"
                          % (doc, runtime, fmt))
        protocol = model.get("protocolVersion")
        if protocol and protocol not in (spec.get("protocolVersions") or []):
            errors.append("%s: runtime %s does not speak %s" % (doc, runtime, protocol))


# ---- Argo Rollouts: the canary's Services and the gate's AnalysisTemplate ----

ARG = re.compile(r"\{\{\s*args\.([A-Za-z0-9_.-]+)\s*\}\}")
GATE_URL = re.compile(r"^http://([a-z0-9.-]+):(\d+)$")


class Gate:
    """A `fastpath gate` command line of an AnalysisTemplate, its {{args.*}} filled in."""

    def __init__(self, where, container, args):
        self.where, self.container, self.args = where, container, args


class WebGate:
    """An AnalysisTemplate's web metric on GET /v2/rollout/verdict, its {{args.*}} filled in."""

    def __init__(self, where, container, url, field):
        self.where, self.container, self.url, self.field = where, container, url, field


def fill_args(text, values):
    """`text` with its {{args.*}} given their values; one declared without a value and given
    none stays as it is."""
    def fill(m):
        value = values.get(m.group(1))
        return m.group(0) if value is None else str(value)

    return ARG.sub(fill, str(text))


def check_service(doc, labels, c, errors):
    """A Service of a Rollout: selects its pods, forwards to ports its container has."""
    spec = doc.obj.get("spec") or {}
    selector = spec.get("selector") or {}
    if not selector or any(labels.get(k) != v for k, v in selector.items()):
        errors.append("%s: selector %s does not select the pods of %s (labels %s)"
                      % (doc, selector, c.doc, labels))
    ports = {}
    for p in spec.get("ports") or []:
        try:
            number = c.resolve(p.get("targetPort", p.get("port")))
        except Failure as e:
            errors.append("%s: %s" % (doc, e))
            continue
        if c.role_of(number) is None:
            errors.append("%s: port %s forwards to %d, none of the ports fastpath listens on"
                          % (doc, p.get("port"), number))
            continue
        ports[int(p.get("port"))] = number
    return ports  # Service port -> container port


def check_gate_job(template, values, rollout, c, services, errors):
    """The Jobs of `template` that run fastpath: [Gate]."""
    gates = []
    canary = ((rollout.obj.get("spec") or {}).get("strategy") or {}).get("canary") or {}
    for metric in (template.obj.get("spec") or {}).get("metrics") or []:
        job = (metric.get("provider") or {}).get("job")
        if not job:
            continue
        where = "%s metric %s" % (template, metric.get("name"))
        spec = job.get("spec") or {}
        if spec.get("backoffLimit") != 0:
            errors.append("%s: backoffLimit must be 0 (a refused gate retried may pass by "
                          "chance)" % where)
        pod = (spec.get("template") or {}).get("spec") or {}
        if pod.get("restartPolicy") != "Never":
            errors.append("%s: restartPolicy must be Never" % where)
        for container in pod.get("containers") or []:
            if "fastpath" not in str(container.get("image", "")):
                continue
            if container.get("image") != c.c.get("image"):
                errors.append("%s: image %s is not the Rollout's (%s)"
                              % (where, container.get("image"), c.c.get("image")))
            args = [fill_args(a, values) for a in container.get("args") or []]
            left = [a for a in args if ARG.search(a)]
            if left:
                errors.append("%s: %s has no value" % (where, ", ".join(left)))
                continue
            if args[:1] != ["gate"]:
                errors.append("%s: args must start with `gate` (got %s)" % (where, args[:1]))
                continue
            try:
                flags = dict(parse_flags(args[1:]))
            except ValueError as e:
                errors.append("%s: %s" % (where, e))
                continue
            for flag, role in (("--baseline", "stableService"), ("--candidate", "canaryService")):
                match = GATE_URL.match(flags.get(flag) or "")
                if not match:
                    errors.append("%s: %s %r is not http://SERVICE:PORT"
                                  % (where, flag, flags.get(flag)))
                elif match.group(1) != canary.get(role):
                    errors.append("%s: %s names %s, not the Rollout's %s %s"
                                  % (where, flag, match.group(1), role, canary.get(role)))
                elif match.group(1) in services:
                    target = services[match.group(1)].get(int(match.group(2)))
                    if target is None or c.role_of(target) != "http":
                        errors.append("%s: %s: port %s of Service %s does not reach fastpath's "
                                      "HTTP port %d" % (where, flag, match.group(2),
                                                        match.group(1), c.ports["http"]))
            gates.append(Gate(where, c, args))
    return gates


def check_web_verdict(template, values, rollout, c, services, errors):
    """The web metrics of `template` that ask fastpath's verdict endpoint: [WebGate]."""
    gates = []
    canary = ((rollout.obj.get("spec") or {}).get("strategy") or {}).get("canary") or {}
    for metric in (template.obj.get("spec") or {}).get("metrics") or []:
        web = (metric.get("provider") or {}).get("web")
        if not web:
            continue
        where = "%s metric %s" % (template, metric.get("name"))

        url = fill_args(web.get("url", ""), values)
        if ARG.search(url):
            errors.append("%s: %s has no value" % (where, ", ".join(ARG.findall(url))))
            continue
        parts = urllib.parse.urlsplit(url)
        if parts.path != VERDICT_PATH:
            continue  # another web metric: not fastpath's
        query = urllib.parse.parse_qs(parts.query)
        if parts.scheme != "http" or parts.hostname != canary.get("canaryService"):
            errors.append("%s: the verdict is asked of %s://%s, not of the Rollout's "
                          "canaryService %s (the canary measures itself)"
                          % (where, parts.scheme, parts.hostname, canary.get("canaryService")))
            continue
        target = services.get(parts.hostname, {}).get(parts.port or 80)
        if target is None or c.role_of(target) != "http":
            errors.append("%s: port %s of Service %s does not reach fastpath's HTTP port %d"
                          % (where, parts.port, parts.hostname, c.ports["http"]))
        baseline = (query.get("baseline") or [""])[0]
        match = GATE_URL.match(baseline)
        if not match or match.group(1) != canary.get("stableService"):
            errors.append("%s: baseline %r is not http://SERVICE:PORT of the Rollout's "
                          "stableService %s" % (where, baseline, canary.get("stableService")))
        elif (services.get(match.group(1), {}).get(int(match.group(2))) or 0) != c.ports["http"]:
            errors.append("%s: baseline %s does not reach fastpath's HTTP port %d"
                          % (where, baseline, c.ports["http"]))
        allowed = [v for f, v in c.flags if f == VERDICT_FLAG]
        if baseline not in allowed:
            errors.append("%s: the Rollout's fastpath does not allow the baseline %s (%s %s), "
                          "so the verdict would be 403" % (where, baseline, VERDICT_FLAG,
                                                          ", ".join(allowed) or "not given"))
        timeout = web.get("timeoutSeconds", 10)
        if not isinstance(timeout, int) or timeout < VERDICT_MIN_TIMEOUT_S:
            errors.append("%s: timeoutSeconds %s: a measurement takes longer; give at least %d"
                          % (where, timeout, VERDICT_MIN_TIMEOUT_S))
        field = JSON_PATH.match(str(web.get("jsonPath", "")))
        if not field:
            errors.append("%s: jsonPath %r is not {$.FIELD} of the verdict"
                          % (where, web.get("jsonPath")))
            continue
        if "result" not in str(metric.get("successCondition", "")):
            errors.append("%s: successCondition %r does not judge the result"
                          % (where, metric.get("successCondition")))
        if metric.get("failureLimit") != 0:
            errors.append("%s: failureLimit must be 0 (a refused verdict retried may pass by "
                          "chance)" % where)
        gates.append(WebGate(where, c, url, field.group(1)))
    return gates


def check_rollouts(docs, containers, errors):
    """[Gate] of every Rollout's analysis steps."""
    gates, used, steps = [], set(), []
    for doc in find(docs, "Rollout"):
        spec = doc.obj.get("spec") or {}
        canary = (spec.get("strategy") or {}).get("canary")
        c = next((c for c in containers if c.doc is doc), None)
        if not canary or c is None:
            errors.append("%s: needs a canary strategy and a fastpath container" % doc)
            continue
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        selector = (spec.get("selector") or {}).get("matchLabels") or {}
        if not selector or any(labels.get(k) != v for k, v in selector.items()):
            errors.append("%s: selector %s does not match its pod labels %s"
                          % (doc, selector, labels))
        services = {}
        for role in ("stableService", "canaryService"):
            found = find(docs, "Service", canary.get(role))
            if not canary.get(role) or not found:
                errors.append("%s: %s %s is no Service of the manifests"
                              % (doc, role, canary.get(role)))
                continue
            services[found[0].name] = check_service(found[0], labels, c, errors)
        if canary.get("stableService") == canary.get("canaryService"):
            errors.append("%s: stableService and canaryService must differ" % doc)
        mine = []
        for step in canary.get("steps") or []:
            analysis = step.get("analysis")
            if not analysis:
                continue
            step_args = {a.get("name"): a.get("value") for a in analysis.get("args") or []}
            steps.append((doc, c, services, step_args))
            for ref in analysis.get("templates") or []:
                found = find(docs, "AnalysisTemplate", ref.get("templateName"))
                if not found:
                    errors.append("%s: analysis template %s is not in the manifests"
                                  % (doc, ref.get("templateName")))
                    continue
                used.add(found[0].name)
                declared = {a.get("name"): a.get("value")
                            for a in (found[0].obj.get("spec") or {}).get("args") or []}
                unknown = sorted(set(step_args) - set(declared))
                if unknown:
                    errors.append("%s: args %s are not declared by %s"
                                  % (doc, ", ".join(unknown), found[0]))
                values = dict(declared, **step_args)
                mine += check_gate_job(found[0], values, doc, c, services, errors)
                mine += check_web_verdict(found[0], values, doc, c, services, errors)
        if not mine:
            errors.append("%s: no analysis step runs `fastpath gate`" % doc)
        gates += mine
    # A template no step names is an alternative to one that is (analysis-template-web.yaml
    # for analysis-template.yaml): checked as if those steps named it instead.
    for doc in find(docs, "AnalysisTemplate"):
        if doc.name in used:
            continue
        declared = {a.get("name"): a.get("value")
                    for a in (doc.obj.get("spec") or {}).get("args") or []}
        alternative = []
        for rollout, c, services, step_args in steps:
            if set(step_args) <= set(declared):
                values = dict(declared, **step_args)
                alternative += check_gate_job(doc, values, rollout, c, services, errors)
                alternative += check_web_verdict(doc, values, rollout, c, services, errors)
        if not alternative:
            errors.append("%s: used by no Rollout of the manifests, so unchecked" % doc)
        gates += alternative
    return gates


def gate_check(gate, binary, http_port, deadline, work, report):
    """The gate's command line, both sides mapped to the live fastpath of its Rollout."""
    def argv(url, extra=()):
        out = [binary, "gate"]
        for flag, value in parse_flags(gate.args[1:]):
            if flag == "--model":
                value = "simple"  # the test repository's model
            elif flag in ("--baseline", "--candidate"):
                value = url
            elif flag == "--record":
                value = os.path.join(work, "gate-record.json")
            out.append(flag if value is None else "%s=%s" % (flag, value))
        return out + list(extra)

    def run(args):
        timeout = max(1, min(GATE_TIMEOUT_S, deadline.left()))
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           stdin=subprocess.DEVNULL, timeout=timeout,
                           preexec_fn=die_with_parent)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode(
            "utf-8", "replace")

    live = argv("http://127.0.0.1:%d" % http_port)
    code, out, err = run(live)
    if code == GATE_USAGE:
        raise Failure("%s: fastpath gate rejects the command line the manifests pass (exit 2):"
                      "\n  %s\n%s" % (gate.where, " ".join(gate.args), err))
    if code not in (0, 1):
        raise Failure("%s: fastpath gate could not measure a live server (exit %d; mapped: "
                      "%s):\n%s" % (gate.where, code, " ".join(live[1:]), err))
    if "--json" in live:
        try:
            verdict = json.loads(out)
        except ValueError:
            raise Failure("%s: --json printed no JSON:\n%s" % (gate.where, out[:500]))
        if not isinstance(verdict.get("passed"), bool):
            raise Failure("%s: the verdict has no \"passed\": %s" % (gate.where, out[:500]))
    code, _, err = run(argv("http://127.0.0.1:1"))  # nothing listens on port 1
    if code != GATE_NOT_MEASURED:
        raise Failure("%s: against an unreachable server fastpath gate exited %d, not %d:\n%s"
                      % (gate.where, code, GATE_NOT_MEASURED, err))
    code, _, _ = run(live + ["--manifests-check-unknown-flag"])
    if code != GATE_USAGE:
        raise Failure("%s: with an unknown flag fastpath gate exited %d, not 2: a flag the "
                      "manifests pass would not be caught" % (gate.where, code))
    report["gates"] += 1


def web_check(gate, http_port, deadline, report):
    """The web metric's URL, its Services and baseline mapped to the live fastpath."""
    parts = urllib.parse.urlsplit(gate.url)
    here = "http://127.0.0.1:%d" % http_port
    query = []
    for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        if name == "model":
            value = "simple"  # the test repository's model
        elif name == "baseline":
            value = here
        query.append((name, value))

    def ask(extra=()):
        url = here + parts.path + "?" + urllib.parse.urlencode(query + list(extra))
        return http_get(url, timeout=max(1, min(GATE_TIMEOUT_S, deadline.left())))

    status, body = ask()
    if status != 200:
        raise Failure("%s: GET %s on the live fastpath answered %d: %s"
                      % (gate.where, VERDICT_PATH, status, body[:500]))
    try:
        verdict = json.loads(body)
    except ValueError:
        raise Failure("%s: the verdict is not JSON: %s" % (gate.where, body[:500]))
    if verdict.get(gate.field) not in VERDICT_MEASURED:
        raise Failure("%s: the verdict's %s is %r, not a measurement (%s): %s"
                      % (gate.where, gate.field, verdict.get(gate.field),
                         " or ".join(VERDICT_MEASURED), body[:500]))
    status, body = ask([("manifests_check_unknown_field", "1")])
    if status != 400:
        raise Failure("%s: with an unknown query field the verdict answered %d, not 400: a "
                      "field the manifests pass would not be caught" % (gate.where, status))
    report["verdicts"] += 1


# ---- the HPA and the Prometheus adapter rules ----

SERIES_NAME = re.compile(r"\b((?:fastpath|nv)_[a-zA-Z0-9_]+)")


def adapter_rules(docs, errors):
    """[(ConfigMap doc, rule)] from every ConfigMap data entry that is an adapter config."""
    rules = []
    for doc in find(docs, "ConfigMap"):
        for key, text in (doc.obj.get("data") or {}).items():
            if not key.endswith((".yaml", ".yml")):
                continue
            try:
                config = yaml.safe_load(text)
            except yaml.YAMLError as e:
                errors.append("%s: data %s is not YAML: %s" % (doc, key, e))
                continue
            if not isinstance(config, dict) or not isinstance(config.get("rules"), list):
                continue
            for rule in config["rules"]:
                for field in ("seriesQuery", "metricsQuery", "resources", "name"):
                    if field not in rule:
                        errors.append("%s: adapter rule without %s" % (doc, field))
                rules.append((doc, rule))
    return rules


def check_hpas(docs, rules, errors):
    exposed = {(r.get("name") or {}).get("as") for _, r in rules}
    metrics = []
    for doc in find(docs, "HorizontalPodAutoscaler"):
        spec = doc.obj.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        if ref.get("apiVersion") != "apps/v1" or not find(docs, ref.get("kind"), ref.get("name")):
            errors.append("%s: scaleTargetRef %s/%s %s is not in the manifests"
                          % (doc, ref.get("apiVersion"), ref.get("kind"), ref.get("name")))
        if not 1 <= spec.get("minReplicas", 1) <= spec.get("maxReplicas", 0):
            errors.append("%s: needs 1 <= minReplicas <= maxReplicas" % doc)
        for m in spec.get("metrics") or []:
            if m.get("type") != "Pods":
                continue
            name = ((m.get("pods") or {}).get("metric") or {}).get("name")
            if name not in exposed:
                errors.append("%s: Pods metric %s is served by no Prometheus adapter rule of "
                              "the manifests (rules serve: %s)"
                              % (doc, name, ", ".join(sorted(n for n in exposed if n)) or "none"))
            metrics.append("%s on %s" % (ref.get("name"), name))
    return metrics


def promtool_check(rules, work):
    """The adapter rules' queries, their templates filled in, through promtool."""
    promtool = shutil.which("promtool") or (PROMTOOL if os.access(PROMTOOL, os.X_OK) else None)
    if promtool is None:
        raise Failure("no promtool on PATH or at %s: install Debian's prometheus "
                      "(tools/setup.sh --test)" % PROMTOOL)
    exprs = []
    for _, rule in rules:
        series = (SERIES_NAME.findall(rule.get("seriesQuery", "")) or ["up"])[0]
        query = (rule.get("metricsQuery", "")
                 .replace("<<.Series>>", series)
                 .replace("<<.LabelMatchers>>", 'namespace="default",pod=~"fastpath-.*"')
                 .replace("<<.GroupBy>>", "namespace, pod"))
        exprs += [rule.get("seriesQuery", ""), query]
    path = os.path.join(work, "adapter-queries.yaml")
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump({"groups": [{"name": "adapter", "rules": [
            {"record": "manifests_check:query_%d" % i, "expr": e}
            for i, e in enumerate(exprs)]}]}, f)
    run = subprocess.run([promtool, "check", "rules", path], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, timeout=20)
    if run.returncode != 0:
        raise Failure("promtool refuses a Prometheus adapter query:\n%s\n%s"
                      % ("\n".join(exprs), run.stdout.decode("utf-8", "replace")))
    return "%d queries valid (promtool)" % len(exprs)


# ---- the live runs ----

class Run:
    def __init__(self, argv, log):
        self.argv, self.log = argv, log
        with open(log, "wb") as out:
            self.p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)

    def tail(self, lines=40):
        try:
            with open(self.log, encoding="utf-8", errors="replace") as f:
                return "\n".join(f.read().splitlines()[-lines:])
        except OSError as e:
            return "(no log: %s)" % e

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        return self.p.returncode


def this_machines_lock(binary, work):
    path = os.path.join(work, "this-node.lock.json")
    run = subprocess.run([binary, "doctor", "--lock", path], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, timeout=30)
    if run.returncode != 0:
        raise Failure("fastpath doctor --lock exited %d: %s"
                      % (run.returncode, run.stdout.decode("utf-8", "replace")))
    with open(path, encoding="utf-8") as f:
        return path, json.load(f)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mapped_argv(c, binary, repository, lock, work, http_port=0):
    """fastpath serve with the container's flags, mapped to this machine. With `http_port`,
    HTTP listens there and the verdict endpoint's baseline is that server itself."""
    argv = [binary, "serve"]
    for flag, value in c.flags:
        if flag == "--http-port":
            value = str(http_port)
        elif flag == VERDICT_FLAG and http_port:
            value = "http://127.0.0.1:%d" % http_port
        elif flag in PORT_FLAGS:
            value = "0"
        elif flag == "--host":
            value = "127.0.0.1"
        elif flag == "--model-repository":
            value = repository
        elif flag == "--version-lock":
            value = lock
        elif flag == "--engine-cache":
            value = os.path.join(work, "engine-cache")
        elif flag == "--gpu-trace":
            raise Failure("%s: --gpu-trace has no local mapping in this check" % c.where)
        argv.append(flag if value is None else "%s=%s" % (flag, value))
    if "--host" not in c.values:
        argv.append("--host=127.0.0.1")
    if "--http-port" not in c.values:
        argv.append("--http-port=%d" % http_port)
    return argv


def start(c, argv, deadline, work, runs):
    port_file = os.path.join(work, "ports")
    run = Run(argv + ["--port-file=" + port_file], os.path.join(work, "fastpath.log"))
    runs.append((c.where, run))
    wanted = set(c.ports)

    def ports():
        if run.p.poll() is not None:
            if run.p.returncode == 2:
                raise Failure("%s: fastpath serve rejects the flags the manifests pass "
                              "(exit 2):\n  %s\n%s" % (c.where, " ".join(c.args), run.tail(5)))
            raise Failure("%s: fastpath exited %d during start-up (mapped: %s)"
                          % (c.where, run.p.returncode, " ".join(argv[1:])))
        with open(port_file, encoding="utf-8") as f:
            fields = dict(item.split("=") for item in f.read().split())
        found = {k: int(v) for k, v in fields.items()}
        return found if wanted <= set(found) else None

    return run, deadline.wait_for("%s: fastpath's port file" % c.where, ports)


def live_check(c, binary, repository, lock, deadline, work, runs, adapter_names, report, gates):
    # The verdict endpoint allows its baselines by address: this server's own, known before
    # it starts.
    http_port = free_port() if VERDICT_FLAG in c.values else 0
    run, actual = start(c, mapped_argv(c, binary, repository, lock, work, http_port), deadline,
                        work, runs)

    def local(port):
        return actual[c.role_of(port)]

    for probe, path, port in c.probes:
        url = "http://127.0.0.1:%d%s" % (local(port), path)

        def answers_200():
            if run.p.poll() is not None:
                raise Failure("%s: fastpath exited %d before %s answered"
                              % (c.where, run.p.returncode, probe))
            status, body = http_get(url)
            if status in (404, 405):  # never a "not yet": no such endpoint
                raise Failure("%s: %s GET %s (port %d, here %d) answered %d: %s"
                              % (c.where, probe, path, port, local(port), status, body[:200]))
            return status == 200

        deadline.wait_for("%s: %s GET %s (port %d here %d) to answer 200"
                          % (c.where, probe, path, port, local(port)), answers_200)
        report["probes"] += 1
    for name, port in c.container_ports:
        with socket.create_connection(("127.0.0.1", local(port)), timeout=3):
            report["ports"] += 1
    status, body = http_get("http://127.0.0.1:%d/v2/models/simple/infer" % actual["http"],
                            INFER_BODY)
    if status != 200:
        raise Failure("%s: an inference answered %d: %s" % (c.where, status, body[:300]))
    port, path = c.metrics
    status, scrape = http_get("http://127.0.0.1:%d%s" % (local(port), path))
    if status != 200 or "fastpath_" not in scrape:
        raise Failure("%s: metrics annotation: GET %s on port %d (here %d) answered %d"
                      % (c.where, path, port, local(port), status))
    report["metrics"] += 1
    on_scrape = {line.split("{")[0].split(" ")[0] for line in scrape.splitlines()
                 if line and not line.startswith("#")}
    missing = sorted(n for n in adapter_names if n not in on_scrape)
    if missing:
        raise Failure("%s: the Prometheus adapter rules use %s, not on fastpath's scrape"
                      % (c.where, ", ".join(missing)))
    for gate in gates:
        if gate.container is not c:
            continue
        if isinstance(gate, WebGate):
            web_check(gate, actual["http"], deadline, report)
        else:
            gate_check(gate, binary, actual["http"], deadline, work, report)
    code = run.stop()
    if code != 0:
        raise Failure("%s: fastpath exited %d on SIGTERM, not 0" % (c.where, code))


def control_run(c, binary, repository, lock, deadline, work, runs):
    """A flag fastpath does not know exits 2: what the live runs rely on to catch one."""
    argv = mapped_argv(c, binary, repository, lock, work) + ["--manifests-check-unknown-flag"]
    run = Run(argv, os.path.join(work, "control.log"))
    runs.append(("control run", run))
    deadline.wait_for("the control run (an unknown flag) to exit", lambda: run.p.poll() is not None)
    if run.p.returncode != 2:
        raise Failure("the control run with an unknown flag exited %d, not 2: a flag the "
                      "manifests pass would not be caught" % run.p.returncode)


def run_checks(binary, test_repository, manifest_dir, work, runs):
    deadline = Deadline(DEADLINE_S)
    files, docs, errors = load_documents(manifest_dir)
    containers = fastpath_containers(docs)
    if not containers:
        errors.append("no fastpath container (image named fastpath) in a Deployment or "
                      "ServingRuntime under %s" % manifest_dir)
    for c in containers:
        check_container(c, docs, errors)
    check_inference_services(docs, errors)
    gates = check_rollouts(docs, containers, errors)
    rules = adapter_rules(docs, errors)
    hpa_metrics = check_hpas(docs, rules, errors)
    if errors:
        raise Failure("\n".join(errors))

    repository = os.path.join(work, "models")
    shutil.copytree(os.path.join(test_repository, "simple"), os.path.join(repository, "simple"))
    lock, lock_fields = this_machines_lock(binary, work)
    for c in containers:
        if c.lock:
            doc, theirs = c.lock
            if set(theirs) != set(lock_fields):
                raise Failure("%s: the lock's keys %s are not those `fastpath doctor --lock` "
                              "writes: %s" % (doc, sorted(theirs), sorted(lock_fields)))
    adapter_names = set()
    for _, rule in rules:
        adapter_names |= set(SERIES_NAME.findall(rule.get("seriesQuery", "")))
        adapter_names |= set(SERIES_NAME.findall(rule.get("metricsQuery", "")))
    queries = promtool_check(rules, work)

    report = {"probes": 0, "ports": 0, "metrics": 0, "gates": 0, "verdicts": 0}
    for i, c in enumerate(containers):
        run_dir = os.path.join(work, "run-%d" % i)
        os.mkdir(run_dir)
        live_check(c, binary, repository, lock, deadline, run_dir, runs, adapter_names, report,
                   gates)
    control_run(containers[0], binary, repository, lock, deadline, work, runs)

    kinds = {}
    for d in docs:
        kinds[d.kind] = kinds.get(d.kind, 0) + 1
    print("kubernetes manifests OK: %d documents in %d files (%s); %d fastpath containers "
          "started with their flags (%s): %d probes answered 200, %d containerPorts listening, "
          "%d metrics endpoints; %d gate command lines and %d verdict URLs measured a live "
          "server (%s); HPA %s; "
          "adapter rules: %d series on the scrape, %s; %.1f s"
          % (len(docs), len(files), ", ".join("%d %s" % (n, k) for k, n in sorted(kinds.items())),
             len(containers), ", ".join("%s %s/%s" % (c.doc.path, c.doc.kind, c.doc.name)
                                        for c in containers),
             report["probes"], report["ports"], report["metrics"], report["gates"],
             report["verdicts"],
             ", ".join(g.where for g in gates) or "none",
             ", ".join(hpa_metrics) or "none", len(adapter_names), queries, deadline.elapsed()))


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    binary, test_repository, manifest_dir = argv[1:]
    work = tempfile.mkdtemp(prefix="fastpath_manifests_")
    runs = []
    # SIGTERM (ctest's timeout, a Ctrl-C'd parent) unwinds through the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ok = False
    try:
        run_checks(binary, test_repository, manifest_dir, work, runs)
        ok = True
    except (Failure, OSError, ValueError, KeyError, TypeError, subprocess.SubprocessError) as e:
        print("FAIL: %s" % e, file=sys.stderr)
    finally:
        for where, run in runs:
            run.stop()
            if not ok:
                print("---- %s: %s (exit %s) ----\n%s"
                      % (where, " ".join(run.argv[1:]), run.p.returncode, run.tail()),
                      file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
