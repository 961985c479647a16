//! The status page as HTML: a summary, six charts of the last 15 minutes, then tables of
//! pods, Delta tables (with their streams) and refusals by status class. It refreshes itself
//! every [`REFRESH_SECS`] (a meta refresh: no script). Each figure sits in an element with a
//! stable `id` and its exact value in `data-value`, so a test can read the page back
//! (`pod-<id>-<field>`, `table-<name>-<field>`, `refusals-<code>`, `chart-<name>`).
//! Also the login form shown when authentication is on and the caller has no admin token.

use std::fmt::Write as _;

use crate::history::{History, WINDOW};
use crate::html::escape;
use crate::snapshot::{status_class, ClusterSnapshot, PodSnapshot, PodView, TableSnapshot};
use crate::svg::line_chart;

/// Seconds between the page's own reloads.
pub const REFRESH_SECS: u32 = 5;
/// Where the login form posts `client_id` and `client_secret`.
pub const LOGIN_PATH: &str = "/status/login";

/// What one page covers.
pub struct PageInput<'a> {
    /// `pod <id>` or `cluster`, shown in the title.
    pub scope: String,
    /// The pods now.
    pub current: &'a ClusterSnapshot,
    /// The last 15 minutes.
    pub history: &'a History,
    /// Unix seconds now.
    pub now: f64,
}

const STYLE: &str =
    "body{font:13px system-ui,sans-serif;margin:16px;color:#1f2d3d;background:#fff}\
h1{font-size:18px;margin:0 0 4px}h2{font-size:14px;margin:18px 0 6px}\
table{border-collapse:collapse}td,th{border:1px solid #cdd5e0;padding:3px 7px;text-align:right}\
th{background:#eef2f8}td:first-child,th:first-child{text-align:left}\
.ok{color:#137333}.bad{color:#b3261e;font-weight:bold}.muted{color:#5a6478}\
.charts{display:flex;flex-wrap:wrap;gap:8px}";

fn head(title: &str, refresh: bool) -> String {
    let meta = if refresh {
        format!("<meta http-equiv=\"refresh\" content=\"{REFRESH_SECS}\">")
    } else {
        String::new()
    };
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">{meta}<title>{}</title><style>{STYLE}</style></head><body>",
        escape(title)
    )
}

/// A number for people: at most 3 significant decimals, thousands as k/M/G.
pub fn human(v: f64) -> String {
    let a = v.abs();
    let (x, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let text = if x == x.trunc() && x.abs() < 1e4 {
        format!("{x:.0}")
    } else if x.abs() >= 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    };
    format!("{text}{suffix}")
}

fn bytes(v: f64) -> String {
    format!("{}B", human(v))
}

fn secs(v: f64) -> String {
    if v < 1.0 {
        format!("{} ms", human(v * 1000.0))
    } else {
        format!("{} s", human(v))
    }
}

/// A cell with a stable id and the exact value in `data-value` ("—" when unknown).
fn cell(out: &mut String, id: &str, value: Option<f64>, text: impl Fn(f64) -> String) {
    match value {
        Some(v) => {
            let _ = write!(
                out,
                "<td id=\"{}\" data-value=\"{v}\">{}</td>",
                escape(id),
                escape(&text(v))
            );
        }
        None => {
            let _ = write!(out, "<td id=\"{}\" class=\"muted\">—</td>", escape(id));
        }
    }
}

/// The status page.
pub fn render(input: &PageInput<'_>) -> String {
    let PageInput {
        scope,
        current,
        history,
        now,
    } = input;
    let now = *now;
    let mut out = head(&format!("Sluice status: {scope}"), true);
    let seen = current.seen().count();
    let ingress = history.cluster_rate(now, current, |c| c.total(|p| p.ingress_bytes_total));
    let rows = history.cluster_rate(now, current, |c| c.total(|p| p.records_total));
    let _ = write!(
        out,
        "<h1>Sluice status: {}</h1><p class=\"muted\">{} of {} pods read · {} streams open · ingress {} · {} rows/s · refreshes every {REFRESH_SECS} s · {} samples over the last 15 min</p>",
        escape(scope),
        seen,
        current.pods.len(),
        human(current.total(|p| p.streams_open)),
        ingress.map_or("—".into(), |v| format!("{}/s", bytes(v))),
        rows.map_or("—".into(), human),
        history.len(),
    );
    charts(&mut out, history, now);
    pods(&mut out, current, history, now);
    tables(&mut out, current, history, now);
    refusals(&mut out, current, history);
    out.push_str(
        "<p class=\"muted\">Read-only. Figures come from each pod's /metrics.</p></body></html>",
    );
    out
}

