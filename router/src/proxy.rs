//! `sluice router`: the producers' endpoint in a cluster. It accepts HTTP/1.1 and HTTP/2
//! (cleartext) connections and relays each request to a pod:
//!
//! - a gRPC call (content type `application/grpc`, e.g. each `EphemeralStream`) is a new
//!   stream: the [`Placer`] picks a placeable pod, and the call is relayed over one shared
//!   HTTP/2 connection per pod. Frames are passed through as they come, both ways, trailers
//!   included; records are never decoded. The call stays on that pod for its life (a reconnect
//!   is a new call and is placed again);
//! - any other request (the OAuth token endpoint, the tables API, health) goes to the next
//!   ready pod in turn: every pod serves the same catalog from the meta store.
//!
//! Calls to the internal pod-to-pod services (`/sluice.cluster.v1.*`) are never relayed:
//! gRPC UNIMPLEMENTED, HTTP 404. Plain `GET /healthz`, `/readyz` and `/metrics` are the
//! router's own ([`crate::ops`]), not a pod's, and so is `GET /`, the cluster's status page
//! ([`crate::status_page`]).
//!
//! Membership comes from the meta store every [`REFRESH_INTERVAL`]; pods that are draining,
//! whose report is older than [`STALE_AFTER_MS`], or that refused a connection in the last
//! [`SUSPECT_FOR`] are not placed on. With no pod available a gRPC call gets UNAVAILABLE (the
//! SDKs retry) and an HTTP request 503 with a JSON `{"error_code", "message"}` body.
//!
//! Only a request with a gRPC content type is treated as a gRPC call: every other request
//! (REST insert, an unknown path, a wrong method) is relayed as plain HTTP, and the pod
//! answers it as HTTP (404 / 405 with a JSON error for what it does not serve), never with
//! a gRPC status a plain HTTP client would read as success.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, HOST};
use hyper::{Request, Response, StatusCode, Uri, Version};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

use crate::error::{Result, RouterError};
use crate::meta::Meta;
use crate::ops::{MetaHealth, RenderMetrics};
use crate::placement::{Placer, Policy};
use crate::pod_record::{now_ms, PodRecord};

/// Path prefix of the internal pod-to-pod gRPC services, which the router
/// never relays (pods call each other directly).
pub const INTERNAL_PREFIX: &str = "/sluice.cluster.v1.";
/// How often the router reloads the pod list.
pub const REFRESH_INTERVAL: Duration = Duration::from_millis(250);
pub use crate::pod_record::STALE_AFTER_MS;
/// How long a pod that refused a connection is skipped.
pub const SUSPECT_FOR: Duration = Duration::from_secs(2);
/// HTTP/2 windows of the router's connections (both sides): large enough that one stream's
/// window never throttles an SDK that has megabytes in flight.
const H2_STREAM_WINDOW: u32 = 8 << 20;
const H2_CONN_WINDOW: u32 = 32 << 20;
/// Largest HTTP/2 DATA frame the router accepts: clients may send a whole
/// request batch in one frame, so the relay handles fewer, larger frames.
const H2_MAX_FRAME: u32 = 1 << 20;

pub use crate::ops::ProxyBody;

/// The router's view of the cluster and its clients to the pods.
pub struct Router {
    view: Mutex<View>,
    placer: Placer,
    next_http: AtomicUsize,
    h2: Client<HttpConnector, ProxyBody>,
    h1: Client<HttpConnector, ProxyBody>,
    /// The outcome of the reads of the pod list (`/healthz`).
    pub meta_health: MetaHealth,
    render_metrics: RenderMetrics,
    status: crate::status_page::ClusterStatus,
}

#[derive(Default)]
struct View {
    pods: Vec<PodRecord>,
    /// Streams placed per pod since its last report.
    placed: HashMap<String, u64>,
    suspect: HashMap<String, Instant>,
}

