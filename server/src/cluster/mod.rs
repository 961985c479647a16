//! A pod's part in a cluster (`sluice serve --join etcd://…`): its registration and load
//! reports in the meta store, the drain sequence, and the per-table committer roles
//! (`election`: the etcd election; `roles`: the roles held and the route of hand-offs;
//! `committer_grpc` / `handoff_wire` / `peer_client`: the internal
//! `sluice.cluster.v1.Committer` service; `peer_auth`: pod-to-pod tokens), and the
//! internal `sluice.cluster.v1.PersistentStreams` service (`pstreams_grpc`, served;
//! `pstreams_peers`, called), and the cluster's REST idempotency keys (`idem_claims`).
//!
//! Drain (on `sluice pod drain POD` or SIGTERM):
//! 1. publish `draining` (routers stop placing new streams here within one refresh);
//! 2. wait [`ROUTER_CATCH_UP`] so routers have seen it before producers reconnect;
//! 3. every stream gets `CloseStreamSignal{grace}` and keeps being read and acked: the SDK
//!    stops sending, collects its acks and reconnects through the router to another pod;
//!    MQTT connections answer what they have under way, then get DISCONNECT 0x9C Use
//!    another server (3.1.1: closed); Kafka connections are closed the same way;
//! 4. when no producer stream and no MQTT/Kafka connection is left (the pod's own REST
//!    streams, which MQTT, Kafka and REST inserts write through, are not waited for), or
//!    the grace ran out (plus a margin), the pod stops: streams
//!    still open get their final acks and UNAVAILABLE, memtables are committed, and the WAL,
//!    now wholly in Delta, is deleted: the pod exits with an empty WAL. Before that the pod
//!    releases every persistent stream it owns (`ingest::handover::release_all`).

pub mod committer_grpc;
pub mod election;
pub mod handoff_wire;
pub mod idem_claims;
pub mod load;
pub mod peer_auth;
pub mod peer_client;
pub mod pstreams_grpc;
pub mod pstreams_peers;
pub mod roles;

use std::time::Duration;

use std::net::SocketAddr;

use sluice_router::registration::Registration;
use sluice_router::{Meta, PodAddrs};
use tokio_util::sync::CancellationToken;

use crate::config::ClusterConfig;
use crate::error::{Result, ServerError};
use crate::journal::streams::StreamRegistry;
use load::LoadReporter;

/// How long a draining pod waits before closing streams, so that routers (which reload
/// membership every 250 ms) no longer place reconnecting streams on it.
pub const ROUTER_CATCH_UP: Duration = Duration::from_millis(750);
/// Extra time after the drain grace for streams to finish their last acks.
const GRACE_MARGIN: Duration = Duration::from_secs(2);

/// The TCP front doors a pod serves (bound addresses), published in its record so that
/// routers relay MQTT and Kafka connections to them.
#[derive(Clone, Copy, Debug, Default)]
pub struct FrontDoors {
    /// `--mqtt-listen`, as bound.
    pub mqtt: Option<SocketAddr>,
    /// `--kafka-listen`, as bound.
    pub kafka: Option<SocketAddr>,
}

/// The `HOST:PORT` routers dial for a listener bound at `bound`: its IP, or, when it is
/// bound to every interface, the host of the pod's advertised URL (`--advertise`).
pub fn front_door_addr(advertise_url: &str, bound: SocketAddr) -> String {
    if !bound.ip().is_unspecified() {
        return bound.to_string();
    }
    let host = advertise_url
        .split_once("://")
        .map_or(advertise_url, |(_, rest)| rest)
        .split('/')
        .next()
        .unwrap_or_default();
    let host = match host.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => host,
    };
    format!("{host}:{}", bound.port())
}

/// A pod's membership in the cluster.
pub struct Membership {
    meta: Meta,
    registration: Registration,
    id: String,
}

fn meta_error(e: sluice_router::RouterError) -> ServerError {
    ServerError::Unavailable(format!("meta store: {e}"))
}

impl Membership {
    /// Registers the pod of `config` (with the MQTT and Kafka listeners it serves, bound at
    /// `fronts`) and starts publishing `reporter`'s load reports.
    pub async fn join(
        config: &ClusterConfig,
        fronts: FrontDoors,
        reporter: LoadReporter,
    ) -> Result<Membership> {
        let meta = Meta::connect(&config.join, &config.etcd.options()?)
            .await
            .map_err(meta_error)?;
        let registration = Registration::start(
            meta.clone(),
            config.pod_id.clone(),
            PodAddrs {
                url: config.advertise.clone(),
                mqtt: fronts.mqtt.map(|a| front_door_addr(&config.advertise, a)),
                kafka: fronts.kafka.map(|a| front_door_addr(&config.advertise, a)),
            },
            move || reporter.report(),
        )
        .await
        .map_err(meta_error)?;
        Ok(Membership {
            meta,
            registration,
            id: config.pod_id.clone(),
        })
    }

    /// The meta store connection (parked audit events live there too).
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// Resolves when someone asks this pod to drain (`sluice pod drain`), with who asked.
    /// If the meta store cannot be watched, retries; it never resolves on an error alone.
    pub async fn drain_requested(&self) -> String {
        loop {
            match self.meta.drain_requested(&self.id).await {
                Ok(by) => return by,
                Err(e) => {
                    tracing::warn!("watching for a drain request failed: {e}; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// Steps 1–3 of the drain (step 3: cancel `draining`, which every stream and MQTT/Kafka
    /// connection watches), then waits until `streams` has no producer stream left and
    /// `connections` no MQTT/Kafka connection, or `grace` (plus a margin) is over.
    pub async fn drain(
        &self,
        streams: &StreamRegistry,
        connections: &load::LoadCounters,
        draining: &CancellationToken,
        grace: Duration,
    ) {
        tracing::info!(pod = %self.id, "draining: no new streams; asking producers to move");
        if let Err(e) = self.registration.set_draining().await {
            tracing::warn!("publishing the draining state failed: {e}");
        }
        tokio::time::sleep(ROUTER_CATCH_UP).await;
        let started = tokio::time::Instant::now();
        draining.cancel();
        let deadline = started + grace + GRACE_MARGIN;
        let left = || load::placed_streams(streams, connections);
        while left() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tracing::info!(
            pod = %self.id,
            left = left(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "streams moved away"
        );
    }

    /// Removes the pod's record at once (revokes its lease).
    pub async fn leave(&self) {
        if let Err(e) = self.registration.deregister().await {
            tracing::warn!("leaving the meta store failed (the lease will expire): {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_front_door_on_every_interface_is_reached_at_the_advertised_host() {
        let any: SocketAddr = "0.0.0.0:1883".parse().expect("addr");
        let local: SocketAddr = "127.0.0.1:9092".parse().expect("addr");
        let v6: SocketAddr = "[::]:1883".parse().expect("addr");
        assert_eq!(
            front_door_addr("http://pod-0.sluice:50051", any),
            "pod-0.sluice:1883"
        );
        assert_eq!(
            front_door_addr("http://pod-0.sluice:50051", v6),
            "pod-0.sluice:1883"
        );
        assert_eq!(front_door_addr("https://h/x", any), "h:1883");
        assert_eq!(
            front_door_addr("http://[fd00::1]:50051", any),
            "[fd00::1]:1883"
        );
        assert_eq!(front_door_addr("http://h:1", local), "127.0.0.1:9092");
    }
}
