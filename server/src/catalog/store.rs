//! The contract between the catalog and where it is kept.

use crate::error::Result;

/// A stored catalog document and its revision.
#[derive(Clone, Debug)]
pub struct Stored {
    /// The JSON document.
    pub bytes: Vec<u8>,
    /// Revision of the store that wrote it (> 0; revisions only grow).
    pub revision: i64,
}

/// Durable, shared storage of the catalog document.
///
/// Contract:
/// - `replace(expected, bytes)` is atomic and conditional: it stores `bytes` only if the
///   newest stored revision is still `expected` (0 = nothing stored yet), and returns the new
///   revision; otherwise it stores nothing and returns `None`. A returned revision means the
///   document is durable (it survives a crash of this process).
/// - `load` returns the newest stored document (a read after a successful `replace` sees it).
/// - `revision_hint` is cheap (no I/O): the newest revision this store has heard of. When it
///   differs from the revision the caller last loaded, the caller reloads. It may lag behind
///   other writers briefly (a watch in flight); `replace` is what guarantees correctness.
pub trait CatalogStore: Send + Sync {
    /// The newest stored document, or `None` if none was ever stored.
    fn load(&self) -> Result<Option<Stored>>;
    /// Stores `bytes` if the stored revision is still `expected`; see the trait docs.
    fn replace(&self, expected: i64, bytes: &[u8]) -> Result<Option<i64>>;
    /// The newest revision known without I/O.
    fn revision_hint(&self) -> i64;
    /// Where the catalog is (for messages).
    fn describe(&self) -> String;
}
