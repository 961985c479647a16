//! Integration tests of sluice-zeroparser, compiled as one binary: descriptor compilation,
//! protobuf and JSON decoding semantics, every error kind, atomic appends, and property tests
//! (schema text round trip, prost-reflect messages decoded value for value).

mod avro_differential;
mod flat_differential;
mod json;
mod json_differential;
mod prost_reflect_roundtrip;
mod proto_compile;
mod proto_decode;
mod proto_errors;
mod random_descriptors;
mod rescued_data;
mod schema_roundtrip;
mod support;
mod visit;
