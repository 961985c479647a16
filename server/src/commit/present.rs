//! The HEAD check: before a hand-off is committed, every file it names must
//! be in the table's store. A missing file refuses that hand-off only
//! ([`HandOffError::MissingFile`]); the rest of the batch commits.

use deltalake::DeltaTable;
use futures::stream::{self, TryStreamExt};
use object_store::path::Path;
use object_store::ObjectStoreExt;

use super::handoff::{HandOff, HandOffError};

/// HEAD requests in flight at once per hand-off.
const HEADS_IN_FLIGHT: usize = 16;

/// Checks that every file of `handoff` exists in `table`'s store.
pub(crate) async fn check_files(table: &DeltaTable, handoff: &HandOff) -> Result<(), HandOffError> {
    let store = table.object_store();
    let failed = |message: String| HandOffError::Commit {
        table: handoff.table.clone(),
        message,
    };
    stream::iter(handoff.adds.iter().map(Ok))
        .try_for_each_concurrent(HEADS_IN_FLIGHT, |add| {
            let store = store.clone();
            async move {
                let path = Path::from_url_path(&add.path)
                    .map_err(|e| failed(format!("file path {}: {e}", add.path)))?;
                match store.head(&path).await {
                    Ok(_) => Ok(()),
                    Err(object_store::Error::NotFound { .. }) => Err(HandOffError::MissingFile {
                        table: handoff.table.clone(),
                        path: add.path.clone(),
                    }),
                    Err(e) => Err(failed(format!("HEAD {}: {e}", add.path))),
                }
            }
        })
        .await
}
