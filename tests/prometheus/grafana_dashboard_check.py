#!/usr/bin/env python3
"""The Grafana dashboard (deploy/grafana/fastpath.json) is one Grafana can load as it is.

Usage: grafana_dashboard_check.py DASHBOARD.json RULES.yaml REPOSITORY_ROOT

Checks, without Grafana (Debian's python3 alone, no pip):
- the JSON parses, with a schemaVersion, a uid and a title;
- a template variable `datasource` of type datasource for prometheus, and every panel, target
  and query variable reading from it (uid "${datasource}"), never from a datasource of one site;
- panel ids unique; every panel has a gridPos inside the 24 columns, and no two overlap;
- every panel but a row has targets, each with a refId (unique in the panel) and an expr;
- request latency shares a row (one y) with the GPU's temperature, SM clock and clock-event
  reasons: one time axis for the latency and its cause;
- the panels the dashboard exists for are there (EXPECTED_METRICS);
- every runbook_url in the rule file names a runbook and a heading in it.
What Prometheus says of each expr is live_prometheus_test.py's part: it imports this module.
"""
import json
import os
import re
import sys

DATASOURCE_REFS = ("${datasource}", "$datasource")

# What the dashboard is for (issue 14 §8): each name is used by at least one panel.
EXPECTED_METRICS = [
    "fastpath_inference_request_duration_seconds_bucket",
    "fastpath_inference_queue_duration_seconds_bucket",
    "fastpath_inference_batch_size_bucket",
    "fastpath_gpu_temperature_celsius",
    "fastpath_gpu_sm_clock_mhz",
    "fastpath_gpu_clocks_event_active",
    "fastpath_gpu_throttle_seconds_total",
    "fastpath_gpu_memory_used_bytes",
    "fastpath_gpu_memory_total_bytes",
    "fastpath_gpu_utilization_ratio",
    "fastpath_gpu_power_watts",
    "fastpath_gpu_power_limit_watts",
    "fastpath_gpu_ecc_uncorrected_total",
    "fastpath_gpu_xid_total",
    "fastpath_gpu_quarantined",
    "fastpath_drift_ratio",
    "fastpath_drift_alert",
    "fastpath_canary_latency_ratio",
    "fastpath_canary_output_mismatch_total",
    "fastpath_memory_oom_total",
    "fastpath_memory_in_use_bytes",
    "fastpath_heap_bytes",
]

# Grafana's own variables in a query, and what stands in for them where Prometheus reads it.
BUILTIN_VARIABLES = {
    "__rate_interval": "1m",
    "__interval": "15s",
    "__range": "1h",
    "__range_s": "3600",
    "__interval_ms": "15000",
}

METRIC_NAME = re.compile(r"\b((?:fastpath|nv)_[A-Za-z0-9_]+)\b")


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def all_panels(dashboard):
    """Every panel, those inside collapsed rows included."""
    out = []
    for panel in dashboard.get("panels", []):
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def query_variables(dashboard):
    return [v for v in dashboard.get("templating", {}).get("list", []) if v.get("type") == "query"]


def variable_query(variable):
    q = variable.get("query")
    return q.get("query", "") if isinstance(q, dict) else (q or "")


def exprs(dashboard):
    """(where, expr) for every target of every panel."""
    out = []
    for panel in all_panels(dashboard):
        for target in panel.get("targets", []):
            if "expr" in target:
                where = "panel %s %r target %s" % (panel.get("id"), panel.get("title"),
                                                   target.get("refId"))
                out.append((where, target["expr"]))
    return out


def substitute(expr, dashboard):
    """The expr as Prometheus would get it from Grafana: its own variables replaced by a
    duration, the dashboard's (used as `label=~"$var"`) by a regex that matches anything."""
    names = dict(BUILTIN_VARIABLES)
    for variable in dashboard.get("templating", {}).get("list", []):
        names.setdefault(variable["name"], ".*")

    def value(match):
        name = match.group(1) or match.group(2) or match.group(3)
        name = name.split(":")[0]  # ${var:regex} and the like
        if name not in names:
            raise ValueError("unknown variable $%s in %r" % (name, expr))
        return names[name]

    return re.sub(r"\$\{([^}]+)\}|\[\[([^\]]+)\]\]|\$([A-Za-z_][A-Za-z0-9_]*)", value, expr)


def metric_names(text):
    return set(METRIC_NAME.findall(text))


def dashboard_metric_names(dashboard):
    names = set()
    for _, expr in exprs(dashboard):
        names |= metric_names(expr)
    for variable in query_variables(dashboard):
        names |= metric_names(variable_query(variable))
    return names


def refers_to_variable(datasource):
    return isinstance(datasource, dict) and datasource.get("uid") in DATASOURCE_REFS


