//! The connection to an etcd cluster: one tonic channel that balances over every endpoint
//! (reconnecting on its own), TLS for `https` endpoints, and the generated KV, Watch and
//! Lease clients on top of it, each carrying the auth token ([`super::auth`]).

use std::sync::Arc;
use std::time::Duration;

use sluice_proto::etcd::etcdserverpb::kv_client::KvClient;
use sluice_proto::etcd::etcdserverpb::lease_client::LeaseClient;
use sluice_proto::etcd::etcdserverpb::watch_client::WatchClient;
use std::error::Error as _;
use tonic::service::interceptor::InterceptedService;

use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Code, Status};

use super::auth::{Authenticator, TokenInterceptor};
use super::options::{EtcdOptions, EtcdTls};
use crate::error::{Result, RouterError};

/// How long dialing one endpoint may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a call may wait for etcd's answer (for a stream: for its headers).
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The channel every generated client shares, with the auth token added to each call.
pub(super) type Authed = InterceptedService<Channel, TokenInterceptor>;

/// A connection to an etcd cluster. Cheap to clone: clones share the channel and the token.
#[derive(Clone, Debug)]
pub struct EtcdClient {
    pub(super) kv: KvClient<Authed>,
    pub(super) watch: WatchClient<Authed>,
    pub(super) lease: LeaseClient<Authed>,
    pub(super) auth: Option<Arc<Authenticator>>,
    /// What to check when etcd drops the connection without saying why (a TLS etcd that
    /// wants a client certificate closes it after the handshake).
    pub(super) closed_hint: &'static str,
}

impl EtcdClient {
    /// A client for `endpoints` (`http://HOST:PORT`, or `https://HOST:PORT` for TLS with
    /// `options.tls`). Dials lazily: an unreachable cluster (or a refused password) shows as
    /// an error of the first call, not here. Must run inside a tokio runtime (the channel's
    /// balancer is a task of it).
    pub fn connect(endpoints: &[String], options: &EtcdOptions) -> Result<EtcdClient> {
        if endpoints.is_empty() {
            return Err(RouterError::BadUrl {
                url: String::new(),
                reason: "no etcd endpoint".into(),
            });
        }
        let tls = tls_config(&options.tls);
        let closed_hint = match (endpoints[0].starts_with("https://"), &options.tls.identity) {
            (true, None) => "if etcd requires client certificates, give --etcd-cert and --etcd-key",
            (true, Some(_)) => "check that etcd trusts the CA of --etcd-cert",
            (false, _) => "if etcd serves TLS, use an etcds:// URL",
        };
        let endpoints = endpoints
            .iter()
            .map(|url| endpoint(url, &tls))
            .collect::<Result<Vec<_>>>()?;
        let channel = Channel::balance_list(endpoints.into_iter());
        let token = TokenInterceptor::default();
        let auth = options
            .credentials
            .clone()
            .map(|c| Arc::new(Authenticator::new(c, channel.clone(), token.clone())));
        Ok(EtcdClient {
            kv: KvClient::with_interceptor(channel.clone(), token.clone()),
            watch: WatchClient::with_interceptor(channel.clone(), token.clone()),
            lease: LeaseClient::with_interceptor(channel, token),
            auth,
            closed_hint,
        })
    }

    /// The error of a failed `call`; a dropped connection gets [`EtcdClient::closed_hint`].
    pub(super) fn failed(&self, call: &'static str) -> impl FnOnce(Status) -> RouterError + '_ {
        move |status| {
            let dropped = matches!(status.code(), Code::Cancelled | Code::Unknown)
                && status.source().is_some()
                || status.message().contains("connection closed");
            let status = if dropped {
                let mut message = status.message().to_string();
                let mut cause = status.source();
                while let Some(e) = cause {
                    message.push_str(": ");
                    message.push_str(&e.to_string());
                    cause = e.source();
                }
                Status::new(
                    Code::Unavailable,
                    format!(
                        "{message} (etcd closed the connection; {})",
                        self.closed_hint
                    ),
                )
            } else {
                status
            };
            RouterError::Etcd { call, status }
        }
    }
}

fn endpoint(url: &str, tls: &ClientTlsConfig) -> Result<Endpoint> {
    let bad = |reason: String| RouterError::BadUrl {
        url: url.to_string(),
        reason,
    };
    let mut endpoint = Endpoint::from_shared(url.to_string())
        .map_err(|e| bad(e.to_string()))?
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(CALL_TIMEOUT);
    if url.starts_with("https://") {
        endpoint = endpoint
            .tls_config(tls.clone())
            .map_err(|e| bad(format!("TLS: {e}")))?;
    }
    Ok(endpoint)
}

/// The TLS client configuration: the given CA (else the system's roots) and the client
/// certificate if there is one.
fn tls_config(tls: &EtcdTls) -> ClientTlsConfig {
    let mut config = ClientTlsConfig::new();
    config = match &tls.ca_pem {
        Some(ca) => config.ca_certificate(Certificate::from_pem(ca)),
        None => config.with_native_roots(),
    };
    if let Some(identity) = &tls.identity {
        config = config.identity(Identity::from_pem(&identity.cert_pem, &identity.key_pem));
    }
    config
}
