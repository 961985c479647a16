//! The MQTT port (`--mqtt-listen`): plain TCP, or TLS with the pod's certificate when
//! `--tls-cert`/`--tls-key` are given (`crate::side_tls`: no ALPN required, a plain-text
//! client closed without an answer). Each connection is a task
//! (`session::serve`); at shutdown the port stops accepting and [`serve`] returns once
//! every connection has answered what it took and closed.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_rustls::rustls::ServerConfig;
use tokio_util::task::TaskTracker;

use crate::pod::Pod;

use super::session::{self, Shared};

/// Serves MQTT on `listener` until the pod shuts down and every connection has closed.
pub async fn serve(listener: TcpListener, pod: Arc<Pod>, tls: Option<Arc<ServerConfig>>) {
    let acceptor = crate::side_tls::acceptor(tls);
    let rest = Arc::new(crate::rest::RestIngest::new(pod.idempotency.clone()));
    let shared = Arc::new(Shared {
        coalescer: Arc::new(super::coalesce::Coalescer::new(pod.clone(), rest.clone())),
        rest,
        max_packet_size: u32::try_from(pod.config.max_message_bytes).unwrap_or(u32::MAX),
        pod: pod.clone(),
        sessions: super::sessions::Sessions::restored(&pod.qos2, pod.config.mqtt_max_sessions),
    });
    let connections = TaskTracker::new();
    loop {
        let (stream, peer) = tokio::select! {
            _ = pod.shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("MQTT accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let acceptor = acceptor.clone();
        let counted = pod.load.open_connection();
        connections.spawn(async move {
            let _counted = counted;
            match acceptor {
                None => session::serve(stream, shared).await,
                Some(acceptor) => match crate::side_tls::accept(&acceptor, stream).await {
                    Ok(tls) => session::serve(tls, shared).await,
                    Err(e) => tracing::debug!(%peer, "MQTT connection closed: {e}"),
                },
            }
        });
    }
    connections.close();
    connections.wait().await;
}
