//! Sluice's own etcd v3 client: the few calls the meta store makes, over the generated
//! `etcdserverpb` code of the `sluice-proto` crate (built with the vendored protoc, so no
//! system protoc is needed). One file per concern:
//!
//! - [`client`]: the connection (one load-balanced HTTP/2 channel over every endpoint,
//!   TLS for `https` endpoints);
//! - [`options`]: TLS material and credentials of a secured etcd;
//! - [`auth`]: etcd authentication (a token on every call, renewed when refused);
//! - [`call`]: each call with the token, retried once after a refused one;
//! - [`kv`]: range, put, delete and transactions with compares;
//! - [`watch`]: a watch on one key (a bidirectional stream);
//! - [`lease`]: grant, revoke and keep-alive.
//!
//! Each call is a method of [`EtcdClient`]; the `impl` blocks live beside their concern.

pub mod auth;
pub mod call;
pub mod client;
pub mod kv;
pub mod lease;
pub mod options;
pub mod watch;

pub use client::EtcdClient;
pub use options::{ClientIdentity, Credentials, EtcdOptions, EtcdTls};
pub use watch::WatchStream;
