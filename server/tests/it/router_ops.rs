//! The router's own endpoints, on real processes (etcd, a `sluice router`, a pod, the
//! official Rust SDK): `/readyz` is 503 until the router sees a placeable pod and again
//! once the only pod is gone; `/metrics` counts the placements, the bytes relayed both ways
//! and the upstream errors of a request sent to a killed pod; `/healthz` is 200 while the
//! router reads the meta store and 503 naming it once etcd is gone.

use std::time::Duration;

use crate::cluster_harness::{start_pod, Etcd, Router};
use crate::harness::{admin_json_stream, push_ids_and_close};
use crate::health::wait_status;

const TABLE: &str = "main.ops.router";
const RECORDS: i64 = 200;

async fn get(url: &str) -> (u16, String) {
    let r = reqwest::get(url).await.expect("GET through the router");
    (r.status().as_u16(), r.text().await.expect("body"))
}

/// The sum of the samples of `name` whose labels contain `labels` in Prometheus `text`.
fn sample(text: &str, name: &str, labels: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split(['{', ' ']).next() == Some(name) && l.contains(labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_router_answers_its_own_health_readiness_and_metrics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let mut etcd = Etcd::start(&root.join("etcd")).await;
    let router = Router::start_without_pods(&root.join("router"), &etcd.join).await;
    let url = router.url.clone();

    // No pod: healthy (it reads the meta store) but not ready.
    let (status, body) = get(&format!("{url}/readyz")).await;
    assert_eq!(status, 503, "{body}");
    let body: serde_json::Value = serde_json::from_str(&body).expect("readyz json");
    assert_eq!(body["ready"], false);
    assert_eq!(body["placeable_pods"], 0);
    let (status, body) = get(&format!("{url}/healthz")).await;
    assert_eq!(
        (status, body.as_str()),
        (200, r#"{"reasons":[],"status":"ok"}"#)
    );
    // Its status page cannot check the caller's access without a ready pod: 503 and the form.
    let (status, body) = get(&format!("{url}/")).await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("no pod is ready to check your access; retry"),
        "{body}"
    );

    // A pod joins: ready.
    let mut pod = start_pod(
        root,
        "pod-a",
        &etcd.join,
        &root.join("warehouse"),
        "200ms",
        "1s",
    )
    .await;
    let body = wait_status(&format!("{url}/readyz"), 200, Duration::from_secs(20)).await;
    assert!(body.contains(r#""placeable_pods":1"#), "{body}");

    // Ingest through the router: a placement on pod-a, bytes relayed both ways.
    let out = router.cli(&["table", "create", TABLE, "--columns", "id BIGINT NOT NULL"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stream = admin_json_stream(&router.sdk(), TABLE).await;
    let record_bytes = push_ids_and_close(stream, RECORDS).await;
    let (status, text) = get(&format!("{url}/metrics")).await;
    assert_eq!(status, 200);
    assert!(
        sample(&text, "sluice_router_placements_total", r#"pod="pod-a""#) >= 1.0,
        "{text}"
    );
    let to_pod = sample(
        &text,
        "sluice_router_relayed_bytes_total",
        r#"direction="to_pod""#,
    );
    let from_pod = sample(
        &text,
        "sluice_router_relayed_bytes_total",
        r#"direction="from_pod""#,
    );
    assert!(
        to_pod >= record_bytes as f64,
        "to_pod {to_pod} < {record_bytes}\n{text}"
    );
    assert!(from_pod > 0.0, "{text}");
    assert_eq!(
        sample(&text, "sluice_router_pods_placeable", ""),
        1.0,
        "{text}"
    );
    assert_eq!(
        sample(&text, "sluice_router_upstream_errors_total", ""),
        0.0,
        "{text}"
    );
    assert!(
        !text.contains("sluice_wal_"),
        "the router's own metrics, not a pod's:\n{text}"
    );

    // The pod dies: a request the router still sends there is an upstream error; once
    // its report is stale the router is not ready.
    pod.kill();
    let (status, body) = get(&format!("{url}/api/2.1/unity-catalog/tables")).await;
    assert_eq!(status, 503, "{body}");
    let (_, text) = get(&format!("{url}/metrics")).await;
    assert!(
        sample(
            &text,
            "sluice_router_upstream_errors_total",
            r#"kind="connect""#
        ) >= 1.0,
        "{text}"
    );
    let body = wait_status(&format!("{url}/readyz"), 503, Duration::from_secs(20)).await;
    assert!(body.contains(r#""placeable_pods":0"#), "{body}");

    // etcd dies: after the staleness bound the router says it cannot read the meta store.
    etcd.kill();
    let body = wait_status(&format!("{url}/healthz"), 503, Duration::from_secs(30)).await;
    let body: serde_json::Value = serde_json::from_str(&body).expect("healthz json");
    assert_eq!(body["status"], "unhealthy");
    assert_eq!(body["reasons"][0]["check"], "meta_store", "{body}");
    etcd.restart().await;
    wait_status(&format!("{url}/healthz"), 200, Duration::from_secs(30)).await;
}
