//! Watches: one bidirectional stream per watched key. The create request goes up first and
//! etcd's confirmation is awaited before [`EtcdClient::watch`] returns; the request side
//! stays open for as long as the [`WatchStream`] lives, so etcd keeps the watch until it is
//! dropped. etcd checks a watch's token when it is created and cancels it ("invalid auth
//! token") if the token is refused: the client then authenticates again and retries once.

use sluice_proto::etcd::etcdserverpb::watch_request::RequestUnion;
use sluice_proto::etcd::etcdserverpb::{WatchCreateRequest, WatchRequest, WatchResponse};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

use super::auth::token_refused;
use super::client::EtcdClient;
use crate::error::{Result, RouterError};

/// The events of one watch, as etcd sends them.
pub struct WatchStream {
    key: String,
    /// Kept only to hold the request side open.
    _requests: mpsc::Sender<WatchRequest>,
    responses: Streaming<WatchResponse>,
}

impl EtcdClient {
    /// Watches `key` from `start_revision` (0: from now on); returns once etcd confirmed it.
    pub async fn watch(&self, key: &str, start_revision: i64) -> Result<WatchStream> {
        match self.create_watch(key, start_revision).await {
            Err(e) if refused_for_token(&e) && self.reauthenticate().await? => {
                self.create_watch(key, start_revision).await
            }
            other => other,
        }
    }

    async fn create_watch(&self, key: &str, start_revision: i64) -> Result<WatchStream> {
        let (requests, outbox) = mpsc::channel(1);
        let create = WatchRequest {
            request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
                key: key.as_bytes().to_vec(),
                start_revision,
                ..Default::default()
            })),
        };
        requests
            .send(create)
            .await
            .map_err(|_| RouterError::Watch {
                key: key.to_string(),
                reason: "request stream closed before the watch was created".into(),
            })?;
        self.ensure_authenticated().await?;
        let mut watch = self.watch.clone();
        let responses = watch
            .watch(ReceiverStream::new(outbox))
            .await
            .map_err(self.failed("watch"))?
            .into_inner();
        let mut stream = WatchStream {
            key: key.to_string(),
            _requests: requests,
            responses,
        };
        match stream.message().await? {
            Some(_created) => Ok(stream),
            None => Err(RouterError::Watch {
                key: key.to_string(),
                reason: "etcd closed the watch before confirming it".into(),
            }),
        }
    }
}

/// Whether creating a watch failed because etcd refused its token: a watch canceled with
/// the reason "invalid auth token" (etcd 3.4's answer to an expired token) or a refused call.
fn refused_for_token(e: &RouterError) -> bool {
    match e {
        RouterError::Watch { reason, .. } => {
            reason.contains("invalid auth token") || reason.contains("auth store is old")
        }
        RouterError::Etcd { status, .. } => token_refused(status),
        _ => false,
    }
}

impl WatchStream {
    /// The next response; `None` when etcd closed the stream. A watch etcd cancels (say its
    /// start revision was compacted, or its token was refused) is an error: no event will
    /// ever follow.
    pub async fn message(&mut self) -> Result<Option<WatchResponse>> {
        let Some(response) = self
            .responses
            .message()
            .await
            .map_err(RouterError::etcd("watch"))?
        else {
            return Ok(None);
        };
        if response.canceled {
            return Err(RouterError::Watch {
                key: self.key.clone(),
                reason: format!("canceled by etcd: {}", response.cancel_reason),
            });
        }
        Ok(Some(response))
    }
}
