//! The router's status page (`GET /`): the whole cluster on one page. Every
//! [`SAMPLE_EVERY`] the router reads each pod of its view's `/metrics` (the pods' public
//! endpoint) into a [`ClusterSnapshot`] kept for 15 minutes; the page reads them once more
//! and renders with [`sluice_status::page`]. Each pod's state comes from its meta store
//! record (`ready`, `draining`, or `stale` when its report is old); a pod that does not
//! answer within [`FETCH_TIMEOUT`] is shown with the reason.
//!
//! The router holds no credentials of its own, so a pod decides who may see the page: the
//! caller's `Authorization` and `Cookie` headers go to a ready pod's `GET /status/access`,
//! and anything but 204 gets the login form with that pod's status (401 without a token,
//! 403 for a non-admin). The form posts to `/status/login`, which the router relays to a pod
//! like any request; the cookie the pod sets then comes back to the router.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::header::{HeaderValue, AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, COOKIE};
use hyper::{HeaderMap, Request, Response, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use sluice_status::history::SAMPLE_EVERY;
use sluice_status::page::PageInput;
use sluice_status::prom::Samples;
use sluice_status::snapshot::PodView;
use sluice_status::{ClusterSnapshot, History, PodSnapshot};

use crate::ops::ProxyBody;
use crate::pod_record::{now_ms, PodRecord, PodState, STALE_AFTER_MS};

/// A pod's `/metrics` or access answer not back within this is given up.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(2);
/// The pods' endpoint that says whether a caller may see the page.
pub const ACCESS_PATH: &str = "/status/access";

/// The cluster's last 15 minutes.
#[derive(Default)]
pub struct ClusterStatus {
    history: Mutex<History>,
}

/// The HTTP client the page reads pods with.
pub type HttpClient = Client<HttpConnector, ProxyBody>;

/// What the page needs of the router (the proxy implements it).
pub trait ClusterView: Send + Sync {
    /// Every pod of the view.
    fn pods(&self) -> Vec<PodRecord>;
    /// The pods now placeable.
    fn placeable(&self) -> Vec<PodRecord>;
    /// The client plain requests go to pods with.
    fn http_client(&self) -> &HttpClient;
    /// The page's history.
    fn status(&self) -> &ClusterStatus;
}

/// `GET` `path` of the pod at `addr` with `headers`: its status and body.
async fn get(
    client: &HttpClient,
    addr: &str,
    path: &str,
    headers: &HeaderMap,
) -> Result<(StatusCode, Bytes), String> {
    let uri = format!("{}{path}", addr.trim_end_matches('/'));
    let mut req = Request::get(uri)
        .body(Empty::new().map_err(|never| match never {}).boxed_unsync())
        .map_err(|e| e.to_string())?;
    for name in [AUTHORIZATION, COOKIE] {
        for v in headers.get_all(&name) {
            req.headers_mut().append(name.clone(), v.clone());
        }
    }
    let answer = async {
        let resp = client.request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, body))
    };
    tokio::time::timeout(FETCH_TIMEOUT, answer)
        .await
        .map_err(|_| format!("no answer within {FETCH_TIMEOUT:?}"))?
}

/// The state the page shows for `record` at `now`.
fn state(record: &PodRecord, now: i64) -> &'static str {
    if now - record.reported_at_ms > STALE_AFTER_MS {
        "stale"
    } else {
        match record.state {
            PodState::Ready => "ready",
            PodState::Draining => "draining",
        }
    }
}

/// What one pod's `/metrics` answer says, or why it could not be read.
pub fn view(record: &PodRecord, now: i64, answer: Result<(StatusCode, Bytes), String>) -> PodView {
    let state = state(record, now).to_string();
    let unreachable = |reason: String| PodView::Unreachable {
        id: record.id.clone(),
        state: state.clone(),
        reason,
    };
    match answer {
        Ok((StatusCode::OK, body)) => match Samples::parse(&String::from_utf8_lossy(&body)) {
            Ok(samples) => {
                let mut pod = PodSnapshot::from_samples(&record.id, &samples);
                pod.state = state;
                PodView::Seen(pod)
            }
            Err(e) => unreachable(e.to_string()),
        },
        Ok((status, _)) => unreachable(format!("/metrics answered {status}")),
        Err(e) => unreachable(e),
    }
}

