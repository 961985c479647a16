//! [`Visitor`]: what receives the fields of one protobuf record from `ProtoPlan::visit`
//! (the wire order and merge rules are in `proto::visit`).

use std::borrow::Cow;

use crate::value::Scalar;

/// Receives the fields of one record from [`ProtoPlan::visit`]. `slot` is the column's
/// position in the table schema (or in the enclosing STRUCT).
pub trait Visitor<'a> {
    /// Whether repeated, map or message fields may reach this visitor. A visitor that says
    /// `false` (the flat columns: tables of scalar columns only, whose plans have none of
    /// them) gets a decoder without their fast paths compiled in.
    const NESTED: bool = true;

    /// A singular scalar field.
    fn scalar(&mut self, slot: usize, value: Scalar<'a>);
    /// A member of a oneof was set: `slot`, another member, is absent again.
    fn clear(&mut self, slot: usize);
    /// One element of a repeated scalar field (ARRAY column).
    fn element(&mut self, slot: usize, value: Scalar<'a>);
    /// One entry of a map whose values are scalars (absent key or value: the zero value).
    fn map_entry(&mut self, slot: usize, key: Scalar<'a>, value: Scalar<'a>);
    /// A singular message field (STRUCT column) begins; its fields follow, then
    /// [`end_message`](Self::end_message).
    fn begin_message(&mut self, slot: usize);
    /// One element of a repeated message field begins.
    fn begin_element(&mut self, slot: usize);
    /// The message value of one map entry begins.
    fn begin_map_value(&mut self, slot: usize, key: Scalar<'a>);
    /// The message begun last ends.
    fn end_message(&mut self);

    /// A singular integer field (the fast path's typed form of [`scalar`](Self::scalar)).
    #[inline]
    fn int(&mut self, slot: usize, value: i64) {
        self.scalar(slot, Scalar::Int(value));
    }
    /// A singular DOUBLE field.
    #[inline]
    fn double(&mut self, slot: usize, value: f64) {
        self.scalar(slot, Scalar::Double(value));
    }
    /// A singular FLOAT field.
    #[inline]
    fn float(&mut self, slot: usize, value: f32) {
        self.scalar(slot, Scalar::Float(value));
    }
    /// A singular BOOLEAN field.
    #[inline]
    fn boolean(&mut self, slot: usize, value: bool) {
        self.scalar(slot, Scalar::Bool(value));
    }
    /// A singular STRING field borrowed from the record.
    #[inline]
    fn string(&mut self, slot: usize, value: &'a str) {
        self.scalar(slot, Scalar::Str(Cow::Borrowed(value)));
    }
    /// A singular BINARY field.
    #[inline]
    fn bytes(&mut self, slot: usize, value: &'a [u8]) {
        self.scalar(slot, Scalar::Bytes(value));
    }

    /// One integer element of a repeated field (the fast path's typed form of
    /// [`element`](Self::element)).
    #[inline]
    fn element_int(&mut self, slot: usize, value: i64) {
        self.element(slot, Scalar::Int(value));
    }
    /// One DOUBLE element.
    #[inline]
    fn element_double(&mut self, slot: usize, value: f64) {
        self.element(slot, Scalar::Double(value));
    }
    /// One FLOAT element.
    #[inline]
    fn element_float(&mut self, slot: usize, value: f32) {
        self.element(slot, Scalar::Float(value));
    }
    /// One BOOLEAN element.
    #[inline]
    fn element_bool(&mut self, slot: usize, value: bool) {
        self.element(slot, Scalar::Bool(value));
    }
    /// One STRING element borrowed from the record.
    #[inline]
    fn element_str(&mut self, slot: usize, value: &'a str) {
        self.element(slot, Scalar::Str(Cow::Borrowed(value)));
    }
    /// One BINARY element.
    #[inline]
    fn element_bytes(&mut self, slot: usize, value: &'a [u8]) {
        self.element(slot, Scalar::Bytes(value));
    }
}
