//! What an error reading a stream's next request means: tonic reports an
//! over-size message as OUT_OF_RANGE and undecodable bytes as INTERNAL; both
//! are the client's fault and get the status Sluice promises for them
//! (RESOURCE_EXHAUSTED naming the limit, INVALID_ARGUMENT). Anything else
//! (reset, disconnect) means the client left.

use tonic::{Code, Status};

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
