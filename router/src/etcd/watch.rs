//! Watches: one bidirectional stream per watched key. The create request goes up first;
//! the request side stays open for as long as the [`WatchStream`] lives, so etcd keeps the
//! watch until it is dropped.

use sluice_proto::etcd::etcdserverpb::watch_request::RequestUnion;
use sluice_proto::etcd::etcdserverpb::{WatchCreateRequest, WatchRequest, WatchResponse};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

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
    /// Watches `key` from `start_revision` (0: from now on).
    pub async fn watch(&self, key: &str, start_revision: i64) -> Result<WatchStream> {
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
        let mut watch = self.watch.clone();
        let responses = watch
            .watch(ReceiverStream::new(outbox))
            .await
            .map_err(RouterError::etcd("watch"))?
            .into_inner();
        Ok(WatchStream {
            key: key.to_string(),
            _requests: requests,
            responses,
        })
    }
}

impl WatchStream {
    /// The next response (the first one only confirms the watch and has no events); `None`
    /// when etcd closed the stream. A watch etcd cancels (say its start revision was
    /// compacted) is an error: no event will ever follow.
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
