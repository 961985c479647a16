//! The router's TCP front doors (`sluice router --mqtt-listen`, `--kafka-listen`): MQTT and
//! Kafka clients connect to the router, and each TCP connection is placed like a stream —
//! the router's placement over the ready, non-draining pods that publish a listener of
//! that protocol in their record — then relayed byte for byte both ways to that pod's
//! listener until either side closes. Nothing is decoded on the way, except the start of an
//! MQTT connection:
//!
//! - MQTT: the router reads the client's CONNECT far enough to learn its protocol level and
//!   client id ([`crate::mqtt_peek`], at most [`PEEK_LIMIT`] bytes within [`PEEK_TIMEOUT`]);
//!   a non-empty client id places the connection by rendezvous hashing
//!   ([`crate::placement::rendezvous`]: the same pod while it is placeable, so the device's
//!   session is there), anything else (an empty id, an id past the limit, TLS bytes) is
//!   placed like a stream; the bytes read are sent to the pod first. With no pod placeable
//!   a CONNECT is answered CONNACK "Server unavailable" (MQTT 5: reason code 0x88; 3.1/3.1.1:
//!   return code 3), then closed; anything that is not a CONNECT is closed without an answer;
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

use crate::mqtt_peek::{connect_client_id, connect_level, server_unavailable, ClientId, Peek};
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
/// How much of a CONNECT the router reads at most to learn its protocol level and client id.
pub const PEEK_LIMIT: usize = 1024;

/// What a front door needs of the router (`proxy::Router` implements it).
pub trait Places: Send + Sync + 'static {
    /// Places one connection on a placeable pod that `eligible` accepts (counted as a
    /// placement); None when there is none.
    fn place_where(&self, eligible: &dyn Fn(&PodRecord) -> bool) -> Option<PodRecord>;
    /// Places one connection with `key` on the placeable pod `eligible` accepts that has
    /// the highest rendezvous weight for it (counted as a placement); None when none.
    fn place_keyed(&self, key: &[u8], eligible: &dyn Fn(&PodRecord) -> bool) -> Option<PodRecord>;
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
    let head = match protocol {
        Protocol::Mqtt => peek_connect(&mut client).await,
        Protocol::Kafka => Vec::new(),
    };
    let key = match connect_client_id(&head) {
        ClientId::Id(range) if !range.is_empty() => head.get(range),
        _ => None,
    };
    let Some((pod, mut upstream)) = connect_placed(&*router, protocol, key).await else {
        metrics::counter!(TCP_NO_POD, "protocol" => protocol.label()).increment(1);
        refuse(protocol, &head, &mut client).await;
        return;
    };
    metrics::counter!(TCP_CONNECTIONS, "protocol" => protocol.label()).increment(1);
    let _ = upstream.set_nodelay(true);
    if upstream.write_all(&head).await.is_err() {
        return;
    }
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
    key: Option<&[u8]>,
) -> Option<(PodRecord, TcpStream)> {
    let eligible = |p: &PodRecord| protocol.addr(p).is_some();
    for _ in 0..CONNECT_ATTEMPTS {
        let pod = match key {
            Some(key) => router.place_keyed(key, &eligible)?,
            None => router.place_where(&eligible)?,
        };
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

/// The first bytes of an MQTT connection: read until the CONNECT's client id is known, the
/// bytes are not a CONNECT, [`PEEK_LIMIT`] bytes are read, the client stops sending or
/// [`PEEK_TIMEOUT`] passes; all of them are returned (they go to the pod first).
async fn peek_connect(client: &mut TcpStream) -> Vec<u8> {
    let mut head = Vec::with_capacity(PEEK_LIMIT);
    let _ = tokio::time::timeout(PEEK_TIMEOUT, async {
        let mut buf = [0u8; PEEK_LIMIT];
        while matches!(connect_client_id(&head), ClientId::More) && head.len() < PEEK_LIMIT {
            let room = PEEK_LIMIT - head.len();
            match client.read(&mut buf[..room]).await {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    head
}

/// The documented answer when no pod is placeable (module doc): for MQTT, `head` (the
/// bytes read by [`peek_connect`]) says the CONNECT's level.
async fn refuse(protocol: Protocol, head: &[u8], client: &mut TcpStream) {
    if protocol == Protocol::Mqtt {
        if let Peek::Level(level) = connect_level(head) {
            let _ = client.write_all(server_unavailable(level)).await;
        }
    }
    let _ = client.shutdown().await;
}
