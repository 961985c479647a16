//! The REST load: `clients` tasks, each with its own HTTP/1.1 keep-alive connection,
//! POST JSON arrays of `per_request` telemetry records to
//! `/zerobus/v1/tables/{table}/insert` as fast as answers come (closed loop) or at a fixed
//! total request rate (open loop: each client sends on its own schedule), and time each
//! request from send to its 200. Keyed: every request carries a fresh `Idempotency-Key`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use sluice_bench::stats::Samples;

/// What one load run did.
pub struct Outcome {
    /// Requests answered 200 inside the window.
    pub requests: u64,
    /// Records in them.
    pub records: u64,
    /// Request latencies, ms.
    pub latency_ms: Samples,
}

/// One telemetry record as JSON (the same fields and values as the proto record).
pub fn json_record(id: i64, padding: &str) -> String {
    serde_json::json!({
        "id": id,
        "device": format!("device-{:04}", id % 1000),
        "ts": 1_700_000_000_000_000i64 + id,
        "temp": 20.0 + (id % 100) as f64 / 10.0,
        "humidity": 0.45,
        "payload": padding,
    })
    .to_string()
}

/// A JSON array body of `n` records starting at id `first`.
fn body(first: i64, n: usize, padding: &str) -> String {
    let mut out = String::with_capacity(n * 230 + 2);
    out.push('[');
    for i in 0..n {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&json_record(first + i as i64, padding));
    }
    out.push(']');
    out
}

/// The load's shape.
pub struct Shape {
    /// Concurrent clients.
    pub clients: usize,
    /// Records per request.
    pub per_request: usize,
    /// How long to send.
    pub window: Duration,
    /// Total requests/s (None: closed loop).
    pub rate: Option<f64>,
    /// Whether every request carries a fresh `Idempotency-Key`.
    pub keyed: bool,
}

/// Runs the load.
pub async fn run(
    url: String,
    token: String,
    shape: Shape,
    padding: Arc<String>,
) -> Result<Outcome> {
    let Shape {
        clients,
        per_request,
        window,
        rate,
        keyed,
    } = shape;
    let start = Instant::now();
    let deadline = start + window;
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (url, token, padding) = (url.clone(), token.clone(), padding.clone());
        let interval = rate.map(|r| Duration::from_secs_f64(clients as f64 / r));
        tasks.push(tokio::spawn(async move {
            let http = reqwest::Client::builder().http1_only().build()?;
            let mut latency = Samples::new();
            let (mut requests, mut records) = (0u64, 0u64);
            // Open loop: stagger the clients over one interval.
            let mut next =
                start + interval.map_or(Duration::ZERO, |i| i * c as u32 / clients as u32);
            let mut id = c as i64 * sluice_bench::e2e::ID_STRIDE;
            while Instant::now() < deadline {
                if let Some(i) = interval {
                    tokio::time::sleep_until(next.into()).await;
                    next += i;
                }
                let payload = body(id, per_request, &padding);
                id += per_request as i64;
                let sent = Instant::now();
                let mut request = http
                    .post(&url)
                    .bearer_auth(&token)
                    .header("content-type", "application/json");
                if keyed {
                    request = request.header("idempotency-key", format!("bench-{c}-{id}"));
                }
                let resp = request.body(payload).send().await?;
                let status = resp.status();
                let _ = resp.bytes().await?;
                if !status.is_success() {
                    bail!("REST insert answered {status}");
                }
                if Instant::now() <= deadline {
                    latency.push_ms(sent.elapsed());
                    requests += 1;
                    records += per_request as u64;
                }
            }
            anyhow::Ok((requests, records, latency))
        }));
    }
    let mut out = Outcome {
        requests: 0,
        records: 0,
        latency_ms: Samples::new(),
    };
    for t in tasks {
        let (requests, records, latency) = t.await??;
        out.requests += requests;
        out.records += records;
        out.latency_ms.extend(&latency);
    }
    Ok(out)
}
