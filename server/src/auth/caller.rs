//! The verified caller of a request and what it may do with a table.

use super::token::Claims;

/// Header the official SDKs use to name the stream's table.
pub const TABLE_HEADER: &str = "x-databricks-zerobus-table-name";

/// What a verified caller may do.
#[derive(Clone, Debug)]
pub enum Caller {
    /// Authentication is off (`--auth none`).
    Anonymous,
    /// A verified token.
    Token(Claims),
}

impl Caller {
    /// Whether the caller may write to `table`.
    pub fn may_write(&self, table: &str) -> bool {
        match self {
            Caller::Anonymous => true,
            Caller::Token(c) => c.allows_table(table),
        }
    }

    /// Whether the caller may read `table` (its definition).
    pub fn may_read(&self, table: &str) -> bool {
        match self {
            Caller::Anonymous => true,
            Caller::Token(c) => c.allows_select(table),
        }
    }

    /// Whether the caller may manage the catalog.
    pub fn is_admin(&self) -> bool {
        match self {
            Caller::Anonymous => true,
            Caller::Token(c) => c.admin,
        }
    }
}
