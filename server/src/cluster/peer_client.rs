//! Calls to other pods' internal services: one lazily connected channel per
//! advertised address (TLS with the system's roots for `https://` addresses),
//! and a peer token renewed at half its lifetime.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_proto::cluster::committer_client::CommitterClient;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use super::election::Holder;
use super::handoff_wire::{from_response, from_status, to_request};
use super::peer_auth::{peer_token, PEER_TOKEN_TTL};
use crate::auth::Authenticator;
use crate::commit::{HandOff, HandOffAck, HandOffError};

/// How long a hand-off call may take (the committer answers after its
/// commit, at most one interval plus the commit later).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long establishing a connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// This pod's client to other pods.
pub struct PeerClient {
    auth: Arc<Authenticator>,
    pod_id: String,
    token: Mutex<Option<(String, Instant)>>,
    channels: Mutex<HashMap<String, Channel>>,
}

impl PeerClient {
    /// A client that calls as pod `pod_id`, signing with `auth`'s keys.
    pub fn new(auth: Arc<Authenticator>, pod_id: String) -> PeerClient {
        PeerClient {
            auth,
            pod_id,
            token: Mutex::new(None),
            channels: Mutex::new(HashMap::new()),
        }
    }

    /// The current peer token (a new one past half its lifetime).
    fn token(&self) -> crate::error::Result<String> {
        let mut slot = self.token.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((token, at)) = slot.as_ref() {
            if at.elapsed() < PEER_TOKEN_TTL / 2 {
                return Ok(token.clone());
            }
        }
        let token = peer_token(self.auth.signer(), &self.pod_id)?;
        *slot = Some((token.clone(), Instant::now()));
        Ok(token)
    }

    fn channel(&self, addr: &str) -> Result<Channel, String> {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = channels.get(addr) {
            return Ok(c.clone());
        }
        let mut endpoint = Endpoint::from_shared(addr.to_string())
            .map_err(|e| format!("bad pod address {addr}: {e}"))?
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(CALL_TIMEOUT);
        if addr.starts_with("https://") {
            endpoint = endpoint
                .tls_config(ClientTlsConfig::new().with_enabled_roots())
                .map_err(|e| format!("TLS to {addr}: {e}"))?;
        }
        let channel = endpoint.connect_lazy();
        channels.insert(addr.to_string(), channel.clone());
        Ok(channel)
    }

    /// Forgets the channel to `addr` (after a transport failure).
    fn forget(&self, addr: &str) {
        self.channels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(addr);
    }

    /// Sends `handoff` to the committer `holder` and waits for its answer.
    pub async fn hand_off(
        &self,
        holder: &Holder,
        handoff: &HandOff,
    ) -> Result<HandOffAck, HandOffError> {
        let unreachable = |message: String| HandOffError::Unreachable {
            table: handoff.table.clone(),
            message,
        };
        let channel = self.channel(&holder.addr).map_err(unreachable)?;
        let token = self.token().map_err(|e| unreachable(e.to_string()))?;
        let mut request = tonic::Request::new(to_request(handoff, holder.epoch)?);
        let bearer = format!("Bearer {token}")
            .parse()
            .map_err(|e| unreachable(format!("peer token header: {e}")))?;
        request.metadata_mut().insert("authorization", bearer);
        match CommitterClient::new(channel).hand_off(request).await {
            Ok(response) => Ok(from_response(response.into_inner())),
            Err(status) => {
                let e = from_status(&handoff.table, &status);
                if matches!(e, HandOffError::Unreachable { .. }) {
                    self.forget(&holder.addr);
                }
                Err(e)
            }
        }
    }
}
