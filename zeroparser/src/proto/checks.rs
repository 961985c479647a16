//! The checks both protobuf passes (the visitor in `visit` and the value-tree decoder in
//! `tree`) make around a field: its wire type, the depth of a nested message, and the zero
//! value of an absent map key or value.

use super::scalar::ScalarPlan;
use super::wire::{Reader, MAX_DEPTH};
use crate::error::{DecodeError, DecodeErrorKind, WireType};
use crate::value::Scalar;

/// The error of a field that arrived with wire type `found` instead of `expected`.
#[cold]
pub(super) fn wrong_wire(expected: WireType, found: WireType, tag_offset: usize) -> DecodeError {
    DecodeError::at(
        DecodeErrorKind::WrongWireType { expected, found },
        tag_offset,
    )
}

/// Checks that a field arrived with the wire type its plan expects.
#[inline]
pub(super) fn expect_wire(
    expected: WireType,
    found: WireType,
    tag_offset: usize,
) -> Result<(), DecodeError> {
    if expected == found {
        Ok(())
    } else {
        Err(wrong_wire(expected, found, tag_offset))
    }
}

/// A reader over a nested message one level deeper than `depth`.
#[inline]
pub(super) fn nested<'a>(
    reader: &mut Reader<'a>,
    wire: WireType,
    tag_offset: usize,
    depth: usize,
) -> Result<Reader<'a>, DecodeError> {
    expect_wire(WireType::Len, wire, tag_offset)?;
    if depth + 1 > MAX_DEPTH {
        return Err(DecodeError::at(
            DecodeErrorKind::DepthExceeded { limit: MAX_DEPTH },
            tag_offset,
        ));
    }
    reader.read_sub_reader()
}

/// The value of an absent map key or value: the type's zero value, errors at `offset`.
pub(super) fn zero(scalar: &ScalarPlan, offset: usize) -> Result<Scalar<'_>, DecodeError> {
    scalar.zero().map_err(|kind| DecodeError::at(kind, offset))
}