/// One chart: id suffix, title, points, how its scale's top value is written.
type Chart<'a> = (&'a str, &'a str, Vec<(f64, f64)>, &'a dyn Fn(f64) -> String);

fn charts(out: &mut String, history: &History, now: f64) {
    // The whole window, or as much of it as the history covers (a young pod's charts use
    // their full width).
    let start = history
        .oldest()
        .map_or(now - WINDOW.as_secs_f64(), |(t, _)| {
            t.max(now - WINDOW.as_secs_f64())
        });
    let window = (start.min(now - 1.0), now);
    out.push_str("<h2>Last 15 minutes</h2><div class=\"charts\">");
    let mb = |v: f64| format!("{} MB/s", human(v / 1e6));
    let plain = |v: f64| human(v);
    let s = |v: f64| secs(v);
    let charts: [Chart<'_>; 6] = [
        (
            "ingress",
            "ingress",
            history.rate_series(|c| c.total(|p| p.ingress_bytes_total)),
            &mb,
        ),
        (
            "rows",
            "rows/s",
            history.rate_series(|c| c.total(|p| p.records_total)),
            &plain,
        ),
        (
            "cpu",
            "CPU cores",
            history.rate_series(|c| c.total(|p| p.cpu_seconds_total.unwrap_or(0.0))),
            &plain,
        ),
        (
            "streams",
            "streams open",
            history.series(|c| c.total(|p| p.streams_open)),
            &plain,
        ),
        (
            "freshness",
            "freshness p99 (worst table)",
            history.series(|c| {
                c.tables()
                    .iter()
                    .filter_map(|t| t.freshness_p99)
                    .fold(0.0, f64::max)
            }),
            &s,
        ),
        (
            "memtable",
            "memtable bytes",
            history.series(|c| c.total(|p| p.memtable_bytes)),
            &|v| bytes(v),
        ),
    ];
    for (id, title, points, format) in charts {
        out.push_str(&line_chart(
            &format!("chart-{id}"),
            title,
            &points,
            window,
            format,
        ));
    }
    out.push_str("</div>");
}

fn pods(out: &mut String, current: &ClusterSnapshot, history: &History, now: f64) {
    out.push_str("<h2>Pods</h2><table id=\"pods\"><tr><th>pod</th><th>state</th><th>health</th><th>streams</th><th>ingress MB/s</th><th>CPU cores</th><th>WAL queue</th><th>fsync p99</th><th>memtables</th><th>WAL disk free</th></tr>");
    for view in &current.pods {
        match view {
            PodView::Seen(p) => pod_row(out, p, history, now),
            PodView::Unreachable { id, state, reason } => {
                let _ = write!(
                    out,
                    "<tr id=\"pod-{0}\"><td>{0}</td><td>{1}</td><td class=\"bad\" colspan=\"8\">not read: {2}</td></tr>",
                    escape(id),
                    escape(state),
                    escape(reason)
                );
            }
        }
    }
    out.push_str("</table>");
}

fn pod_row(out: &mut String, p: &PodSnapshot, history: &History, now: f64) {
    let id = |field: &str| format!("pod-{}-{field}", p.id);
    let (health, class) = if p.healthy {
        ("healthy", "ok")
    } else {
        ("unhealthy", "bad")
    };
    let _ = write!(
        out,
        "<tr id=\"pod-{0}\"><td>{0}</td><td id=\"pod-{0}-state\">{1}</td><td class=\"{class}\">{health}</td>",
        escape(&p.id),
        escape(&p.state)
    );
    cell(out, &id("streams"), Some(p.streams_open), human);
    let ingress = history.pod_rate(now, p, |x| Some(x.ingress_bytes_total));
    cell(out, &id("ingress_mbps"), ingress.map(|v| v / 1e6), human);
    let cpu = history.pod_rate(now, p, |x| x.cpu_seconds_total);
    cell(out, &id("cpu_cores"), cpu, human);
    cell(out, &id("wal_queue"), Some(p.wal_queued_bytes), bytes);
    cell(out, &id("fsync_p99"), p.wal_fsync_p99, secs);
    cell(out, &id("memtable"), Some(p.memtable_bytes), bytes);
    cell(out, &id("wal_disk_free"), p.wal_disk_free_bytes, bytes);
    out.push_str("</tr>");
}

