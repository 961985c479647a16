//! The connection to an etcd cluster: one tonic channel that balances over every endpoint
//! (reconnecting on its own), and the generated KV, Watch and Lease clients on top of it.

use std::time::Duration;

use sluice_proto::etcd::etcdserverpb::kv_client::KvClient;
use sluice_proto::etcd::etcdserverpb::lease_client::LeaseClient;
use sluice_proto::etcd::etcdserverpb::watch_client::WatchClient;
use tonic::transport::{Channel, Endpoint};

use crate::error::{Result, RouterError};

/// How long dialing one endpoint may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a call may wait for etcd's answer (for a stream: for its headers).
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection to an etcd cluster. Cheap to clone: clones share the channel.
#[derive(Clone, Debug)]
pub struct EtcdClient {
    pub(super) kv: KvClient<Channel>,
    pub(super) watch: WatchClient<Channel>,
    pub(super) lease: LeaseClient<Channel>,
}

impl EtcdClient {
    /// A client for `endpoints` (`http://HOST:PORT` URLs). Dials lazily: an unreachable
    /// cluster shows as an error of the first call, not here. Must run inside a tokio runtime
    /// (the channel's balancer is a task of it).
    pub fn connect(endpoints: &[String]) -> Result<EtcdClient> {
        if endpoints.is_empty() {
            return Err(RouterError::BadUrl {
                url: String::new(),
                reason: "no etcd endpoint".into(),
            });
        }
        let endpoints = endpoints
            .iter()
            .map(|url| {
                Endpoint::from_shared(url.clone())
                    .map(|e| e.connect_timeout(CONNECT_TIMEOUT).timeout(CALL_TIMEOUT))
                    .map_err(|e| RouterError::BadUrl {
                        url: url.clone(),
                        reason: e.to_string(),
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        let channel = Channel::balance_list(endpoints.into_iter());
        Ok(EtcdClient {
            kv: KvClient::new(channel.clone()),
            watch: WatchClient::new(channel.clone()),
            lease: LeaseClient::new(channel),
        })
    }
}
