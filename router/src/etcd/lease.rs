//! Leases: grant, revoke, and a keep-alive of one request and its answer (a pod renews its
//! lease once per load report, so there is no long-lived keep-alive stream to tend).

use sluice_proto::etcd::etcdserverpb::{
    LeaseGrantRequest, LeaseKeepAliveRequest, LeaseRevokeRequest,
};

use super::client::EtcdClient;
use crate::error::Result;

impl EtcdClient {
    /// Grants a lease of `ttl_secs` seconds; returns its ID.
    pub async fn lease_grant(&self, ttl_secs: i64) -> Result<i64> {
        let request = LeaseGrantRequest {
            ttl: ttl_secs,
            id: 0,
        };
        self.call("lease grant", || {
            let mut lease = self.lease.clone();
            async move { lease.lease_grant(request).await.map(|r| r.into_inner().id) }
        })
        .await
    }

    /// Revokes lease `id`: etcd deletes every key attached to it at once.
    pub async fn lease_revoke(&self, id: i64) -> Result<()> {
        self.call("lease revoke", || {
            let mut lease = self.lease.clone();
            async move {
                lease
                    .lease_revoke(LeaseRevokeRequest { id })
                    .await
                    .map(|_| ())
            }
        })
        .await
    }

    /// Renews lease `id` once; returns its new time-to-live in seconds, 0 or less if the
    /// lease is gone (expired or revoked) or etcd closed the stream without an answer.
    pub async fn lease_keep_alive(&self, id: i64) -> Result<i64> {
        self.call("lease keep-alive", || {
            let mut lease = self.lease.clone();
            async move {
                let request = LeaseKeepAliveRequest { id };
                let mut responses = lease
                    .lease_keep_alive(tokio_stream::once(request))
                    .await?
                    .into_inner();
                let answer = responses.message().await?;
                Ok(answer.map_or(0, |r| r.ttl))
            }
        })
        .await
    }
}
