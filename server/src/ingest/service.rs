//! The tonic service: checks credentials, then hands each `EphemeralStream`
//! and `PersistentStream` to its own task that answers through a bounded
//! channel (a failed send means the client left); `RetireStream` is answered
//! here (in a cluster, the owner pod is asked to end the stream's connection).

use std::sync::Arc;

use sluice_proto::zerobus_server::Zerobus;
use sluice_proto::{
    retire_stream_request, EphemeralStreamRequest, EphemeralStreamResponse,
    PersistentStreamRequest, PersistentStreamResponse, RetireStreamRequest, RetireStreamResponse,
};
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status, Streaming};

use super::persistent::run_persistent;
use super::persistent_open::accessible;
use super::stream::run_stream;
use crate::auth::{Caller, TABLE_HEADER};
use crate::error::ServerError;
use crate::limits::{StreamSlot, StreamSlots};
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

impl IngestService {
    /// The caller of a request and the table its header names (lower case).
    fn caller(&self, metadata: &MetadataMap) -> Result<(Caller, Option<String>), Status> {
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
        Ok((caller, header_table))
    }

    /// Admits a new stream: the pod is not shutting down, the caller's credentials
    /// hold, the table header is there when OAuth asks for it, and a slot is free.
    pub(crate) fn admit(
        &self,
        metadata: &MetadataMap,
    ) -> Result<(Caller, Option<String>, StreamSlot), Status> {
        if self.pod.is_shutting_down() {
            return Err(Status::unavailable("this pod is shutting down; reconnect"));
        }
        let (caller, header_table) = self.caller(metadata)?;
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
        Ok((caller, header_table, slot))
    }

    /// Admits a stream and hands it to `run` on its own task, which answers through a
    /// bounded channel; the response stream is that channel's receiver.
    pub(crate) fn spawn_stream<In, Out, Run, Fut>(
        &self,
        request: Request<In>,
        run: Run,
    ) -> Result<Response<ResponseStream<Out>>, Status>
    where
        Run: FnOnce(
            Arc<Pod>,
            Caller,
            Option<String>,
            In,
            tokio::sync::mpsc::Sender<Result<Out, Status>>,
            StreamSlot,
        ) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let (caller, header_table, slot) = self.admit(request.metadata())?;
        let (tx, rx) = tokio::sync::mpsc::channel(RESPONSE_CHANNEL_DEPTH);
        let task = run(
            self.pod.clone(),
            caller,
            header_table,
            request.into_inner(),
            tx,
            slot,
        );
        self.pod.stream_tasks.spawn(task);
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// Asks pod `owner` (another pod) to end retired stream `id`'s connection. Best effort:
/// an owner that is down holds no connection, and the stream is retired either way.
async fn end_elsewhere(pod: &Pod, owner: &str, id: &str) {
    let Some(peers) = pod.pstreams.peers() else {
        return;
    };
    if owner.is_empty() || owner == pod.pod_id() {
        return;
    }
    if let Err(why) = peers.release(owner, id).await {
        tracing::warn!(stream_id = %id, %owner, "the owner did not end the retired stream: {why}");
    }
}

#[tonic::async_trait]
impl Zerobus for IngestService {
    type EphemeralStreamStream = ResponseStream<EphemeralStreamResponse>;

    async fn ephemeral_stream(
        &self,
        request: Request<Streaming<EphemeralStreamRequest>>,
    ) -> Result<Response<Self::EphemeralStreamStream>, Status> {
        self.spawn_stream(request, run_stream)
    }

    type PersistentStreamStream = ResponseStream<PersistentStreamResponse>;

    async fn persistent_stream(
        &self,
        request: Request<Streaming<PersistentStreamRequest>>,
    ) -> Result<Response<Self::PersistentStreamStream>, Status> {
        self.spawn_stream(request, run_persistent)
    }

    async fn retire_stream(
        &self,
        request: Request<RetireStreamRequest>,
    ) -> Result<Response<RetireStreamResponse>, Status> {
        let (caller, header_table) = self.caller(request.metadata())?;
        let retire = request.into_inner();
        let id = match retire.identifier {
            Some(retire_stream_request::Identifier::StreamId(id)) if !id.trim().is_empty() => {
                id.trim().to_string()
            }
            _ => {
                return Err(Status::invalid_argument(
                    "retire_stream: stream_id is missing",
                ))
            }
        };
        let record = accessible(
            &self.pod,
            &caller,
            header_table.as_deref(),
            &id,
            "retire_stream",
        )
        .await?;
        if let Some(table) = retire.table_name.as_deref().map(str::trim) {
            if !table.is_empty() && !table.eq_ignore_ascii_case(&record.table) {
                return Err(ServerError::InvalidArgument(format!(
                    "retire_stream: persistent stream `{id}` writes table `{}`, not `{table}`",
                    record.table
                ))
                .into());
            }
        }
        let retired = self.pod.pstreams.retire(&id).await?;
        end_elsewhere(&self.pod, &retired.owner, &id).await;
        tracing::info!(stream_id = %id, table = %record.table, "persistent stream retired");
        Ok(Response::new(RetireStreamResponse {}))
    }
}
