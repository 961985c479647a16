//! The Kafka producer protocol front door (`sluice serve --kafka-listen HOST:PORT`):
//! Kafka clients produce into tables (topic = `catalog.schema.table`, one partition), with
//! the same tokens, grants, WAL, ack rule and Delta sink as streams. Wire types come from
//! the `kafka-protocol` crate; the broker behaviour is here:
//!
//! - [`decode`]: request frames and record batches (bounded decompression; fuzzed),
//!   [`bounds`]: sizes checked before the crate allocates.
//! - [`versions`]: the APIs served (ApiVersions, Metadata, SaslHandshake,
//!   SaslAuthenticate, InitProducerId, Produce) and their versions.
//! - [`sasl`]: PLAIN (client id / secret) and OAUTHBEARER (a Sluice token).
//! - [`metadata`]: this pod as the only broker, every table a topic.
//! - [`produce`]: one partition's batch into its table (REST insert's path).
//! - [`producers`]: idempotent producers on the persistent-stream watermark;
//!   [`producer_stream`]: that stream moved between pods like a resumed persistent stream.
//! - [`connection`]: one client connection (plain or TLS), answers in request order.

pub mod bounds;
pub mod connection;
pub mod decode;
pub mod metadata;
pub mod produce;
pub mod producer_stream;
pub mod producers;
pub mod sasl;
pub mod versions;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_rustls::rustls::ServerConfig;

pub use crate::config::KafkaConfig;
use crate::error::{Result, ServerError};
use crate::pod::Pod;

pub use produce::KafkaIngest;

/// The (host, port) Metadata names, for a listener of `config` bound at `bound`.
pub fn advertised(config: &KafkaConfig, bound: SocketAddr) -> Result<(String, u16)> {
    if let Some(text) = &config.advertise {
        let (host, port) = text.rsplit_once(':').ok_or_else(|| {
            ServerError::Config(format!("--kafka-advertise `{text}` must be HOST:PORT"))
        })?;
        let port = port
            .parse::<u16>()
            .map_err(|_| ServerError::Config(format!("--kafka-advertise `{text}`: bad port")))?;
        return Ok((host.trim_matches(['[', ']']).to_string(), port));
    }
    let host = if bound.ip().is_unspecified() {
        std::env::var("HOSTNAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".into())
    } else {
        bound.ip().to_string()
    };
    Ok((host, bound.port()))
}

/// Binds the Kafka listener (before the pod serves, so a bad address fails the start).
pub async fn bind(config: &KafkaConfig) -> Result<TcpListener> {
    TcpListener::bind(config.listen)
        .await
        .map_err(|e| ServerError::io(format!("binding --kafka-listen {}", config.listen), e))
}

/// Accepts Kafka connections on `listener` until the pod shuts down: plain text, or TLS
/// with the pod's certificate when `tls` is given (`--tls-cert`, as the MQTT port;
/// clients use `SASL_SSL`, a plain-text client is closed without an answer).
pub async fn serve(
    pod: Arc<Pod>,
    config: KafkaConfig,
    listener: TcpListener,
    tls: Option<Arc<ServerConfig>>,
) -> Result<()> {
    let bound = listener
        .local_addr()
        .map_err(|e| ServerError::io("reading the Kafka listen address", e))?;
    let advertise = advertised(&config, bound)?;
    tracing::info!(%bound, host = %advertise.0, port = advertise.1, tls = tls.is_some(), "sluice is serving Kafka producers");
    let acceptor = crate::side_tls::acceptor(tls);
    let shared = Arc::new(connection::Shared {
        pod: pod.clone(),
        kafka: Arc::new(KafkaIngest::default()),
        advertise,
    });
    let shutdown = pod.shutdown.clone();
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                let shared = shared.clone();
                let acceptor = acceptor.clone();
                let counted = pod.load.open_connection();
                pod.stream_tasks.spawn(async move {
                    let _counted = counted;
                    match acceptor {
                        None => connection::serve(shared, stream, peer).await,
                        Some(acceptor) => match crate::side_tls::accept(&acceptor, stream).await {
                            Ok(tls) => connection::serve(shared, tls, peer).await,
                            Err(e) => tracing::info!(%peer, "Kafka connection closed: {e}"),
                        },
                    }
                });
            }
            Err(e) => {
                tracing::warn!("accepting a Kafka connection: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}