fn tables(out: &mut String, current: &ClusterSnapshot, history: &History, now: f64) {
    out.push_str("<h2>Tables</h2><table id=\"tables\"><tr><th>table</th><th>rows/s</th><th>records in</th><th>rows committed</th><th>streams</th><th>freshness p50</th><th>freshness p99</th><th>commit lag</th><th>pending</th><th>last commit</th><th>files</th><th>mean file</th><th>pending compaction (small files)</th></tr>");
    let base: Vec<TableSnapshot> = history
        .baseline(now)
        .map(|(_, s)| s.tables())
        .unwrap_or_default();
    let base_at = history.baseline(now).map(|(t, _)| *t);
    let all = current.tables();
    if all.is_empty() {
        out.push_str("<tr><td colspan=\"13\" class=\"muted\">no table has had a stream, a commit or an upkeep round on this scope yet</td></tr>");
    }
    for t in &all {
        let id = |field: &str| format!("table-{}-{field}", t.name);
        let _ = write!(out, "<tr id=\"table-{0}\"><td>{0}</td>", escape(&t.name));
        let rate = base
            .iter()
            .find(|b| b.name == t.name)
            .zip(base_at)
            .map(|(b, at)| crate::history::rate(b.records_total, t.records_total, now - at));
        cell(out, &id("rows_per_sec"), rate, human);
        cell(out, &id("records"), Some(t.records_total), human);
        cell(
            out,
            &id("rows_committed"),
            Some(t.rows_committed_total),
            human,
        );
        cell(out, &id("streams"), Some(t.streams_open), human);
        cell(out, &id("freshness_p50"), t.freshness_p50, secs);
        cell(out, &id("freshness_p99"), t.freshness_p99, secs);
        cell(out, &id("commit_lag"), Some(t.commit_lag_seconds), secs);
        cell(out, &id("pending"), Some(t.pending_bytes), bytes);
        cell(out, &id("last_commit"), t.last_commit_unix, |v| {
            format!("{} ago", secs((now - v).max(0.0)))
        });
        cell(out, &id("files"), t.files, human);
        cell(out, &id("mean_file"), t.mean_file_bytes(), bytes);
        cell(out, &id("small_files"), t.small_files, human);
        out.push_str("</tr>");
    }
    out.push_str("</table>");
}

fn refusals(out: &mut String, current: &ClusterSnapshot, history: &History) {
    out.push_str("<h2>Refusals by status</h2><table id=\"refusals\"><tr><th>gRPC code</th><th>class</th><th>since start</th><th>last 15 min</th></tr>");
    let all = current.refusals();
    let old = history
        .oldest()
        .map(|(_, s)| s.refusals())
        .unwrap_or_default();
    if all.is_empty() {
        out.push_str("<tr><td colspan=\"4\" class=\"muted\">none</td></tr>");
    }
    for (code, n) in &all {
        let before = old.iter().find(|(c, _)| c == code).map_or(0.0, |(_, v)| *v);
        let recent = if *n >= before { n - before } else { *n };
        let _ = write!(
            out,
            "<tr><td>{0}</td><td>{1}</td>",
            escape(code),
            status_class(code)
        );
        cell(out, &format!("refusals-{code}"), Some(*n), human);
        cell(out, &format!("refusals-{code}-recent"), Some(recent), human);
        out.push_str("</tr>");
    }
    out.push_str("</table>");
}