def check_dashboard(dashboard):
    errors = []
    if not isinstance(dashboard.get("schemaVersion"), int) or dashboard["schemaVersion"] < 36:
        errors.append("schemaVersion must be an integer >= 36 (Grafana 9+), not %r"
                      % dashboard.get("schemaVersion"))
    for key in ("uid", "title"):
        if not dashboard.get(key):
            errors.append("no %s" % key)

    variables = dashboard.get("templating", {}).get("list", [])
    ds = [v for v in variables if v.get("name") == "datasource"]
    if len(ds) != 1 or ds[0].get("type") != "datasource" or ds[0].get("query") != "prometheus":
        errors.append('no template variable "datasource" of type datasource for prometheus')
    for variable in query_variables(dashboard):
        if not refers_to_variable(variable.get("datasource")):
            errors.append("variable %r does not read from ${datasource}: %r"
                          % (variable.get("name"), variable.get("datasource")))
        if not variable_query(variable):
            errors.append("variable %r has no query" % variable.get("name"))

    panels = all_panels(dashboard)
    if not panels:
        errors.append("no panels")
    ids = [p.get("id") for p in panels]
    for i in sorted({i for i in ids if ids.count(i) > 1}, key=str):
        errors.append("panel id %r is used %d times" % (i, ids.count(i)))
    boxes = []
    for panel in panels:
        name = "panel %s %r" % (panel.get("id"), panel.get("title"))
        if not isinstance(panel.get("id"), int):
            errors.append("%s: id is not an integer" % name)
        if not panel.get("title"):
            errors.append("%s: no title" % name)
        grid = panel.get("gridPos")
        if not isinstance(grid, dict) or not all(isinstance(grid.get(k), int) for k in "hwxy"):
            errors.append("%s: gridPos must have integer h, w, x and y: %r" % (name, grid))
        elif grid["w"] < 1 or grid["h"] < 1 or grid["x"] < 0 or grid["y"] < 0 or \
                grid["x"] + grid["w"] > 24:
            errors.append("%s: gridPos outside the 24 columns: %r" % (name, grid))
        else:
            boxes.append((name, grid))
        if panel.get("type") == "row":
            continue
        if not refers_to_variable(panel.get("datasource")):
            errors.append("%s: datasource is not ${datasource}: %r" % (name, panel.get("datasource")))
        targets = panel.get("targets")
        if not targets:
            errors.append("%s: no targets" % name)
            continue
        refs = [t.get("refId") for t in targets]
        if len(set(refs)) != len(refs) or not all(refs):
            errors.append("%s: refIds missing or repeated: %r" % (name, refs))
        for target in targets:
            if not isinstance(target.get("expr"), str) or not target["expr"].strip():
                errors.append("%s target %s: no expr" % (name, target.get("refId")))
            if "datasource" in target and not refers_to_variable(target["datasource"]):
                errors.append("%s target %s: datasource is not ${datasource}: %r"
                              % (name, target.get("refId"), target["datasource"]))
            try:
                substitute(target.get("expr", ""), dashboard)
            except ValueError as e:
                errors.append("%s target %s: %s" % (name, target.get("refId"), e))
    for i, (a, ga) in enumerate(boxes):
        for b, gb in boxes[i + 1:]:
            if ga["x"] < gb["x"] + gb["w"] and gb["x"] < ga["x"] + ga["w"] and \
                    ga["y"] < gb["y"] + gb["h"] and gb["y"] < ga["y"] + ga["h"]:
                errors.append("%s overlaps %s" % (a, b))

    # Latency and the GPU's state on one row: the panels sit side by side on one time axis.
    def ys(pattern):
        return {p["gridPos"]["y"] for p in panels if p.get("type") != "row" and
                isinstance(p.get("gridPos"), dict) and
                any(re.search(pattern, t.get("expr", "")) for t in p.get("targets", []))}
    together = ys(r"histogram_quantile\(.*fastpath_inference_request_duration_seconds_bucket")
    for metric in ("fastpath_gpu_temperature_celsius", "fastpath_gpu_sm_clock_mhz",
                   "fastpath_gpu_clocks_event_active"):
        together &= ys(re.escape(metric))
    if not together:
        errors.append("no row holds the request latency percentiles beside the GPU temperature, "
                      "SM clock and clock-event reasons")

    used = dashboard_metric_names(dashboard)
    for metric in EXPECTED_METRICS:
        if metric not in used:
            errors.append("no panel shows %s" % metric)
    return errors


def github_anchor(heading):
    """The anchor GitHub gives a Markdown heading."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def check_runbook_urls(rules_path, root):
    errors = []
    with open(rules_path, encoding="utf-8") as f:
        urls = re.findall(r"^\s*runbook_url:\s*['\"]?([^'\"\s]+)", f.read(), re.M)
    for url in urls:
        path, _, anchor = url.partition("#")
        file = os.path.join(root, path)
        if not os.path.isfile(file):
            errors.append("runbook_url %s: no file %s" % (url, path))
            continue
        with open(file, encoding="utf-8") as f:
            anchors = {github_anchor(m) for m in re.findall(r"^#{1,6}\s+(.*)$", f.read(), re.M)}
        if anchor and anchor not in anchors:
            errors.append("runbook_url %s: %s has no heading with that anchor" % (url, path))
    return errors, len(urls)


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    dashboard_path, rules_path, root = argv[1:]
    errors = check_dashboard(load(dashboard_path))
    link_errors, links = check_runbook_urls(rules_path, root)
    errors += link_errors
    for e in errors:
        print("FAIL: " + e, file=sys.stderr)
    if errors:
        return 1
    dashboard = load(dashboard_path)
    print("%s: %d panels, %d queries, every one on ${datasource}; %d runbook links resolve"
          % (dashboard_path, len(all_panels(dashboard)), len(exprs(dashboard)), links))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