impl Router {
    /// A router with `policy` and an empty view (call [`Router::update`] or [`run`]);
    /// `/metrics` answers what `render_metrics` renders.
    pub fn new(policy: Policy, render_metrics: RenderMetrics) -> Arc<Router> {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(2)));
        let h2 = Client::builder(TokioExecutor::new())
            .http2_only(true)
            .http2_initial_stream_window_size(H2_STREAM_WINDOW)
            .http2_initial_connection_window_size(H2_CONN_WINDOW)
            .http2_max_frame_size(H2_MAX_FRAME)
            .http2_keep_alive_interval(Duration::from_secs(10))
            .timer(hyper_util::rt::TokioTimer::new())
            .build(connector.clone());
        let h1 = Client::builder(TokioExecutor::new()).build(connector);
        Arc::new(Router {
            view: Mutex::new(View::default()),
            placer: Placer::new(policy),
            next_http: AtomicUsize::new(0),
            h2,
            h1,
            meta_health: MetaHealth::default(),
            render_metrics,
            status: crate::status_page::ClusterStatus::default(),
        })
    }

    fn view(&self) -> std::sync::MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces the membership view; resets the placed-since-report count of every pod whose
    /// report is newer than the one the count was started on.
    pub fn update(&self, pods: Vec<PodRecord>) {
        let mut view = self.view();
        let old: HashMap<String, i64> = view
            .pods
            .iter()
            .map(|p| (p.id.clone(), p.reported_at_ms))
            .collect();
        for p in &pods {
            if old.get(&p.id) != Some(&p.reported_at_ms) {
                view.placed.remove(&p.id);
            }
        }
        view.pods = pods;
    }

    /// The pods now placeable (ready, fresh, not suspect).
    pub fn placeable(&self) -> Vec<PodRecord> {
        let now = now_ms();
        let mut view = self.view();
        view.suspect
            .retain(|_, since| since.elapsed() < SUSPECT_FOR);
        let suspect = &view.suspect;
        view.pods
            .iter()
            .filter(|p| p.placeable(now, STALE_AFTER_MS) && !suspect.contains_key(&p.id))
            .cloned()
            .collect()
    }

    /// Chooses the pod for a new stream and counts the placement.
    pub fn place_stream(&self) -> Option<PodRecord> {
        self.place_where(|_| true)
    }

    /// Chooses the pod for a new stream (or relayed TCP connection) among the placeable
    /// pods that `eligible` accepts, and counts the placement.
    pub fn place_where(&self, eligible: impl Fn(&PodRecord) -> bool) -> Option<PodRecord> {
        let mut candidates = self.placeable();
        candidates.retain(|p| eligible(p));
        let mut view = self.view();
        let chosen = self.placer.choose(&candidates, &view.placed)?.clone();
        *view.placed.entry(chosen.id.clone()).or_insert(0) += 1;
        metrics::counter!(crate::ops::PLACEMENTS, "pod" => chosen.id.clone()).increment(1);
        Some(chosen)
    }

    /// Places a connection with `key` (an MQTT client id) on the placeable pod that
    /// `eligible` accepts with the highest rendezvous weight for it, and counts it.
    pub fn place_keyed(
        &self,
        key: &[u8],
        eligible: impl Fn(&PodRecord) -> bool,
    ) -> Option<PodRecord> {
        let chosen = self
            .placeable()
            .into_iter()
            .filter(|p| eligible(p))
            .max_by_key(|p| crate::placement::rendezvous(key, &p.id))?;
        *self.view().placed.entry(chosen.id.clone()).or_insert(0) += 1;
        metrics::counter!(crate::ops::PLACEMENTS, "pod" => chosen.id.clone()).increment(1);
        Some(chosen)
    }

    fn pick_for_http(&self) -> Option<PodRecord> {
        let candidates = self.placeable();
        if candidates.is_empty() {
            return None;
        }
        let i = self.next_http.fetch_add(1, Ordering::Relaxed);
        candidates.get(i % candidates.len()).cloned()
    }

    /// Skips pod `id` for [`SUSPECT_FOR`] (it refused a connection).
    pub fn mark_suspect(&self, id: &str) {
        self.view().suspect.insert(id.to_string(), Instant::now());
    }

    /// Relays one request to a pod and returns its response.
    pub async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<ProxyBody> {
        let grpc = req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("application/grpc"));
        if req.uri().path().starts_with(INTERNAL_PREFIX) {
            return refused(grpc);
        }
        if !grpc && req.method() == hyper::Method::GET {
            if req.uri().path() == "/" {
                return crate::status_page::ClusterStatus::page(&*self, req.headers()).await;
            }
            if let Some(resp) = self.own(req.uri().path()) {
                return resp;
            }
        }
        let pod = if grpc {
            self.place_stream()
        } else {
            self.pick_for_http()
        };
        let Some(pod) = pod else {
            metrics::counter!(crate::ops::NO_POD).increment(1);
            return unavailable(grpc, "no pod is ready to take this request; retry");
        };
        let (mut parts, body) = req.into_parts();
        let path = parts
            .uri
            .path_and_query()
            .map(|pq| pq.as_str())
            .unwrap_or("/");
        parts.uri = match format!("{}{}", pod.addr.trim_end_matches('/'), path).parse::<Uri>() {
            Ok(uri) => uri,
            Err(e) => return unavailable(grpc, &format!("pod {} has a bad address: {e}", pod.id)),
        };
        parts.headers.remove(HOST);
        let req = Request::from_parts(parts, crate::ops::counted(body, "to_pod"));
        let sent = if grpc {
            let mut req = req;
            *req.version_mut() = Version::HTTP_2;
            self.h2.request(req).await
        } else {
            let mut req = req;
            *req.version_mut() = Version::HTTP_11;
            self.h1.request(req).await
        };
        match sent {
            Ok(resp) => resp.map(|b| crate::ops::counted(b, "from_pod")),
            Err(e) => {
                let kind = if e.is_connect() { "connect" } else { "other" };
                metrics::counter!(crate::ops::UPSTREAM_ERRORS, "kind" => kind).increment(1);
                if e.is_connect() {
                    self.mark_suspect(&pod.id);
                }
                tracing::warn!(pod = %pod.id, "relaying to the pod failed: {e}");
                unavailable(grpc, &format!("pod {} could not be reached; retry", pod.id))
            }
        }
    }
}

