//! etcd authentication: `Auth.Authenticate` exchanges the user and password for a token,
//! which every later call carries as its `token` metadata (an interceptor on the KV, Watch
//! and Lease clients adds it). etcd's tokens expire (`--auth-token-ttl`) and are invalidated
//! when etcd restarts or its auth store changes; a call refused for its token
//! authenticates again and is retried once (`super::call`).

use std::sync::{Arc, RwLock};

use sluice_proto::etcd::etcdserverpb::auth_client::AuthClient;
use sluice_proto::etcd::etcdserverpb::AuthenticateRequest;
use tonic::metadata::AsciiMetadataValue;
use tonic::service::Interceptor;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

use super::options::Credentials;
use crate::error::{Result, RouterError};

/// The token the next call carries (none before the first authentication, or without auth).
#[derive(Clone, Debug, Default)]
pub struct TokenInterceptor {
    token: Arc<RwLock<Option<AsciiMetadataValue>>>,
}

impl Interceptor for TokenInterceptor {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let token = self.token.read().map(|t| t.clone()).unwrap_or_default();
        if let Some(token) = token {
            request.metadata_mut().insert("token", token);
        }
        Ok(request)
    }
}

/// The credentials of an authenticating client and the means to (re)authenticate.
#[derive(Debug)]
pub(super) struct Authenticator {
    credentials: Credentials,
    client: AuthClient<Channel>,
    token: TokenInterceptor,
    /// Serializes authentications, so a burst of refused calls authenticates once.
    lock: tokio::sync::Mutex<u64>,
}

impl Authenticator {
    pub(super) fn new(
        credentials: Credentials,
        channel: Channel,
        token: TokenInterceptor,
    ) -> Authenticator {
        Authenticator {
            credentials,
            client: AuthClient::new(channel),
            token,
            lock: tokio::sync::Mutex::new(0),
        }
    }

    pub(super) fn has_token(&self) -> bool {
        self.token
            .token
            .read()
            .map(|t| t.is_some())
            .unwrap_or(false)
    }

    /// Authenticates unless another task did since `seen` (the generation the caller's
    /// failed call used); returns the current generation.
    pub(super) async fn authenticate(&self, seen: u64) -> Result<u64> {
        let mut generation = self.lock.lock().await;
        if *generation != seen && self.has_token() {
            return Ok(*generation);
        }
        let mut client = self.client.clone();
        let response = client
            .authenticate(AuthenticateRequest {
                name: self.credentials.user.clone(),
                password: self.credentials.password.clone(),
            })
            .await
            .map_err(|status| RouterError::EtcdAuth {
                user: self.credentials.user.clone(),
                status,
            })?;
        let token = AsciiMetadataValue::try_from(response.into_inner().token).map_err(|e| {
            RouterError::EtcdAuth {
                user: self.credentials.user.clone(),
                status: Status::internal(format!("etcd sent a token that is not ASCII: {e}")),
            }
        })?;
        if let Ok(mut slot) = self.token.token.write() {
            *slot = Some(token);
        }
        *generation += 1;
        tracing::debug!(user = %self.credentials.user, "authenticated to etcd");
        Ok(*generation)
    }

    pub(super) async fn generation(&self) -> u64 {
        *self.lock.lock().await
    }
}

/// Whether etcd refused a call for its token (expired, invalidated, or from an older auth
/// store), so authenticating again may help.
pub(super) fn token_refused(status: &Status) -> bool {
    let message = status.message();
    (status.code() == Code::Unauthenticated && message.contains("invalid auth token"))
        || message.contains("revision of auth store is old")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_token_refusals_trigger_a_new_authentication() {
        assert!(token_refused(&Status::unauthenticated(
            "etcdserver: invalid auth token"
        )));
        assert!(token_refused(&Status::invalid_argument(
            "etcdserver: revision of auth store is old"
        )));
        assert!(!token_refused(&Status::permission_denied(
            "etcdserver: permission denied"
        )));
        assert!(!token_refused(&Status::unavailable("connection refused")));
    }

    #[test]
    fn the_interceptor_adds_the_token_once_there_is_one() {
        let mut interceptor = TokenInterceptor::default();
        let bare = interceptor.call(Request::new(())).expect("passes");
        assert!(bare.metadata().get("token").is_none());
        if let Ok(mut slot) = interceptor.token.write() {
            *slot = Some(AsciiMetadataValue::from_static("abc.42"));
        }
        let with = interceptor.call(Request::new(())).expect("passes");
        assert_eq!(
            with.metadata().get("token").and_then(|t| t.to_str().ok()),
            Some("abc.42")
        );
    }
}
