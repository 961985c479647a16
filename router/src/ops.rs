//! The router's own HTTP endpoints, answered by the router and never relayed:
//!
//! - `GET /healthz`: 200 while the router reads the pod list from the meta store (its last
//!   successful read is at most [`META_STALE_AFTER`] old), else 503 naming the meta store
//!   and its last error; body `{"status", "reasons"}` like a pod's;
//! - `GET /readyz`: 200 when at least one pod is placeable (ready, fresh, not suspect), else
//!   503; body `{"ready", "placeable_pods", "known_pods"}`;
//! - `GET /metrics`: the router's Prometheus metrics (placements per pod, relayed bytes,
//!   upstream errors, requests refused for want of a pod, pods known and placeable; the TCP
//!   front doors' counters are `crate::tcp_front`'s), as
//!   rendered by the process's recorder (the binary installs it and passes its renderer).
//!
//! Also the names of those metrics and the body wrapper that counts relayed bytes.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full};
use hyper::body::{Body, Frame};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};

/// The body of every request and response the router relays or answers.
pub type ProxyBody = UnsyncBoxBody<Bytes, hyper::Error>;

/// A router whose last good read of the pod list is older than this is not healthy.
pub const META_STALE_AFTER: Duration = Duration::from_secs(10);

/// Streams placed, by pod (label `pod`).
pub const PLACEMENTS: &str = "sluice_router_placements_total";
/// Bytes of request and response bodies relayed (label `direction`: `to_pod`, `from_pod`).
pub const RELAYED_BYTES: &str = "sluice_router_relayed_bytes_total";
/// Requests a pod could not be reached for (label `kind`: `connect`, `other`).
pub const UPSTREAM_ERRORS: &str = "sluice_router_upstream_errors_total";
/// Requests answered unavailable because no pod was placeable.
pub const NO_POD: &str = "sluice_router_no_pod_total";
/// Pods in the meta store, and of them the placeable ones.
pub const PODS_KNOWN: &str = "sluice_router_pods_known";
/// Pods now placeable.
pub const PODS_PLACEABLE: &str = "sluice_router_pods_placeable";

/// Renders the process's metrics in Prometheus text format.
pub type RenderMetrics = fn() -> String;

/// The outcome of the router's reads of the pod list.
#[derive(Default)]
pub struct MetaHealth {
    state: Mutex<MetaState>,
}

#[derive(Default)]
struct MetaState {
    last_ok: Option<Instant>,
    last_error: Option<String>,
}

impl MetaHealth {
    /// Records one read of the pod list.
    pub fn record(&self, outcome: Result<(), String>) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match outcome {
            Ok(()) => {
                s.last_ok = Some(Instant::now());
                s.last_error = None;
            }
            Err(e) => s.last_error = Some(e),
        }
    }

    /// Why the router is not healthy (None: healthy).
    pub fn problem(&self) -> Option<String> {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let fresh = s.last_ok.is_some_and(|t| t.elapsed() <= META_STALE_AFTER);
        if fresh {
            return None;
        }
        let since = s.last_ok.map_or_else(
            || "never".to_string(),
            |t| format!("{}s ago", t.elapsed().as_secs()),
        );
        Some(format!(
            "the router cannot read the pod list from the meta store (last success {since}): {}",
            s.last_error.as_deref().unwrap_or("no answer")
        ))
    }
}

/// `/healthz` of the router.
pub fn healthz(meta: &MetaHealth) -> Response<ProxyBody> {
    match meta.problem() {
        None => json(
            StatusCode::OK,
            serde_json::json!({"status": "ok", "reasons": []}),
        ),
        Some(message) => json(
            StatusCode::SERVICE_UNAVAILABLE,
            serde_json::json!({
                "status": "unhealthy",
                "reasons": [{"check": "meta_store", "message": message}],
            }),
        ),
    }
}

/// `/readyz` of the router: ready with at least one placeable pod.
pub fn readyz(placeable: usize, known: usize) -> Response<ProxyBody> {
    let status = if placeable > 0 {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json(
        status,
        serde_json::json!({
            "ready": placeable > 0,
            "placeable_pods": placeable,
            "known_pods": known,
        }),
    )
}

/// `/metrics` of the router.
pub fn metrics(render: RenderMetrics, placeable: usize, known: usize) -> Response<ProxyBody> {
    metrics::gauge!(PODS_PLACEABLE).set(placeable as f64);
    metrics::gauge!(PODS_KNOWN).set(known as f64);
    let mut resp = Response::new(full(Bytes::from(render())));
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    resp
}

/// `body`, counting its data bytes into [`RELAYED_BYTES`] with `direction`.
pub fn counted<B>(body: B, direction: &'static str) -> ProxyBody
where
    B: Body<Data = Bytes, Error = hyper::Error> + Send + 'static,
{
    let counter = metrics::counter!(RELAYED_BYTES, "direction" => direction);
    body.map_frame(move |frame: Frame<Bytes>| {
        if let Some(data) = frame.data_ref() {
            counter.increment(data.len() as u64);
        }
        frame
    })
    .boxed_unsync()
}

fn full(bytes: Bytes) -> ProxyBody {
    Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn json(status: StatusCode, body: serde_json::Value) -> Response<ProxyBody> {
    let mut resp = Response::new(full(Bytes::from(body.to_string())));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body(resp: Response<ProxyBody>) -> serde_json::Value {
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        serde_json::from_slice(&bytes).expect("json")
    }

    #[tokio::test]
    async fn healthy_only_after_a_recent_read_of_the_pod_list() {
        let meta = MetaHealth::default();
        let never = healthz(&meta);
        assert_eq!(never.status(), StatusCode::SERVICE_UNAVAILABLE);
        meta.record(Err("connection refused".into()));
        let refused = body(healthz(&meta)).await;
        assert_eq!(refused["reasons"][0]["check"], "meta_store");
        assert!(refused["reasons"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("connection refused") && m.contains("never")));
        meta.record(Ok(()));
        meta.record(Err("a later blip".into()));
        assert_eq!(healthz(&meta).status(), StatusCode::OK, "still fresh");
    }

    #[tokio::test]
    async fn ready_with_one_placeable_pod() {
        let none = readyz(0, 2);
        assert_eq!(none.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            body(none).await,
            serde_json::json!({"ready": false, "placeable_pods": 0, "known_pods": 2})
        );
        assert_eq!(readyz(1, 2).status(), StatusCode::OK);
    }
}
