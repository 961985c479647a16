//! The Zerobus v1 wire protocol (`databricks.zerobus`) as generated tonic/prost code.
//!
//! The `.proto` file in `proto/zerobus.proto` is Sluice's own text, kept
//! wire-identical to what the official Zerobus SDKs speak. This crate owns
//! nothing else: no logic, only the generated types, the server trait and a
//! client (used by tests and the bench).

/// Generated code for package `databricks.zerobus`.
pub mod zerobus {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("databricks.zerobus");
}

pub use zerobus::*;
