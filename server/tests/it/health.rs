//! `/healthz` reflects reality: a real `sluice serve` on an S3 warehouse (a real moto
//! server) answers 200 while moto runs, 503 naming the unreachable warehouse once moto has
//! been killed for longer than `--warehouse-unhealthy-after`, and 200 again once a moto
//! serves the endpoint again. The failed-WAL answer is observed in `wal_eio.rs`.

use std::time::{Duration, Instant};

use crate::harness::Server;
use crate::moto::Moto;

/// `/healthz`: the status code and the JSON body.
pub async fn healthz(url: &str) -> (u16, serde_json::Value) {
    let r = reqwest::get(format!("{url}/healthz"))
        .await
        .expect("GET /healthz");
    let status = r.status().as_u16();
    (status, r.json().await.expect("/healthz answers JSON"))
}

/// Polls `/healthz` until it answers `status` (or panics after `timeout`).
async fn wait_health(url: &str, status: u16, timeout: Duration) -> serde_json::Value {
    let body = wait_status(&format!("{url}/healthz"), status, timeout).await;
    serde_json::from_str(&body).expect("/healthz answers JSON")
}

/// Polls `url` until it answers `status` (or panics after `timeout`); returns the body.
pub async fn wait_status(url: &str, status: u16, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let r = reqwest::get(url).await.expect("GET");
        let got = r.status().as_u16();
        let body = r.text().await.expect("body");
        if got == status {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "{url} never answered {status}; last {got} {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_is_503_naming_the_warehouse_once_it_is_unreachable_longer_than_the_threshold() {
    let mut moto = Moto::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut args = moto.serve_args("health");
    args.extend(["--warehouse-unhealthy-after".into(), "2s".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = Server::start_with_args(dir.path(), "200ms", &args).await;

    let (status, body) = healthz(&server.url).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, serde_json::json!({"status": "ok", "reasons": []}));

    moto.kill();
    let killed = Instant::now();
    let body = wait_health(&server.url, 503, Duration::from_secs(30)).await;
    assert!(
        killed.elapsed() >= Duration::from_secs(2),
        "unhealthy only after the threshold: {:?}",
        killed.elapsed()
    );
    assert_eq!(body["status"], "unhealthy", "{body}");
    let reasons = body["reasons"].as_array().expect("reasons");
    assert_eq!(reasons.len(), 1, "{body}");
    assert_eq!(reasons[0]["check"], "warehouse", "{body}");
    let message = reasons[0]["message"].as_str().expect("message");
    assert!(
        message.contains("unreachable") && message.contains("threshold 2s"),
        "{message}"
    );
    assert_eq!(
        server.metric("sluice_healthy").await,
        0.0,
        "the gauge agrees"
    );
    assert!(server.metric("sluice_warehouse_unreachable_seconds").await >= 2.0);

    moto.restart().await;
    let body = wait_health(&server.url, 200, Duration::from_secs(30)).await;
    assert_eq!(body["reasons"], serde_json::json!([]));
    assert_eq!(server.metric("sluice_healthy").await, 1.0);
    let log = server.log_without_panic();
    assert!(
        log.contains("the warehouse is unreachable") && log.contains("reachable again"),
        "the log tells the outage and its end:\n{log}"
    );
}
