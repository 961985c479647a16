//! The tables service: creating, altering, dropping, describing and listing the pod's
//! tables, with the caller's rights checked. It owns the DDL: the pod's DDL
//! lock, the column policy (`policy`), the Delta table, the catalog entry and
//! the table's sink. The HTTP tables API calls it, and through that API
//! `sluice table …` (an HTTP client) and the integration tests.

mod access;
mod alter;
mod create;
mod drop;
pub mod policy;
mod read;

pub use access::require_admin;
pub use alter::{alter_table, alter_table_unchecked, PAUSE_AFTER_COMMIT_ENV};
pub use create::{create_table, NewTable};
pub use drop::drop_table;
pub use policy::split_name;
pub use read::{get_table, list_tables};