impl Router {
    /// The answer of one of the router's own endpoints at `path` ([`crate::ops`]).
    fn own(&self, path: &str) -> Option<Response<ProxyBody>> {
        let counts = || (self.placeable().len(), self.view().pods.len());
        match path {
            "/healthz" => Some(crate::ops::healthz(&self.meta_health)),
            "/readyz" => {
                let (placeable, known) = counts();
                Some(crate::ops::readyz(placeable, known))
            }
            "/metrics" => {
                let (placeable, known) = counts();
                Some(crate::ops::metrics(self.render_metrics, placeable, known))
            }
            _ => None,
        }
    }
}

impl crate::tcp_front::Places for Router {
    fn place_where(&self, eligible: &dyn Fn(&PodRecord) -> bool) -> Option<PodRecord> {
        Router::place_where(self, eligible)
    }

    fn place_keyed(&self, key: &[u8], eligible: &dyn Fn(&PodRecord) -> bool) -> Option<PodRecord> {
        Router::place_keyed(self, key, eligible)
    }

    fn mark_suspect(&self, id: &str) {
        Router::mark_suspect(self, id)
    }
}

impl crate::status_page::ClusterView for Router {
    fn pods(&self) -> Vec<PodRecord> {
        self.view().pods.clone()
    }

    fn placeable(&self) -> Vec<PodRecord> {
        Router::placeable(self)
    }

    fn http_client(&self) -> &Client<HttpConnector, ProxyBody> {
        &self.h1
    }

    fn status(&self) -> &crate::status_page::ClusterStatus {
        &self.status
    }
}

/// A call to an internal pod-to-pod service: never relayed (gRPC
/// UNIMPLEMENTED, or HTTP 404).
fn refused(grpc: bool) -> Response<ProxyBody> {
    let message = "internal pod-to-pod services are not served through the router";
    let mut resp = unavailable(grpc, message);
    if grpc {
        resp.headers_mut()
            .insert("grpc-status", HeaderValue::from_static("12"));
    } else {
        *resp.status_mut() = StatusCode::NOT_FOUND;
    }
    resp
}

