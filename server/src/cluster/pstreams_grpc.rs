//! The gRPC handler of `sluice.cluster.v1.PersistentStreams/Release`, served on the pod's
//! listener: checks the peer token, reads the stream id, lets `ingest::handover::release`
//! do the work and answers its watermark (or its refusal as a status).

use std::sync::Arc;

use sluice_proto::cluster::persistent_streams_server::{
    PersistentStreams as ReleaseApi, PersistentStreamsServer,
};
use sluice_proto::cluster::{ReleaseRequest, ReleaseResponse};
use tonic::{Request, Response, Status};

use super::peer_auth::peer_caller;
use crate::ingest::handover;
use crate::pod::Pod;

/// The internal persistent stream service of one pod.
pub struct PersistentStreamsService {
    pod: Arc<Pod>,
}

impl PersistentStreamsService {
    /// The service over `pod`.
    pub fn new(pod: Arc<Pod>) -> PersistentStreamsServer<Self> {
        PersistentStreamsServer::new(PersistentStreamsService { pod })
    }

    /// The calling pod, from its peer token ([`peer_caller`]).
    fn caller<T>(&self, request: &Request<T>) -> Result<String, Status> {
        peer_caller(&self.pod.auth, request.metadata())
    }
}

#[tonic::async_trait]
impl ReleaseApi for PersistentStreamsService {
    async fn release(
        &self,
        request: Request<ReleaseRequest>,
    ) -> Result<Response<ReleaseResponse>, Status> {
        let caller = self.caller(&request)?;
        let id = request.into_inner().stream_id.trim().to_string();
        if id.is_empty() {
            return Err(Status::invalid_argument("release: stream_id is missing"));
        }
        tracing::info!(stream_id = %id, pod = %caller, "release of a persistent stream asked");
        let released = handover::release(&self.pod, &id).await?;
        Ok(Response::new(ReleaseResponse {
            watermark: released.watermark,
            released: released.released,
        }))
    }
}
