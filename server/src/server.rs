//! Serving: one listener, gRPC and HTTP on the same port (HTTP/2 for gRPC,
//! HTTP/1.1 or 2 for the rest; plain text, or TLS with `--tls-cert`), and the
//! graceful shutdown sequence. The accept loop itself is `listener`.

use std::future::Future;
use std::sync::Arc;

use arrow_flight::flight_service_server::FlightServiceServer;
use sluice_proto::zerobus_server::ZerobusServer;
use tokio::net::TcpListener;

use crate::audit::{Action, AuditEvent};
use crate::cluster::committer_grpc::CommitterService;
use crate::cluster::load::LoadReporter;
use crate::cluster::pstreams_grpc::PersistentStreamsService;
use crate::cluster::Membership;
use crate::config::ServeConfig;
use crate::error::{Result, ServerError};
use crate::flight::FlightIngest;
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
    let tls = config
        .tls
        .as_ref()
        .map(crate::listener::load_tls)
        .transpose()?;
    let options = crate::listener::ServeOptions::new(&config, tls);
    let mqtt_listener = match config.mqtt_listen {
        Some(addr) => Some(
            TcpListener::bind(addr)
                .await
                .map_err(|e| ServerError::io(format!("binding --mqtt-listen {addr}"), e))?,
        ),
        None => None,
    };
    let kafka = match &config.kafka {
        Some(k) => Some((k.clone(), crate::kafka::bind(k).await?)),
        None => None,
    };
    let fronts = crate::cluster::FrontDoors {
        mqtt: mqtt_listener.as_ref().and_then(|l| l.local_addr().ok()),
        kafka: kafka.as_ref().and_then(|(_, l)| l.local_addr().ok()),
    };
    let pod = Pod::start(config).await?;
    let mqtt = mqtt_listener.map(|listener| {
        tracing::info!(addr = ?listener.local_addr().ok(), tls = options.tls.is_some(), "sluice is serving MQTT");
        tokio::spawn(crate::mqtt::serve(listener, pod.clone(), options.tls.clone()))
    });
    if let Some((k, listener)) = kafka {
        let pod = pod.clone();
        let tls = options.tls.clone();
        tokio::spawn(async move {
            if let Err(e) = crate::kafka::serve(pod, k, listener, tls).await {
                tracing::error!("the Kafka listener stopped: {e}");
            }
        });
    }
    let addr = listener
        .local_addr()
        .map_err(|e| ServerError::io("reading the listen address", e))?;
    let ingest = Arc::new(IngestService::new(pod.clone()));
    let grpc = ZerobusServer::from_arc(ingest.clone())
        .max_decoding_message_size(pod.config.max_message_bytes)
        .max_encoding_message_size(pod.config.max_message_bytes);
    let flight = FlightServiceServer::new(FlightIngest::new(ingest))
        .max_decoding_message_size(pod.config.max_message_bytes)
        .max_encoding_message_size(pod.config.max_message_bytes);
    let otlp = Arc::new(crate::otlp::OtlpIngest::default());
    let (traces, logs, metrics) =
        crate::otlp::grpc::OtlpGrpc::new(pod.clone(), otlp.clone()).servers();
    let mut routes = tonic::service::Routes::new(grpc)
        .add_service(flight)
        .add_service(traces)
        .add_service(logs)
        .add_service(metrics);
    if let Some(roles) = &pod.roles {
        routes = routes.add_service(CommitterService::new(roles.clone(), pod.auth.clone()));
    }
    if pod.config.cluster.is_some() {
        routes = routes.add_service(PersistentStreamsService::new(pod.clone()));
    }
    let status = crate::status::StatusService::new(pod.clone());
    tokio::spawn(status.clone().run_sampler());
    let app = crate::http::front_door::front_door(
        routes.into_axum_router(),
        crate::http::router(pod.clone(), otlp, status),
    );
    let tls = options.tls.is_some();
    tracing::info!(%addr, tls, warehouse = %pod.warehouse.root(), "sluice is serving gRPC and HTTP");
    let membership = match &pod.config.cluster {
        Some(cluster) => {
            let reporter = LoadReporter::new(pod.load_source());
            Some(Arc::new(Membership::join(cluster, fronts, reporter).await?))
        }
        None => None,
    };
    if let Err(e) =
        crate::audit::pending::deliver(&pod, membership.as_deref().map(Membership::meta)).await
    {
        tracing::warn!("appending parked audit events failed (they stay parked): {e}");
    }
    let stopping = pod.clone();
    let member = membership.clone();
    let graceful = async move {
        match member {
            Some(m) => {
                tokio::select! {
                    _ = shutdown => {}
                    by = m.drain_requested() => {
                        tracing::info!("drain requested");
                        let who = if by.is_empty() { "unknown".to_string() } else { by };
                        let event = AuditEvent::now(
                            who,
                            Action::PodDrain,
                            stopping.pod_id(),
                            stopping.pod_id(),
                            String::new(),
                        );
                        crate::audit::record_event(&stopping, &event).await;
                    }
                }
                m.drain(
                    &stopping.streams,
                    &stopping.load,
                    &stopping.draining,
                    stopping.drain_grace(),
                )
                .await;
                // Before the pod exits: resumes elsewhere proceed at once, not fenced.
                crate::ingest::handover::release_all(&stopping).await;
            }
            None => shutdown.await,
        }
        tracing::info!("shutting down: no new streams; acking and committing what is in flight");
        stopping.shutdown.cancel();
    };
    let served = crate::listener::serve(listener, app, options, graceful).await;
    if let Some(mqtt) = mqtt {
        // The MQTT connections answer what they took before the memtables are committed
        // (cancelled here too in case the HTTP port failed before its graceful stop).
        pod.shutdown.cancel();
        let _ = mqtt.await;
    }
    let stopped = pod.stop(membership.is_some()).await;
    if let Some(m) = &membership {
        m.leave().await;
    }
    served?;
    stopped
}

/// A future that resolves on SIGINT or SIGTERM. The handlers are installed
/// when this is called (not when the future is first polled), so a signal
/// that arrives during start-up still leads to a graceful stop.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    let int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt());
    async move {
        match (term, int) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
}

/// Keeps the pod alive for callers that hold it (tests).
pub type SharedPod = Arc<Pod>;
