//! A refused PUBLISH ([`Refusal`]: the MQTT 5 reason code, the gRPC code it is counted as,
//! the reason string) and the mapping of the REST insert service's errors onto it, shared
//! by the per-PUBLISH write (`publish`) and the gathered writes (`coalesce`).

use crate::error::ServerError;
use crate::rest::RestError;

use super::wire::reason;

/// A refused PUBLISH: its MQTT 5 reason code and reason string, and the gRPC code it is
/// counted as in `sluice_refusals_total{code}` (the label every door shares).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// MQTT 5 PUBACK reason code.
    pub code: u8,
    /// The gRPC code of the same meaning.
    pub grpc: tonic::Code,
    /// Why.
    pub reason: String,
}

impl Refusal {
    /// A refusal with these codes.
    pub fn new(code: u8, grpc: tonic::Code, reason: impl Into<String>) -> Refusal {
        Refusal {
            code,
            grpc,
            reason: reason.into(),
        }
    }
}

/// The reason code of a refusal of the REST service.
pub fn refusal(e: RestError) -> Refusal {
    let code = match &e {
        RestError::Body(_) => reason::PAYLOAD_FORMAT_INVALID,
        RestError::Server(s) => match s {
            ServerError::InvalidArgument(_) => reason::PAYLOAD_FORMAT_INVALID,
            ServerError::NotFound(_) => reason::TOPIC_NAME_INVALID,
            ServerError::Unauthenticated(_) | ServerError::PermissionDenied(_) => {
                reason::NOT_AUTHORIZED
            }
            ServerError::ResourceExhausted(_)
            | ServerError::Wal(sluice_wal::WalError::NoSpace { .. }) => reason::QUOTA_EXCEEDED,
            _ => reason::UNSPECIFIED,
        },
        _ => reason::UNSPECIFIED,
    };
    Refusal::new(code, e.grpc_code(), e.to_string())
}