/// The login form (authentication on, no admin token): client id and secret, posted to
/// [`LOGIN_PATH`]; `message` says why it is shown.
pub fn login(message: &str) -> String {
    let mut out = head("Sluice status: log in", false);
    let _ = write!(
        out,
        "<h1>Sluice status</h1><p id=\"login-message\">{}</p><form id=\"login\" method=\"post\" action=\"{LOGIN_PATH}\"><p><label>client id <input name=\"client_id\" autocomplete=\"username\"></label></p><p><label>client secret <input name=\"client_secret\" type=\"password\" autocomplete=\"current-password\"></label></p><p><button type=\"submit\">Log in</button></p></form><p class=\"muted\">An admin principal's credentials; the page keeps its token in an HttpOnly cookie. <code>Authorization: Bearer</code> works too.</p></body></html>",
        escape(message)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prom::Samples;

    fn pod(id: &str, text: &str) -> PodSnapshot {
        PodSnapshot::from_samples(id, &Samples::parse(text).expect("parse"))
    }

    fn text(records: u32, refused: u32) -> String {
        format!(
            "sluice_ready 1\nsluice_healthy 1\nsluice_streams_open 1\nsluice_ingest_bytes_total {b}\n\
             sluice_ingest_records_total {records}\nsluice_process_cpu_seconds {cpu}\n\
             sluice_refusals_total{{code=\"NotFound\"}} {refused}\n\
             sluice_table_records_total{{table=\"main.s.<t>\"}} {records}\n\
             sluice_table_streams_open{{table=\"main.s.<t>\"}} 1\n\
             sluice_table_last_commit_timestamp_seconds{{table=\"main.s.<t>\"}} 990\n",
            b = records * 10,
            cpu = f64::from(records) / 1000.0
        )
    }

    fn cluster(records: u32, refused: u32) -> ClusterSnapshot {
        ClusterSnapshot {
            pods: vec![
                PodView::Seen(pod("p1", &text(records, refused))),
                PodView::Unreachable {
                    id: "p2".into(),
                    state: "draining".into(),
                    reason: "connection refused".into(),
                },
            ],
        }
    }

    #[test]
    fn the_page_shows_each_figure_under_a_stable_id() {
        let mut history = History::default();
        history.push(980.0, cluster(0, 1));
        history.push(990.0, cluster(1000, 1));
        let current = cluster(1500, 3);
        let html = render(&PageInput {
            scope: "cluster".into(),
            current: &current,
            history: &history,
            now: 1000.0,
        });
        assert!(html.contains("<meta http-equiv=\"refresh\" content=\"5\">"));
        assert!(html.contains("1 of 2 pods read"), "{html}");
        // 500 records and 5000 bytes over the 10 s since the baseline at 990.
        assert!(
            html.contains(
                "<td id=\"table-main.s.&lt;t&gt;-rows_per_sec\" data-value=\"50\">50</td>"
            ),
            "{html}"
        );
        assert!(html
            .contains("<td id=\"table-main.s.&lt;t&gt;-records\" data-value=\"1500\">1500</td>"));
        assert!(html.contains("<td id=\"table-main.s.&lt;t&gt;-streams\" data-value=\"1\">1</td>"));
        assert!(html.contains(
            "<td id=\"table-main.s.&lt;t&gt;-last_commit\" data-value=\"990\">10 s ago</td>"
        ));
        assert!(html.contains("<td id=\"table-main.s.&lt;t&gt;-files\" class=\"muted\">—</td>"));
        assert!(
            html.contains("<td id=\"pod-p1-ingress_mbps\" data-value=\"0.0005\">"),
            "{html}"
        );
        assert!(
            html.contains("<td id=\"pod-p1-cpu_cores\" data-value=\"0.05\">"),
            "{html}"
        );
        assert!(html.contains("not read: connection refused"));
        // 3 refusals since start, 2 since the oldest sample.
        assert!(html.contains("<td id=\"refusals-NotFound\" data-value=\"3\">3</td><td id=\"refusals-NotFound-recent\" data-value=\"2\">2</td>"), "{html}");
        assert!(html.contains("<td>NotFound</td><td>client</td>"));
        for chart in ["ingress", "rows", "cpu", "streams", "freshness", "memtable"] {
            assert!(
                html.contains(&format!("<svg id=\"chart-{chart}\"")),
                "{chart}"
            );
        }
        assert!(html.contains("<svg id=\"chart-rows\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"300\" height=\"90\" viewBox=\"0 0 300 90\" data-points=\"1\">"), "{html}");
        assert!(!html.contains("<script"), "no script, nothing fetched");
        assert!(
            !html.contains(" src=") && !html.contains("<link"),
            "nothing loaded from elsewhere"
        );
    }

    #[test]
    fn without_samples_rates_are_unknown_not_zero() {
        let current = cluster(10, 0);
        let html = render(&PageInput {
            scope: "pod p1".into(),
            current: &current,
            history: &History::default(),
            now: 1000.0,
        });
        assert!(html.contains("<td id=\"pod-p1-ingress_mbps\" class=\"muted\">—</td>"));
        assert!(html.contains("no samples yet"));
        assert!(html.contains("<table id=\"refusals\">"));
        assert!(html.contains("ingress — · — rows/s"), "{html}");
    }

    #[test]
    fn the_login_form_posts_the_client_credentials() {
        let html = login("log in as an <admin>");
        assert!(html.contains("<form id=\"login\" method=\"post\" action=\"/status/login\">"));
        assert!(html.contains("name=\"client_id\""));
        assert!(html.contains("name=\"client_secret\" type=\"password\""));
        assert!(html.contains("log in as an &lt;admin&gt;"));
        assert!(!html.contains("http-equiv=\"refresh\""));
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(human(500.0), "500");
        assert_eq!(human(12345.0), "12.345k");
        assert_eq!(human(0.25), "0.250");
        assert_eq!(human(2.5e6), "2.500M");
        assert_eq!(secs(0.0123), "12.300 ms");
    }
}
