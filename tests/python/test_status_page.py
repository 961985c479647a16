"""The status page (`GET /`) in a real browser: headless Chromium (Debian `chromium`, driven
over its DevTools pipe, see browser.py) against a real `sluice serve` with authentication on
and live ingest through the official Python SDK.

Contract under test:
- without a token the page is the login form (401; Chromium renders the form);
- the form (client id and secret of an admin) logs the browser in: the token is kept in an
  HttpOnly cookie the page's script cannot read, and the page then shows the pod;
- every figure the page shows for the table, the pod and the refusals equals the same
  pod's `/metrics` (rows ingested and committed, streams open, files, refusals by code);
- the page draws its charts (inline SVG, nothing fetched elsewhere) and its screenshot is
  not blank (many distinct colours);
- refusals: no token 401, a non-admin token 403, wrong secret 401, a non-admin's login 403,
  a form without fields 400; `/status/access` answers the router 204/401 (README rows);
- the router's page shows the whole cluster: both pods, and the table's rows summed over
  the pods' `/metrics`.
"""
import io
import json
import os
import re
import time
import urllib.error
import urllib.request
from html.parser import HTMLParser

import pytest
import requests
from PIL import Image
from zerobus import TableProperties, ZerobusSdk
from zerobus.sdk.shared import RecordType, StreamConfigurationOptions

from browser import Browser, dump_dom
from conftest import CLIENT_ID, CLIENT_SECRET, Server, create_table
from test_cluster import cluster, through  # noqa: F401 (the cluster fixture)

TABLE = "main.ops.status"
ROWS = 1500
SCREENSHOT_COPY = os.environ.get("STATUS_SCREENSHOT")  # where to keep the PNG (README image)


class Figures(HTMLParser):
    """`id` → `data-value` of every element carrying both, and every element id."""

    def __init__(self):
        super().__init__()
        self.values, self.ids = {}, set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
            if "data-value" in a:
                self.values[a["id"]] = float(a["data-value"])


def figures(html):
    f = Figures()
    f.feed(html)
    return f


def metrics(url):
    """`name{labels}` → value of a `/metrics` answer."""
    with urllib.request.urlopen(url + "/metrics") as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def ingest(server_url, n, rounds=1):
    sdk = ZerobusSdk(server_url, server_url)
    sdk._inner.set_use_tls(False)
    options = StreamConfigurationOptions(record_type=RecordType.JSON)
    stream = sdk.create_stream(CLIENT_ID, CLIENT_SECRET, TableProperties(TABLE), options)
    for r in range(rounds):  # rounds a sample apart give the charts a shape
        if r:
            time.sleep(5)
        for i in range(n // rounds):
            stream.ingest_record_offset(json.dumps({"id": r * n + i}))
        stream.flush()
    with pytest.raises(Exception):  # one refusal: NotFound
        sdk.create_stream(CLIENT_ID, CLIENT_SECRET, TableProperties("main.ops.absent"), options)
    return stream


def wait_metric(url, key, done, timeout=30):
    """Waits until `done(value of key)` (None while the series is missing)."""
    deadline = time.time() + timeout
    while True:
        m = metrics(url)
        if done(m.get(key)):
            return m
        assert time.time() < deadline, f"{key} never got there: {m.get(key)}"
        time.sleep(0.2)


def distinct_colours(png):
    image = Image.open(io.BytesIO(png)).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20)
    return image.size, len(colours)


@pytest.fixture
def pod(tmp_path):
    s = Server(tmp_path, extra=["--upkeep-interval", "1s"])
    yield s
    s.stop()


