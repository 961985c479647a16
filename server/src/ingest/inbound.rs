//! What an error reading a stream's next request means: tonic reports an
//! over-size message as OUT_OF_RANGE and undecodable bytes as INTERNAL; both
//! are the client's fault and get the status Sluice promises for them
//! (RESOURCE_EXHAUSTED naming the limit, INVALID_ARGUMENT). Anything else
//! (reset, disconnect) means the client left.
//!
//! [`Inbound`] is what a stream's loop reads requests from: an ephemeral
//! stream's requests as they come, a persistent stream's ingest requests as
//! the same `EphemeralStreamRequest`s (one parser, one loop for both).

use std::future::Future;

use sluice_proto::{
    ephemeral_stream_request, persistent_stream_request, CreateIngestStreamRequest,
    EphemeralStreamRequest, PersistentStreamRequest,
};
use tonic::{Code, Status, Streaming};

/// A stream's requests after the opening one.
pub trait Inbound: Send {
    /// The next request (None: the client finished sending). Cancel-safe.
    fn next_request(
        &mut self,
    ) -> impl Future<Output = Result<Option<EphemeralStreamRequest>, Status>> + Send;
}

impl Inbound for Streaming<EphemeralStreamRequest> {
    async fn next_request(&mut self) -> Result<Option<EphemeralStreamRequest>, Status> {
        self.message().await
    }
}

/// A persistent stream's requests, read as ephemeral ones.
pub struct PersistentInbound(pub Streaming<PersistentStreamRequest>);

impl Inbound for PersistentInbound {
    async fn next_request(&mut self) -> Result<Option<EphemeralStreamRequest>, Status> {
        Ok(self.0.message().await?.map(as_ephemeral))
    }
}

/// A persistent stream's request as the ephemeral request with the same meaning; a
/// second create or resume reads as a second `create_stream` (a protocol misstep).
fn as_ephemeral(request: PersistentStreamRequest) -> EphemeralStreamRequest {
    use ephemeral_stream_request::Payload as Out;
    use persistent_stream_request::Payload as In;
    let payload = request.payload.map(|p| match p {
        In::IngestRecord(r) => Out::IngestRecord(r),
        In::IngestRecordBatch(b) => Out::IngestRecordBatch(b),
        In::CreateStream(_) | In::ResumeStream(_) => {
            Out::CreateStream(CreateIngestStreamRequest::default())
        }
    });
    EphemeralStreamRequest { payload }
}

/// The status to send for an error reading a request, or `None` when the
/// client went away and nobody is left to tell.
pub fn read_error_status(error: &Status, max_request_bytes: usize) -> Option<Status> {
    let message = error.message();
    match error.code() {
        Code::OutOfRange if message.contains("message length too large") => {
            Some(Status::resource_exhausted(format!(
                "request too large: {message} (--max-request-bytes {max_request_bytes}); \
                 send smaller batches"
            )))
        }
        Code::Internal if message.starts_with("failed to decode Protobuf message") => {
            Some(Status::invalid_argument(format!(
                "request is not a valid EphemeralStreamRequest: {message}"
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversize_and_undecodable_requests_get_the_clients_statuses() {
        let big = Status::out_of_range(
            "Error, decoded message length too large: found 20 bytes, the limit is: 10 bytes",
        );
        let s = read_error_status(&big, 10).expect("status");
        assert_eq!(s.code(), Code::ResourceExhausted);
        assert!(s.message().contains("--max-request-bytes"));
        let bad = Status::internal("failed to decode Protobuf message: invalid wire type");
        let s = read_error_status(&bad, 10).expect("status");
        assert_eq!(s.code(), Code::InvalidArgument);
        assert!(read_error_status(&Status::cancelled("gone"), 10).is_none());
    }
}
