//! Sluice's cluster layer. Pods are interchangeable and a stream, not a partition, is the unit
//! of placement, so the cluster needs only three things, each in its own module:
//!
//! - [`meta`]: the meta store (etcd): where pods register under a lease, report their load
//!   every second and are asked to drain, and where the shared catalog lives;
//! - [`placement`]: the load score and the policies that pick a pod for a new stream
//!   (power of two choices; round robin and random for comparison);
//! - [`proxy`]: `sluice router`, the HTTP/2 pass-through that places each new
//!   `EphemeralStream` on a pod and relays its frames both ways without decoding records;
//!   [`ops`] is what the router answers itself (`/healthz`, `/readyz`, `/metrics`), and
//!   [`status_page`] its status page of the whole cluster (`GET /`); [`tcp_front`] places
//!   each MQTT or Kafka TCP connection like a stream and relays its bytes to the pod.
//!
//! Underneath [`meta`], [`etcd`] is Sluice's own small etcd v3 client (KV, watch, lease)
//! over the etcd code that `sluice-proto` generates with its vendored protoc.
//!
//! Dependencies: this crate knows etcd, hyper and the pod record; it knows nothing of the
//! WAL, Delta or the Zerobus messages (the server crate depends on it, not the reverse).

pub mod error;
pub mod etcd;
pub mod meta;
pub mod mqtt_peek;
pub mod ops;
pub mod placement;
pub mod pod_record;
pub mod proxy;
pub mod registration;
pub mod status_page;
pub mod tcp_front;

pub use error::{Result, RouterError};
pub use meta::Meta;
pub use placement::Policy;
pub use pod_record::{Load, PodAddrs, PodRecord, PodState};