def test_the_page_in_a_real_browser_shows_the_pods_metrics_after_a_login(pod, tmp_path):
    create_table(pod, TABLE, [("id", "bigint", "LONG", False)])
    stream = ingest(pod.url, ROWS, rounds=3)
    key = f'sluice_table_rows_committed_total{{table="{TABLE}"}}'
    wait_metric(pod.url, key, lambda v: v == ROWS)
    # The upkeep round (every second here) after the last commit has counted its file.
    commits = wait_metric(pod.url, "sluice_sink_commits_total", lambda v: v is not None)["sluice_sink_commits_total"]
    wait_metric(pod.url, f'sluice_table_files{{table="{TABLE}"}}', lambda v: v == commits)
    time.sleep(6)  # the sampler's second sample: charts have a line

    # Without a token: the login form, rendered by Chromium.
    assert requests.get(pod.url + "/", timeout=10).status_code == 401
    dom = dump_dom(pod.url + "/", str(tmp_path / "chromium-anon"))
    assert '<form id="login" method="post" action="/status/login">' in dom, dom
    assert 'id="pods"' not in dom

    browser = Browser(str(tmp_path / "chromium"))
    try:
        browser.goto(pod.url + "/")
        assert browser.evaluate("!!document.getElementById('login')")
        browser.evaluate(
            f"document.querySelector('[name=client_id]').value = {json.dumps(CLIENT_ID)};"
            f"document.querySelector('[name=client_secret]').value = {json.dumps(CLIENT_SECRET)};"
            "document.getElementById('login').submit(); true")
        browser.wait_for("!!document.getElementById('pods')")
        cookie = [c for c in browser.cookies() if c["name"] == "sluice_status"]
        assert cookie and cookie[0]["httpOnly"], browser.cookies()
        assert "sluice_status" not in browser.evaluate("document.cookie"), "HttpOnly: not readable by script"
        html = browser.evaluate("document.documentElement.outerHTML")
        png = browser.screenshot()
    finally:
        browser.close()
    m = metrics(pod.url)  # the stream is still open and idle: nothing moves any more

    page = figures(html)
    t = f"table-{TABLE}-"
    label = f'{{table="{TABLE}"}}'
    expected = {
        t + "records": m["sluice_table_records_total" + label],
        t + "rows_committed": m["sluice_table_rows_committed_total" + label],
        t + "streams": m["sluice_table_streams_open" + label],
        t + "files": m["sluice_table_files" + label],
        t + "small_files": m["sluice_table_small_files" + label],
        t + "last_commit": m["sluice_table_last_commit_timestamp_seconds" + label],
        "pod-single-node-streams": m["sluice_streams_open"],
        "pod-single-node-memtable": m["sluice_memtable_bytes"],
        "refusals-NotFound": m['sluice_refusals_total{code="NotFound"}'],
    }
    assert expected[t + "records"] == ROWS and expected[t + "streams"] == 1, m
    assert {k: page.values.get(k) for k in expected} == expected, html
    assert page.values[t + "freshness_p99"] == m[f'sluice_table_freshness_seconds{{table="{TABLE}",quantile="0.99"}}']
    assert page.values[t + "mean_file"] == pytest.approx(
        m["sluice_table_size_bytes" + label] / m["sluice_table_files" + label])
    for chart in ("ingress", "rows", "cpu", "streams", "freshness", "memtable"):
        assert f"chart-{chart}" in page.ids, chart
    points = int(re.search(r'<svg id="chart-streams"[^>]*data-points="(\d+)"', html).group(1))
    assert points >= 2, html
    assert "<script" not in html and " src=" not in html, "nothing fetched from elsewhere"

    size, colours = distinct_colours(png)
    assert size[0] == 1280 and size[1] > 600, size
    assert colours > 50, f"the screenshot looks blank: {colours} colours"
    if SCREENSHOT_COPY:
        with open(SCREENSHOT_COPY, "wb") as f:
            f.write(png)
    stream.close()


