//! How every call of [`EtcdClient`] runs with etcd authentication: with the current token
//! (authenticating first when there is none yet), and once more after authenticating again
//! when etcd refuses the token.

use std::future::Future;

use tonic::Status;

use super::auth::token_refused;
use super::client::EtcdClient;
use crate::error::Result;

impl EtcdClient {
    /// Runs `attempt` with the current token (authenticating first if there is none yet);
    /// if etcd refuses the token, authenticates again and runs it once more.
    pub(super) async fn call<T, F, Fut>(&self, call: &'static str, mut attempt: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Status>>,
    {
        let Some(auth) = &self.auth else {
            return attempt().await.map_err(self.failed(call));
        };
        let mut seen = auth.generation().await;
        if !auth.has_token() {
            seen = auth.authenticate(seen).await?;
        }
        match attempt().await {
            Err(status) if token_refused(&status) => {
                auth.authenticate(seen).await?;
                attempt().await.map_err(self.failed(call))
            }
            other => other.map_err(self.failed(call)),
        }
    }

    /// Authenticates if credentials are set and there is no token yet.
    pub(super) async fn ensure_authenticated(&self) -> Result<()> {
        if let Some(auth) = &self.auth {
            if !auth.has_token() {
                let seen = auth.generation().await;
                auth.authenticate(seen).await?;
            }
        }
        Ok(())
    }

    /// Authenticates again after etcd refused a stream for its token (a watch it canceled
    /// with "invalid auth token"); false without credentials.
    pub(super) async fn reauthenticate(&self) -> Result<bool> {
        let Some(auth) = &self.auth else {
            return Ok(false);
        };
        let seen = auth.generation().await;
        auth.authenticate(seen).await?;
        Ok(true)
    }
}
