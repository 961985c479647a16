//! This pod's calls to other pods about persistent streams: `Release` at the owner's
//! advertised address (from its record under `/sluice/pods/`), with a peer token. A pod
//! that is not registered or does not answer is reported as such: the stream is fenced.

use std::sync::Arc;
use std::time::Duration;

use sluice_proto::cluster::persistent_streams_client::PersistentStreamsClient;
use sluice_proto::cluster::ReleaseRequest;
use sluice_router::Meta;
use tonic::transport::Endpoint;

use super::peer_auth::peer_token;
use crate::auth::Authenticator;
use crate::pstreams::{Released, StreamPeers};

/// How long connecting to a pod may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a release may take (the owner commits the stream's rows first).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The other pods of the cluster, reached directly (never via a router).
pub struct PeerStreams {
    meta: Meta,
    auth: Arc<Authenticator>,
    pod_id: String,
}

impl PeerStreams {
    /// Calls as pod `pod_id`, finding pods in `meta`, signing peer tokens with `auth`'s keys.
    pub fn new(meta: Meta, auth: Arc<Authenticator>, pod_id: String) -> PeerStreams {
        PeerStreams { meta, auth, pod_id }
    }
}

#[tonic::async_trait]
impl StreamPeers for PeerStreams {
    async fn release(&self, owner: &str, id: &str) -> Result<Released, String> {
        let pods = self
            .meta
            .pods()
            .await
            .map_err(|e| format!("the meta store cannot list pods: {e}"))?;
        let Some(pod) = pods.into_iter().find(|p| p.id == owner) else {
            return Err(format!("pod `{owner}` is not registered"));
        };
        let channel = Endpoint::from_shared(pod.addr.clone())
            .map_err(|e| format!("pod `{owner}` has a bad address {}: {e}", pod.addr))?
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(CALL_TIMEOUT)
            .connect()
            .await
            .map_err(|e| format!("pod `{owner}` at {} does not answer: {e}", pod.addr))?;
        let token = peer_token(self.auth.signer(), &self.pod_id).map_err(|e| e.to_string())?;
        let mut request = tonic::Request::new(ReleaseRequest {
            stream_id: id.to_string(),
        });
        let bearer = format!("Bearer {token}")
            .parse()
            .map_err(|e| format!("peer token header: {e}"))?;
        request.metadata_mut().insert("authorization", bearer);
        let answer = PersistentStreamsClient::new(channel)
            .release(request)
            .await
            .map_err(|s| {
                format!(
                    "pod `{owner}` did not release it: {:?}: {}",
                    s.code(),
                    s.message()
                )
            })?
            .into_inner();
        Ok(Released {
            watermark: answer.watermark,
            released: answer.released,
        })
    }
}