def test_the_page_refuses_callers_who_are_not_admins(server):
    url = server.url
    token = server.token()
    anon = requests.get(url + "/", timeout=10)
    assert anon.status_code == 401 and 'id="login"' in anon.text
    assert "log in with an admin principal&#39;s client id and secret" in anon.text
    assert requests.get(url + "/", headers={"Authorization": "Bearer " + token}, timeout=10).status_code == 200
    forged = requests.get(url + "/", headers={"Cookie": "sluice_status=forged"}, timeout=10)
    assert forged.status_code == 401 and 'id="login"' in forged.text

    created = requests.post(url + "/api/sluice/v1/principals", json={"name": "viewer"},
                            headers={"Authorization": "Bearer " + token}, timeout=10).json()
    create_table(server, "main.ops.viewable", [("id", "bigint", "LONG", False)])
    # REST inserts count as records in too.
    inserted = requests.post(url + "/zerobus/v1/tables/main.ops.viewable/insert", json=[{"id": 1}, {"id": 2}],
                             headers={"Authorization": "Bearer " + token}, timeout=10)
    assert inserted.status_code == 200, inserted.text
    shown = figures(requests.get(url + "/", headers={"Authorization": "Bearer " + token}, timeout=10).text)
    assert shown.values["table-main.ops.viewable-records"] == 2 == \
        metrics(url)['sluice_table_records_total{table="main.ops.viewable"}']
    details = json.dumps([{"type": "unity_catalog_privileges", "privileges": ["SELECT"],
                           "object_type": "TABLE", "object_full_path": "main.ops.viewable"}])
    requests.patch(url + "/api/2.1/unity-catalog/permissions/table/main.ops.viewable",
                   json={"changes": [{"principal": "viewer", "add": ["SELECT"]}]},
                   headers={"Authorization": "Bearer " + token}, timeout=10).raise_for_status()
    weak = requests.post(url + "/oidc/v1/token", data={"grant_type": "client_credentials",
                                                       "authorization_details": details},
                         auth=(created["client_id"], created["client_secret"]), timeout=10).json()
    not_admin = requests.get(url + "/", headers={"Authorization": "Bearer " + weak["access_token"]}, timeout=10)
    assert not_admin.status_code == 403 and "the status page is for admin principals" in not_admin.text

    login = url + "/status/login"
    wrong = requests.post(login, data={"client_id": CLIENT_ID, "client_secret": "wrong"},
                          allow_redirects=False, timeout=10)
    assert wrong.status_code == 401 and "invalid client id or secret" in wrong.text
    assert "set-cookie" not in wrong.headers
    viewer = requests.post(login, data={"client_id": created["client_id"],
                                        "client_secret": created["client_secret"]},
                           allow_redirects=False, timeout=10)
    assert viewer.status_code == 403 and "is not an admin" in viewer.text
    empty = requests.post(login, data={}, allow_redirects=False, timeout=10)
    assert empty.status_code == 400 and "client_id and client_secret" in empty.text
    ok = requests.post(login, data={"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET},
                       allow_redirects=False, timeout=10)
    assert ok.status_code == 303 and ok.headers["location"] == "/"
    assert "HttpOnly" in ok.headers["set-cookie"] and "SameSite=Strict" in ok.headers["set-cookie"]
    page = requests.get(url + "/", cookies={"sluice_status": ok.cookies["sluice_status"]}, timeout=10)
    assert page.status_code == 200 and 'id="pods"' in page.text

    assert requests.get(url + "/status/access", timeout=10).status_code == 401
    assert requests.get(url + "/status/access", headers={"Authorization": "Bearer " + token},
                        timeout=10).status_code == 204

    # Failed secrets are paced per client id, like the token endpoint's: after six, even the
    # right secret waits (503 and the form naming the wait); another client id is not paced.
    paced_id = created["client_id"]
    for _ in range(6):
        r = requests.post(login, data={"client_id": paced_id, "client_secret": "wrong"},
                          allow_redirects=False, timeout=10)
        assert r.status_code == 401, r.text
    paced = requests.post(login, data={"client_id": paced_id, "client_secret": created["client_secret"]},
                          allow_redirects=False, timeout=10)
    assert paced.status_code == 503 and "too many failed attempts for client" in paced.text, paced.text
    assert "set-cookie" not in paced.headers
    other = requests.post(login, data={"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET},
                          allow_redirects=False, timeout=10)
    assert other.status_code == 303


def test_the_routers_page_shows_the_whole_cluster(cluster):  # noqa: F811
    url, pods = cluster
    token = pods[0].token()
    through(url, "POST", "/api/2.1/unity-catalog/tables", {"name": TABLE, "columns": [
        {"name": "id", "type_text": "bigint", "type_name": "LONG", "nullable": False}]}, token)
    streams = [ingest(url, 300) for _ in range(4)]
    for s in streams:
        s.flush()
    anon = requests.get(url + "/", timeout=10)
    assert anon.status_code == 401 and 'id="login"' in anon.text
    page = requests.get(url + "/", headers={"Authorization": "Bearer " + token}, timeout=10)
    assert page.status_code == 200, page.text
    assert "Sluice status: cluster (2 pods)" in page.text
    f = figures(page.text)
    per_pod = [metrics(p.url) for p in pods]
    label = f'sluice_table_records_total{{table="{TABLE}"}}'
    assert f.values[f"table-{TABLE}-records"] == sum(m.get(label, 0) for m in per_pod) == 1200
    assert f.values[f"table-{TABLE}-streams"] == 4
    for i, m in enumerate(per_pod):
        assert f.values[f"pod-pod-{i}-streams"] == m.get("sluice_streams_open", 0)
        assert f"<td id=\"pod-pod-{i}-state\">ready</td>" in page.text
    # The login form posted through the router: the pod's cookie opens the router's page.
    ok = requests.post(url + "/status/login", data={"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET},
                       allow_redirects=False, timeout=10)
    assert ok.status_code == 303
    again = requests.get(url + "/", cookies={"sluice_status": ok.cookies["sluice_status"]}, timeout=10)
    assert again.status_code == 200 and "cluster (2 pods)" in again.text
    for s in streams:
        s.close()
