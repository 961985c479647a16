//! Serving: one listener, gRPC and HTTP on the same port (HTTP/2 cleartext for
//! gRPC, HTTP/1.1 or 2 for the rest), and the graceful shutdown sequence.

use std::future::Future;
use std::sync::Arc;

use sluice_proto::zerobus_server::ZerobusServer;
use tokio::net::TcpListener;

use crate::config::ServeConfig;
use crate::error::{Result, ServerError};
use crate::ingest::IngestService;
use crate::pod::Pod;

/// Starts a pod on `listener` and serves until `shutdown` resolves; then
/// stops accepting, lets streams ack what is durable, commits every
/// memtable and closes the WAL.
pub async fn run(
    config: ServeConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    crate::metrics_export::install();
    let pod = Pod::start(config).await?;
    let addr = listener
        .local_addr()
        .map_err(|e| ServerError::io("reading the listen address", e))?;
    let grpc = ZerobusServer::new(IngestService::new(pod.clone()))
        .max_decoding_message_size(pod.config.max_message_bytes)
        .max_encoding_message_size(pod.config.max_message_bytes);
    let app = tonic::service::Routes::new(grpc)
        .into_axum_router()
        .merge(crate::http::router(pod.clone()));
    tracing::info!(%addr, warehouse = %pod.warehouse.root(), "sluice is serving gRPC and HTTP");
    let stopping = pod.clone();
    let graceful = async move {
        shutdown.await;
        tracing::info!("shutting down: no new streams; acking and committing what is in flight");
        stopping.shutdown.cancel();
    };
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(graceful)
        .await
        .map_err(|e| ServerError::io("serving", e));
    let stopped = pod.stop().await;
    served?;
    stopped
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// Keeps the pod alive for callers that hold it (tests).
pub type SharedPod = Arc<Pod>;
