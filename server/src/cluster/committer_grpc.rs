//! The gRPC handler of `sluice.cluster.v1.Committer/HandOff`, served on the
//! pod's listener: checks the peer token, decodes the request, asks this
//! pod's roles ([`CommitRoles::serve`]: is this pod the table's committer
//! with that epoch, then its committer's answer) and encodes the answer or
//! the refusal.

use std::sync::Arc;

use sluice_proto::cluster::committer_server::{Committer, CommitterServer};
use sluice_proto::cluster::{HandOffRequest, HandOffResponse};
use tonic::{Request, Response, Status};

use super::handoff_wire::{from_request, to_response, to_status};
use super::peer_auth::peer_caller;
use super::roles::CommitRoles;
use crate::auth::Authenticator;

/// The internal committer service of one pod.
pub struct CommitterService {
    roles: Arc<CommitRoles>,
    auth: Arc<Authenticator>,
}

impl CommitterService {
    /// The service over this pod's roles, checking peer tokens with `auth`'s keys.
    pub fn new(roles: Arc<CommitRoles>, auth: Arc<Authenticator>) -> CommitterServer<Self> {
        CommitterServer::new(CommitterService { roles, auth })
    }

    /// The calling pod, from its peer token ([`peer_caller`]).
    fn caller<T>(&self, request: &Request<T>) -> Result<String, Status> {
        peer_caller(&self.auth, request.metadata())
    }
}

#[tonic::async_trait]
impl Committer for CommitterService {
    async fn hand_off(
        &self,
        request: Request<HandOffRequest>,
    ) -> Result<Response<HandOffResponse>, Status> {
        let caller = self.caller(&request)?;
        let (handoff, epoch) = from_request(request.into_inner())?;
        if handoff.pod_id != caller {
            return Err(Status::permission_denied(format!(
                "pod {caller} handed off for pod {}",
                handoff.pod_id
            )));
        }
        match self.roles.serve(epoch, handoff).await {
            Ok(ack) => Ok(Response::new(to_response(ack))),
            Err(e) => Err(to_status(&e)),
        }
    }
}
