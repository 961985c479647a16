//! `sluice-sdk`: Sluice's own Rust producer SDK, speaking the Zerobus protocol to a Sluice
//! pod or router.
//!
//! ```no_run
//! # async fn demo() -> Result<(), sluice_sdk::SdkError> {
//! let client = sluice_sdk::Client::builder("http://127.0.0.1:8080")
//!     .credentials("my-client", "my-secret")
//!     .build()?;
//! let stream = client.stream("main.iot.readings").json().open().await?;
//! let ack = stream.send(r#"{"device": "d1", "temp": 21.5}"#).await?;
//! ack.await?; // durable on the server
//! stream.close().await?;
//! # Ok(()) }
//! ```
//!
//! - **Back-pressure**: bounded in-flight records and bytes; `send` waits, `try_send` says
//!   [`SdkError::Full`]. Acks are futures ([`AckFuture`]) over one cumulative position, and
//!   optionally a callback.
//! - **Reconnects** with backoff and jitter on UNAVAILABLE, a lost connection or
//!   `CloseStreamSignal`, resending what is unacked.
//! - **Exactly-once** with [`StreamBuilder::persistent`]: the server's persistent stream,
//!   its id and watermark kept in a local state file; a new process resumes it.
//! - **Offline spool** ([`StreamBuilder::spool`]): records go to disk first (bounded,
//!   CRC-checked segments), so a device without network keeps accepting them and a
//!   restarted one sends what it had spooled.
//! - **Metrics** through the `metrics` facade ([`metrics`] lists them); `tracing` spans.
//!
//! | module | owns |
//! |---|---|
//! | [`client`] | endpoint, channel, TLS roots, credentials |
//! | `token` | token fetch and refresh |
//! | [`stream`] | the stream builder and handle (`send`, `flush`, `close`) |
//! | `shared` | the state the handle and the connection task share |
//! | `driver` | the connection task: open/resume, send, acks, reconnect |
//! | [`arrow`] | Arrow streams over Flight `DoPut` |
//! | [`pool`] | one table over N streams |
//! | [`ledger`] | the in-flight ring and cumulative acks |
//! | [`acks`] | ack futures |
//! | [`spool`] | the offline spool over the `wal` crate |
//! | [`state_file`] | a persistent stream's local state |
//! | [`plan`] | which records each request of a persistent stream carries |
//! | `wire` | Zerobus messages in and out |
//! | [`backoff`] | reconnect delays |
//! | [`metrics`], `error` | metric names, [`SdkError`] |

pub mod acks;
pub mod arrow;
pub mod backoff;
pub mod client;
mod driver;
mod error;
pub mod ledger;
pub mod metrics;
pub mod plan;
pub mod pool;
mod shared;
pub mod spool;
pub mod state_file;
pub mod stream;
mod token;
mod wire;

pub use acks::AckFuture;
pub use arrow::{ArrowStream, ArrowStreamBuilder};
pub use client::{Client, ClientBuilder};
pub use error::{Result, SdkError};
pub use pool::{PoolAck, StreamPool};
pub use spool::{SpoolOptions, WhenFull};
pub use stream::{Stream, StreamBuilder};
pub use tonic::Code;
