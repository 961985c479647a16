//! The tonic service: checks credentials, then hands each `EphemeralStream`
//! to its own task that answers through a bounded channel (a failed send
//! means the client left).

use std::sync::Arc;

use sluice_proto::zerobus_server::Zerobus;
use sluice_proto::{
    EphemeralStreamRequest, EphemeralStreamResponse, PersistentStreamRequest,
    PersistentStreamResponse, RetireStreamRequest, RetireStreamResponse,
};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::stream::run_stream;
use crate::auth::{Caller, TABLE_HEADER};
use crate::limits::StreamSlots;
use crate::pod::Pod;

/// Depth of a stream's response channel (acks are cumulative, so few suffice).
const RESPONSE_CHANNEL_DEPTH: usize = 16;

/// The Zerobus service of a pod.
pub struct IngestService {
    pod: Arc<Pod>,
    slots: Arc<StreamSlots>,
}

impl IngestService {
    /// A service over `pod`.
    pub fn new(pod: Arc<Pod>) -> Self {
        IngestService {
            pod,
            slots: Arc::new(StreamSlots::default()),
        }
    }
}

type ResponseStream<T> = ReceiverStream<Result<T, Status>>;

#[tonic::async_trait]
impl Zerobus for IngestService {
    type EphemeralStreamStream = ResponseStream<EphemeralStreamResponse>;

    async fn ephemeral_stream(
        &self,
        request: Request<Streaming<EphemeralStreamRequest>>,
    ) -> Result<Response<Self::EphemeralStreamStream>, Status> {
        if self.pod.is_shutting_down() {
            return Err(Status::unavailable("this pod is shutting down; reconnect"));
        }
        let metadata = request.metadata();
        let authorization = metadata.get("authorization").and_then(|v| v.to_str().ok());
        let caller = self
            .pod
            .auth
            .verify_bearer(authorization)
            .map_err(Status::from)?;
        let header_table = match metadata.get(TABLE_HEADER) {
            Some(v) => Some(
                v.to_str()
                    .map_err(|_| {
                        Status::invalid_argument(format!("{TABLE_HEADER} header is not ASCII"))
                    })?
                    .to_ascii_lowercase(),
            ),
            None => None,
        };
        if header_table.is_none() && self.pod.auth.mode() == crate::config::AuthMode::OAuth {
            return Err(Status::invalid_argument(format!(
                "missing {TABLE_HEADER} header"
            )));
        }
        let principal = match &caller {
            Caller::Token(claims) => claims.sub.as_str(),
            Caller::Anonymous => "anonymous",
        };
        let slot = self
            .slots
            .acquire(principal, &self.pod.config.limits)
            .map_err(Status::from)?;
        let (tx, rx) = tokio::sync::mpsc::channel(RESPONSE_CHANNEL_DEPTH);
        let pod = self.pod.clone();
        let inbound = request.into_inner();
        self.pod
            .stream_tasks
            .spawn(run_stream(pod, caller, header_table, inbound, tx, slot));
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    type PersistentStreamStream = ResponseStream<PersistentStreamResponse>;

    async fn persistent_stream(
        &self,
        _request: Request<Streaming<PersistentStreamRequest>>,
    ) -> Result<Response<Self::PersistentStreamStream>, Status> {
        Err(Status::unimplemented(
            "persistent streams are not served by Sluice yet; use ephemeral streams",
        ))
    }

    async fn retire_stream(
        &self,
        _request: Request<RetireStreamRequest>,
    ) -> Result<Response<RetireStreamResponse>, Status> {
        Err(Status::unimplemented(
            "persistent streams are not served by Sluice yet; nothing to retire",
        ))
    }
}