/// A gRPC trailers-only UNAVAILABLE, or an HTTP 503 with a JSON error body.
fn unavailable(grpc: bool, message: &str) -> Response<ProxyBody> {
    let mut resp = if grpc {
        Response::new(Empty::new().map_err(|never| match never {}).boxed_unsync())
    } else {
        let body = serde_json::json!({
            "error_code": "TEMPORARILY_UNAVAILABLE",
            "message": message,
        });
        Response::new(
            Full::new(Bytes::from(body.to_string()))
                .map_err(|never| match never {})
                .boxed_unsync(),
        )
    };
    if grpc {
        let headers = resp.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert("grpc-status", HeaderValue::from_static("14"));
        if let Ok(v) = HeaderValue::from_str(message) {
            headers.insert("grpc-message", v);
        }
    } else {
        *resp.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        resp.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    resp
}

/// Keeps `router`'s view in step with the meta store until the task is dropped.
pub async fn follow_membership(router: Arc<Router>, meta: Meta) {
    let mut ticker = tokio::time::interval(REFRESH_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        match meta.pods().await {
            Ok(pods) => {
                router.update(pods);
                router.meta_health.record(Ok(()));
            }
            Err(e) => {
                tracing::warn!("reading pods from the meta store failed: {e}");
                router.meta_health.record(Err(e.to_string()));
            }
        }
    }
}

/// Serves the router on `listener` (and the TCP front doors `fronts`, each connection
/// placed and relayed by [`crate::tcp_front`]) until `shutdown` resolves.
pub async fn run(
    listener: TcpListener,
    fronts: Vec<crate::tcp_front::TcpFront>,
    meta: Meta,
    policy: Policy,
    render_metrics: RenderMetrics,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let router = Router::new(policy, render_metrics);
    router.update(meta.pods().await?);
    router.meta_health.record(Ok(()));
    let membership = tokio::spawn(follow_membership(router.clone(), meta));
    let sampler = tokio::spawn(crate::status_page::ClusterStatus::run_sampler(
        router.clone(),
    ));
    let front_doors: Vec<_> = fronts
        .into_iter()
        .map(|front| tokio::spawn(crate::tcp_front::serve(router.clone(), front)))
        .collect();
    let addr: Option<SocketAddr> = listener.local_addr().ok();
    tracing::info!(?addr, ?policy, "sluice router is serving");
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http2()
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONN_WINDOW)
        .max_frame_size(H2_MAX_FRAME)
        .max_concurrent_streams(1024);
    let builder = Arc::new(builder);
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, _) = match accepted {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let builder = builder.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let router = router.clone();
                async move { Ok::<_, Infallible>(router.handle(req).await) }
            });
            if let Err(e) = builder
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!("router connection ended: {e}");
            }
        });
    }
    membership.abort();
    sampler.abort();
    for front in front_doors {
        front.abort();
    }
    Ok(())
}

/// Binds `addr` for [`run`].
pub async fn bind(addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| RouterError::Io {
            context: format!("binding {addr}"),
            source,
        })
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    /// With no pod, a plain HTTP request gets 503 with a JSON error (never a gRPC status)
    /// and a gRPC call a trailers-only UNAVAILABLE.
    #[tokio::test]
    async fn no_pod_answers_http_with_a_json_503_and_grpc_with_unavailable() {
        let http = unavailable(false, "no pod");
        assert_eq!(http.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(http.headers().get("grpc-status"), None);
        let body = http.into_body().collect().await.expect("body").to_bytes();
        let json: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(json["error_code"], "TEMPORARILY_UNAVAILABLE");
        assert_eq!(json["message"], "no pod");
        let grpc = unavailable(true, "no pod");
        assert_eq!(grpc.status(), StatusCode::OK);
        assert_eq!(
            grpc.headers().get("grpc-status").map(|v| v.as_bytes()),
            Some(&b"14"[..])
        );
    }
}
