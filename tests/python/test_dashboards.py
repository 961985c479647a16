"""No dead panels: every metric the Grafana dashboard (`deploy/grafana/sluice.json`) and the
Prometheus alerts (`deploy/prometheus/alerts.yaml`) name exists in a real pod's `/metrics`
after ingest through the official Python SDK (one stream refused, so the refusal counter
has a series), and `promtool check rules` accepts the alerts (promtool must be installed: a missing one fails).

Metric names are read from the PromQL expressions with a small lexer: string literals,
label matchers `{…}`, range/subquery brackets `[…]` and numbers are dropped; of the
identifiers left, those followed by `(` are functions or aggregations and PromQL keywords
(`by`, `and`, …) are not metrics, nor the label lists after `by (…)`, `on (…)` and the
like; every other identifier is a metric name.
"""
import json
import os
import re
import shutil
import subprocess
import time
import urllib.request

import pytest
import yaml
from zerobus import TableProperties, ZerobusSdk
from zerobus.sdk.shared import RecordType, StreamConfigurationOptions

from conftest import CLIENT_ID, CLIENT_SECRET

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "sluice.json")
ALERTS = os.path.join(ROOT, "deploy", "prometheus", "alerts.yaml")
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
            "or", "unless", "offset", "atop"}
# Series Prometheus makes itself for every target (not exported by the pod).
PROMETHEUS_SYNTHETIC = {"up"}
TOKEN = re.compile(r"""
    (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<braces>\{[^}]*\})
  | (?P<brackets>\[[^\]]*\])
  | (?P<number>\d+(?:\.\d+)?(?:e[+-]?\d+)?)
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<other>\S)
""", re.VERBOSE)


GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}


def metric_names(expr):
    """The metric names a PromQL expression reads."""
    tokens = [(m.lastgroup, m.group()) for m in TOKEN.finditer(expr)]
    names = set()
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        following = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if kind == "ident" and text in GROUPING and following == "(":
            i = tokens.index(("other", ")"), i) + 1  # skip the label list
            continue
        if kind == "ident" and text not in KEYWORDS and following != "(" and following not in GROUPING:
            names.add(text)  # not a function, an aggregation or a keyword
        i += 1
    return names


def test_the_lexer_finds_metrics_not_functions_labels_or_keywords():
    expr = ('max by (instance, table) (sluice_x{quantile="0.99", a=~"rate(y)"}) > 10 and '
            'deriv(sluice_y[5m]) > 0 or sum without (code) (rate(sluice_z_total[1m:10s])) / on() up')
    assert metric_names(expr) == {"sluice_x", "sluice_y", "sluice_z_total", "up"}


def dashboard_exprs():
    with open(DASHBOARD) as f:
        dash = json.load(f)
    return [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]


def alert_exprs():
    with open(ALERTS) as f:
        rules = yaml.safe_load(f)
    return [r["expr"] for g in rules["groups"] for r in g["rules"]]


def exported(text):
    """Metric names in Prometheus text format."""
    names = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def test_every_metric_of_the_dashboard_and_the_alerts_exists_in_a_running_pod(server):
    table = "main.ops.dash"
    server.api("POST", "", {"name": table, "columns": [
        {"name": "id", "type_text": "bigint", "type_name": "LONG", "nullable": False}]})
    sdk = ZerobusSdk(server.url, server.url)
    sdk._inner.set_use_tls(False)
    options = StreamConfigurationOptions(record_type=RecordType.JSON)
    stream = sdk.create_stream(CLIENT_ID, CLIENT_SECRET, TableProperties(table), options)
    for i in range(500):
        stream.ingest_record_offset(json.dumps({"id": i}))
    stream.flush()
    stream.close()
    with pytest.raises(Exception):
        sdk.create_stream(CLIENT_ID, CLIENT_SECRET, TableProperties("main.ops.absent"), options)
    deadline = time.time() + 30
    while True:
        with urllib.request.urlopen(server.url + "/metrics") as r:
            text = r.read().decode()
        if 'sluice_table_freshness_seconds_count{table="main.ops.dash"}' in text or time.time() > deadline:
            break
        time.sleep(0.2)

    have = exported(text)
    named = {}
    for source, exprs in (("dashboard", dashboard_exprs()), ("alerts", alert_exprs())):
        assert exprs, f"no expressions found in the {source}"
        for expr in exprs:
            for name in metric_names(expr):
                named.setdefault(name, set()).add(source)
    assert len(named) >= 15, named
    missing = {n: sorted(s) for n, s in named.items()
               if n not in have and n not in PROMETHEUS_SYNTHETIC}
    assert not missing, f"dead panels/alerts: {missing}\n--- /metrics ---\n{text}"


def test_promtool_accepts_the_alert_rules():
    promtool = shutil.which("promtool")
    assert promtool is not None, (
        "promtool not installed (Debian package `prometheus`; scripts/test.sh installs it)")
    out = subprocess.run([promtool, "check", "rules", ALERTS], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 7 rules found" in out.stdout, out.stdout
