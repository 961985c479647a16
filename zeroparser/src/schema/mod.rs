//! The table schema: its types (`column`), the column-list text that declares it
//! (`text`), its canonical SQL (`sql`) and the rules every schema obeys (`validate`).
//! The Arrow mapping of these types lives in `arrow::types`.

mod column;
mod sql;
mod text;
mod validate;

pub(crate) use column::find_column;
pub use column::{Column, ColumnType, TableSchema, MAX_DEPTH};
