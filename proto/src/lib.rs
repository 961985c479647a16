//! Sluice's generated tonic/prost code, from `.proto` files that are Sluice's own text:
//!
//! - [`zerobus`]: the Zerobus v1 wire protocol (`databricks.zerobus`, `proto/zerobus.proto`),
//!   kept wire-identical to what the official Zerobus SDKs speak: the types, the server
//!   trait and a client (used by tests and the bench);
//! - [`cluster`]: Sluice's internal pod-to-pod services (`sluice.cluster.v1`,
//!   `proto/cluster.proto`, `proto/pstreams.proto`): server and client;
//! - [`etcd`]: the part of etcd's v3 API the router crate's etcd client speaks
//!   (`proto/etcd/`, etcd's own package, message names and field numbers): client only.
//!
//! This crate owns nothing else: no logic, only generated code.

/// Generated code for package `databricks.zerobus`.
pub mod zerobus {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("databricks.zerobus");
}

pub use zerobus::*;

/// Generated code for package `sluice.cluster.v1` (pod-to-pod, never relayed).
pub mod cluster {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("sluice.cluster.v1");
}

/// Generated etcd v3 client code (packages `etcdserverpb` and `mvccpb`).
pub mod etcd {
    /// etcd's v3 RPCs: KV, Watch, Lease, Auth (clients only).
    pub mod etcdserverpb {
        #![allow(clippy::all, missing_docs)]
        tonic::include_proto!("etcdserverpb");
    }

    /// etcd's stored key-values and watch events.
    pub mod mvccpb {
        #![allow(clippy::all, missing_docs)]
        tonic::include_proto!("mvccpb");
    }
}
