//! The Delta side of a schema change: one commit holding the table's new
//! `metaData` action (its schema and configuration), built on the newest log
//! and tried at exactly the next version (no deltalake retries), so an alter
//! never lands on a table that changed under it: when the log's schema is no
//! longer the one the alter was planned on, it is refused (stale); appends by
//! the committer meanwhile only move it to the next version.

use std::collections::{BTreeMap, HashMap};

use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake::kernel::{Action, MetadataExt, StructField, StructType};
use deltalake::protocol::DeltaOperation;
use deltalake::DeltaTable;

use crate::error::{Result, ServerError};

/// Lost races (appends landing first) retried before the alter gives up.
const ATTEMPTS: usize = 100;

/// The Delta columns of `table`'s newest loaded snapshot.
pub fn delta_schema(table: &DeltaTable) -> Result<Vec<StructField>> {
    Ok(table.snapshot()?.schema().fields().cloned().collect())
}

/// Commits `next` (the table's Delta columns after the change) and the
/// `delta.*` `properties` to `table` if its Delta columns are still
/// `expected`; returns the version of the commit.
pub async fn commit_schema(
    table: &mut DeltaTable,
    name: &str,
    expected: &[StructField],
    next: &[StructField],
    properties: &BTreeMap<String, String>,
    added: &[StructField],
) -> Result<u64> {
    let schema = StructType::try_new(next.to_vec())
        .map_err(|e| ServerError::InvalidArgument(format!("alter: {e}")))?;
    for _ in 0..ATTEMPTS {
        crate::commit::reload(table).await?;
        let snapshot = table.snapshot()?;
        let have = delta_schema(table)?;
        if have != expected {
            return Err(ServerError::FailedPrecondition(format!(
                "alter of {name}: the Delta table's schema at version {} is not the one the \
                 catalog holds (another alter changed it meanwhile); describe the table again \
                 and retry",
                snapshot.version()
            )));
        }
        check_features(snapshot.protocol(), added)?;
        let kernel =
            |e: deltalake::kernel::Error| ServerError::Internal(format!("alter of {name}: {e}"));
        let mut metadata = snapshot
            .metadata()
            .clone()
            .with_schema(&schema)
            .map_err(kernel)?;
        for (k, v) in properties {
            metadata = metadata
                .add_config_key(k.clone(), v.clone())
                .map_err(kernel)?;
        }
        let operation = if added.is_empty() {
            DeltaOperation::SetTableProperties {
                properties: properties
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<HashMap<_, _>>(),
            }
        } else {
            DeltaOperation::AddColumn {
                fields: added.to_vec(),
            }
        };
        let attempt = CommitBuilder::from(CommitProperties::default())
            .with_actions(vec![Action::Metadata(metadata)])
            .with_max_retries(0)
            .build(Some(snapshot), table.log_store(), operation)
            .await;
        match attempt {
            Ok(done) => {
                table.state = Some(done.snapshot());
                return Ok(done.version());
            }
            Err(e) => {
                if !crate::commit::lost_race(&e) {
                    return Err(e.into());
                }
            }
        }
    }
    Err(ServerError::Unavailable(format!(
        "alter of {name}: lost {ATTEMPTS} races in a row against other commits; retry"
    )))
}

/// Refuses new columns that need a table feature the protocol lacks
/// (TIMESTAMP_NTZ needs `timestampNtz`; a protocol change is not built).
fn check_features(protocol: &deltalake::kernel::Protocol, added: &[StructField]) -> Result<()> {
    use deltalake::kernel::{DataType, PrimitiveType};
    fn has_ntz(t: &DataType) -> bool {
        match t {
            DataType::Primitive(PrimitiveType::TimestampNtz) => true,
            DataType::Array(a) => has_ntz(a.element_type()),
            DataType::Map(m) => has_ntz(m.key_type()) || has_ntz(m.value_type()),
            DataType::Struct(s) => s.fields().any(|f| has_ntz(f.data_type())),
            _ => false,
        }
    }
    let needs = added.iter().any(|f| has_ntz(f.data_type()));
    let has = protocol
        .writer_features()
        .is_some_and(|f| f.iter().any(|x| x.to_string() == "timestampNtz"));
    if needs && !has {
        return Err(ServerError::Unimplemented(
            "add columns: a TIMESTAMP_NTZ column needs the Delta table feature timestampNtz, \
             which this table was created without; adding a table feature is not built"
                .into(),
        ));
    }
    Ok(())
}
