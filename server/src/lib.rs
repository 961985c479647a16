//! The Sluice pod: Zerobus gRPC ingest, the catalog and its HTTP API, OAuth,
//! memtables, the Delta sink and WAL replay. The `sluice` binary (`main.rs`,
//! its commands in `cli/`) is a thin CLI over this library.
//!
//! Data path (see ARCHITECTURE.md): `ingest` validates and parses each run of
//! requests with zeroparser, `sink::TableSink::append` logs the raw records to
//! the WAL and adds the Arrow rows to the table's memtable under one lock,
//! acks follow the WAL's durable position, and each table's flush task commits
//! Parquet files plus a `txn (wal id, lsn)` action to Delta. At start-up,
//! `journal::replay` replays what the Delta log does not cover yet.

pub mod audit;
pub mod auth;
pub mod catalog;
pub mod cluster;
pub mod commit;
pub mod config;
pub mod data_dir;
pub mod delta_runtime;
pub mod doctor;
pub mod error;
pub mod etcd_access;
pub mod evolve;
pub mod flight;
pub mod health;
pub mod http;
pub mod ingest;
pub mod journal;
pub mod kafka;
pub mod limits;
pub mod listener;
pub mod metrics_export;
pub mod mqtt;
pub mod otlp;
pub mod pod;
pub mod pstreams;
pub mod rest;
pub mod server;
pub mod side_tls;
pub mod sink;
pub mod status;
pub mod tables;
pub mod warehouse;

pub use config::{AuthMode, ServeConfig};
pub use error::{Result, ServerError};
pub use server::{run, shutdown_signal};