impl ClusterStatus {
    /// Every pod of `router`'s view read now.
    pub async fn snapshot(router: &impl ClusterView) -> ClusterSnapshot {
        let pods = router.pods();
        let client = router.http_client();
        let none = HeaderMap::new();
        let answers =
            futures::future::join_all(pods.iter().map(|p| get(client, &p.addr, "/metrics", &none)))
                .await;
        let now = now_ms();
        ClusterSnapshot {
            pods: pods
                .iter()
                .zip(answers)
                .map(|(p, a)| view(p, now, a))
                .collect(),
        }
    }

    /// Samples the cluster every [`SAMPLE_EVERY`] until the task is dropped.
    pub async fn run_sampler(router: Arc<impl ClusterView>) {
        let mut ticker = tokio::time::interval(SAMPLE_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let snapshot = Self::snapshot(&*router).await;
            router.status().history().push(now_secs(), snapshot);
        }
    }

    fn history(&self) -> std::sync::MutexGuard<'_, History> {
        self.history.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `GET /` on the router: the cluster's page for a caller a pod lets through.
    pub async fn page(router: &impl ClusterView, headers: &HeaderMap) -> Response<ProxyBody> {
        let Some(pod) = router.placeable().into_iter().next() else {
            return html(
                StatusCode::SERVICE_UNAVAILABLE,
                sluice_status::page::login("no pod is ready to check your access; retry"),
            );
        };
        match get(router.http_client(), &pod.addr, ACCESS_PATH, headers).await {
            Ok((StatusCode::NO_CONTENT, _)) => {}
            Ok((status, body)) => {
                let message = serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|v| v["message"].as_str().map(str::to_string))
                    .unwrap_or_else(|| format!("pod {} answered {status}", pod.id));
                return html(status, sluice_status::page::login(&message));
            }
            Err(e) => {
                return html(
                    StatusCode::SERVICE_UNAVAILABLE,
                    sluice_status::page::login(&format!(
                        "pod {} could not check your access: {e}",
                        pod.id
                    )),
                )
            }
        }
        let current = Self::snapshot(router).await;
        let history = router.status().history();
        let body = sluice_status::page::render(&PageInput {
            scope: format!("cluster ({} pods)", current.pods.len()),
            current: &current,
            history: &history,
            now: now_secs(),
        });
        html(StatusCode::OK, body)
    }
}

fn now_secs() -> f64 {
    now_ms() as f64 / 1000.0
}

fn html(status: StatusCode, body: String) -> Response<ProxyBody> {
    let mut resp = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_record::Load;

    fn record(state: PodState, reported_at_ms: i64) -> PodRecord {
        PodRecord {
            id: "p1".into(),
            addr: "http://127.0.0.1:1".into(),
            state,
            load: Load::default(),
            reported_at_ms,
            mqtt_addr: None,
            kafka_addr: None,
        }
    }

    #[test]
    fn a_pods_view_takes_its_state_from_the_meta_store() {
        let ok = Ok((
            StatusCode::OK,
            Bytes::from("sluice_ready 1\nsluice_streams_open 3\n"),
        ));
        match view(&record(PodState::Draining, 1000), 1500, ok.clone()) {
            PodView::Seen(p) => {
                assert_eq!(
                    (p.id.as_str(), p.state.as_str(), p.streams_open),
                    ("p1", "draining", 3.0)
                )
            }
            other => panic!("{other:?}"),
        }
        match view(
            &record(PodState::Ready, 1000),
            1000 + STALE_AFTER_MS + 1,
            ok,
        ) {
            PodView::Seen(p) => assert_eq!(p.state, "stale"),
            other => panic!("{other:?}"),
        }
        let bad = view(
            &record(PodState::Ready, 0),
            0,
            Ok((StatusCode::OK, Bytes::from("x{"))),
        );
        assert!(
            matches!(bad, PodView::Unreachable { ref reason, .. } if reason.contains("line 1")),
            "{bad:?}"
        );
        let down = view(
            &record(PodState::Ready, 0),
            0,
            Err("connection refused".into()),
        );
        assert_eq!(
            down,
            PodView::Unreachable {
                id: "p1".into(),
                state: "ready".into(),
                reason: "connection refused".into()
            }
        );
        let status = view(
            &record(PodState::Ready, 0),
            0,
            Ok((StatusCode::NOT_FOUND, Bytes::new())),
        );
        assert!(
            matches!(status, PodView::Unreachable { ref reason, .. } if reason.contains("404"))
        );
    }
}
