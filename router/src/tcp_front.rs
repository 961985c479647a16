//! The router's TCP front doors (`sluice router --mqtt-listen`, `--kafka-listen`): MQTT and
//! Kafka clients connect to the router, and each TCP connection is placed like a stream —
//! the router's placement over the ready, non-draining pods that publish a listener of
//! that protocol in their record — then relayed byte for byte both ways to that pod's
//! listener until either side closes. Nothing is decoded on the way, except that with no
//! pod placeable:
//!
//! - MQTT: the router reads the client's CONNECT far enough to learn its protocol level
//!   ([`crate::mqtt_peek`], at most [`PEEK_LIMIT`] bytes within [`PEEK_TIMEOUT`]) and answers
//!   CONNACK "Server unavailable" (MQTT 5: reason code 0x88; 3.1/3.1.1: return code 3),
//!   then closes; anything that is not a CONNECT is closed without an answer;
//! - Kafka: the connection is closed (the protocol has no greeting to refuse with; clients
//!   reconnect with their backoff).
//!
//! A pod that refuses the connection is marked suspect (as for streams) and another is
//! tried, up to [`CONNECT_ATTEMPTS`] pods. Counted in `/metrics`: connections relayed per
//! protocol ([`TCP_CONNECTIONS`]; the pod also counts in the placements), refused for want
//! of a pod ([`TCP_NO_POD`]), and bytes relayed per protocol and direction
//! ([`TCP_RELAYED_BYTES`], added when the connection ends).

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::mqtt_peek::{connect_level, server_unavailable, Peek};
use crate::pod_record::PodRecord;

/// TCP connections relayed to a pod (label `protocol`: `mqtt`, `kafka`).
pub const TCP_CONNECTIONS: &str = "sluice_router_tcp_connections_total";
/// TCP connections answered or closed because no pod was placeable (label `protocol`).
pub const TCP_NO_POD: &str = "sluice_router_tcp_no_pod_total";
/// Bytes relayed over TCP front doors (labels `protocol`, `direction`: `to_pod`, `from_pod`).
pub const TCP_RELAYED_BYTES: &str = "sluice_router_tcp_relayed_bytes_total";

/// How long the router waits for a pod to accept a relayed connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Pods tried for one connection before it is treated as "no pod".
pub const CONNECT_ATTEMPTS: usize = 3;
/// How long a refused MQTT client gets to send its CONNECT's first bytes.
pub const PEEK_TIMEOUT: Duration = Duration::from_secs(5);
/// How much of a CONNECT the router reads at most to learn its protocol level.
pub const PEEK_LIMIT: usize = 32;

/// What a front door needs of the router (`proxy::Router` implements it).
pub trait Places: Send + Sync + 'static {
    /// Places one connection on a placeable pod that `eligible` accepts (counted as a
    /// placement); None when there is none.
    fn place_where(&self, eligible: &dyn Fn(&PodRecord) -> bool) -> Option<PodRecord>;
    /// Skips pod `id` for a while (it refused a connection).
    fn mark_suspect(&self, id: &str);
}

/// A protocol the router relays over plain TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// MQTT 3.1, 3.1.1 and 5.
    Mqtt,
    /// The Kafka producer protocol.
    Kafka,
}

impl Protocol {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Protocol::Mqtt => "mqtt",
            Protocol::Kafka => "kafka",
        }
    }

    /// The pod's listener of this protocol, if it has one.
    pub fn addr(self, pod: &PodRecord) -> Option<&str> {
        match self {
            Protocol::Mqtt => pod.mqtt_addr.as_deref(),
            Protocol::Kafka => pod.kafka_addr.as_deref(),
        }
    }
}

/// A bound front door.
pub struct TcpFront {
    /// The listener clients connect to.
    pub listener: TcpListener,
    /// What they speak.
    pub protocol: Protocol,
}

/// Accepts connections on `front` and relays each to a placed pod, until the task is
/// dropped.
pub async fn serve<R: Places>(router: Arc<R>, front: TcpFront) {
    let protocol = front.protocol;
    tracing::info!(addr = ?front.listener.local_addr().ok(), protocol = protocol.label(), "router front door is serving");
    loop {
        match front.listener.accept().await {
            Ok((client, _)) => {
                let _ = client.set_nodelay(true);
                tokio::spawn(relay(router.clone(), protocol, client));
            }
            Err(e) => {
                tracing::warn!(protocol = protocol.label(), "accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// One client connection: placed, connected, relayed; or refused when no pod takes it.
async fn relay<R: Places>(router: Arc<R>, protocol: Protocol, mut client: TcpStream) {
    let Some((pod, mut upstream)) = connect_placed(&*router, protocol).await else {
        metrics::counter!(TCP_NO_POD, "protocol" => protocol.label()).increment(1);
        refuse(protocol, &mut client).await;
        return;
    };
    metrics::counter!(TCP_CONNECTIONS, "protocol" => protocol.label()).increment(1);
    let _ = upstream.set_nodelay(true);
    let (to_pod, from_pod) = match tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
        Ok(counts) => counts,
        Err(e) => {
            tracing::debug!(pod = %pod.id, protocol = protocol.label(), "relayed connection ended: {e}");
            (0, 0)
        }
    };
    for (direction, bytes) in [("to_pod", to_pod), ("from_pod", from_pod)] {
        metrics::counter!(TCP_RELAYED_BYTES, "protocol" => protocol.label(), "direction" => direction)
            .increment(bytes);
    }
}

/// Places the connection and connects to the pod's listener; a pod that does not accept
/// is marked suspect and another is tried. None: no pod took it.
async fn connect_placed<R: Places>(
    router: &R,
    protocol: Protocol,
) -> Option<(PodRecord, TcpStream)> {
    for _ in 0..CONNECT_ATTEMPTS {
        let pod = router.place_where(&|p| protocol.addr(p).is_some())?;
        let addr = protocol.addr(&pod)?.to_string();
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&addr)).await {
            Ok(Ok(stream)) => return Some((pod, stream)),
            Ok(Err(e)) => {
                tracing::warn!(pod = %pod.id, %addr, "connecting to the pod's {} listener failed: {e}", protocol.label())
            }
            Err(_) => {
                tracing::warn!(pod = %pod.id, %addr, "connecting to the pod's {} listener timed out", protocol.label())
            }
        }
        metrics::counter!(crate::ops::UPSTREAM_ERRORS, "kind" => "connect").increment(1);
        router.mark_suspect(&pod.id);
    }
    None
}

/// The documented answer when no pod is placeable (module doc).
async fn refuse(protocol: Protocol, client: &mut TcpStream) {
    if protocol == Protocol::Mqtt {
        let mut head = Vec::with_capacity(PEEK_LIMIT);
        let peeked = tokio::time::timeout(PEEK_TIMEOUT, async {
            let mut buf = [0u8; PEEK_LIMIT];
            loop {
                match connect_level(&head) {
                    Peek::More if head.len() < PEEK_LIMIT => {}
                    other => return other,
                }
                let room = PEEK_LIMIT - head.len();
                match client.read(&mut buf[..room]).await {
                    Ok(0) | Err(_) => return Peek::NotConnect,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
        })
        .await;
        if let Ok(Peek::Level(level)) = peeked {
            let _ = client.write_all(server_unavailable(level)).await;
        }
    }
    let _ = client.shutdown().await;
}
