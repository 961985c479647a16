//! The side slot where a JSON decode keeps its structured error: a type error is recorded
//! here as a [`DecodeError`] and surfaces through serde as an opaque error; each enclosing
//! level adds its path segment while serde unwinds.

use std::cell::RefCell;

use serde::de;

use crate::error::{DecodeError, DecodeErrorKind};
use crate::path::Segment;

/// Where the structured error waits while serde unwinds.
pub(crate) type Side = RefCell<Option<DecodeError>>;

/// The structured cause of a failed decode: the one in `side`, else a JSON syntax error.
pub(crate) fn structured(side: Side, error: &serde_json::Error) -> DecodeError {
    side.into_inner().unwrap_or_else(|| {
        DecodeError::new(DecodeErrorKind::InvalidJson {
            reason: error.to_string(),
        })
    })
}

/// Records `error` as the structured cause and returns serde's opaque error.
pub(crate) fn fail<E: de::Error>(side: &Side, error: DecodeError) -> E {
    let message = error.to_string();
    *side.borrow_mut() = Some(error);
    E::custom(message)
}

pub(super) fn fail_kind<E: de::Error>(side: &Side, kind: DecodeErrorKind) -> E {
    fail(side, DecodeError::new(kind))
}

/// Adds `segment` to the structured cause, if there is one, as the error passes outwards.
pub(super) fn wrap<E>(side: &Side, error: E, segment: impl FnOnce() -> Segment) -> E {
    let mut slot = side.borrow_mut();
    if let Some(cause) = slot.take() {
        *slot = Some(cause.within(segment()));
    }
    error
}

pub(super) fn wrong_type<E: de::Error>(
    side: &Side,
    expected: &'static str,
    found: &'static str,
) -> E {
    fail_kind(side, DecodeErrorKind::JsonWrongType { expected, found })
}
