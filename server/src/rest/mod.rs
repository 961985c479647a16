//! REST insert (`POST /zerobus/v1/tables/{table}/insert`): the service behind the HTTP
//! handler (`http/insert.rs`). The body is taken apart into records ([`body`]), parsed by
//! the table's parser all-or-nothing, logged as one WAL frame of the table's REST stream
//! (with the request's idempotency key, [`idempotency`]) and answered once that frame is
//! durable ([`insert`]). Errors carry their HTTP status and `error_code` ([`error`]).

pub mod body;
pub mod error;
pub mod idempotency;
pub mod insert;

pub use error::RestError;
pub use insert::{append_record, insert, insert_parsed, Inserted, RestIngest};
