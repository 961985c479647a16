//! The MQTT front door (`sluice serve --mqtt-listen HOST:PORT`): MQTT 3.1.1 and 5.0
//! devices publish JSON records into tables with the same credentials, grants, WAL, ack
//! rule and Delta sink as streams.
//!
//! - [`wire`]: packets in and out (the `rmqtt-codec` crate), version-neutral.
//! - [`credentials`]: CONNECT user name/password → identity (token or principal).
//! - [`payload`]: a PUBLISH payload → records.
//! - [`publish`]: topic → the connection's table; records → the REST insert service.
//! - [`refusal`]: a refused PUBLISH and how service errors map onto reason codes.
//! - [`coalesce`]: one-record publishes of all connections to a table → shared writes.
//! - [`session`]: one connection's state machine (QoS, keep-alive, receive maximum).
//! - [`sessions`]: client sessions that outlive a connection (QoS 2 ids, takeover, expiry).
//! - [`listener`]: the accept loop (plain or TLS).

pub mod coalesce;
pub mod credentials;
pub mod listener;
pub mod payload;
pub mod publish;
pub mod refusal;
pub mod session;
pub mod sessions;
pub mod wire;

pub use listener::serve;
