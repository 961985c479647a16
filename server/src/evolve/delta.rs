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

/// Refuses the alter when the Delta columns of `table`'s loaded snapshot
/// are no longer `expected` (the ones it was planned on).
pub(super) fn check_stale(table: &DeltaTable, name: &str, expected: &[StructField]) -> Result<()> {
    if delta_schema(table)? != expected {
        return Err(ServerError::FailedPrecondition(format!(
            "alter of {name}: the Delta table's schema at version {} is not the one the \
             catalog holds (another alter changed it meanwhile); describe the table again \
             and retry",
            table.snapshot()?.version()
        )));
    }
    Ok(())
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
        check_stale(table, name, expected)?;
        let snapshot = table.snapshot()?;
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

/// Refuses new (or retyped) columns that need a table feature the protocol lacks
/// (TIMESTAMP_NTZ needs `timestampNtz`; a protocol change is not built).
pub(super) fn check_features(
    protocol: &deltalake::kernel::Protocol,
    added: &[StructField],
) -> Result<()> {
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

#[cfg(test)]
mod tests {
    //! The writer limit behind `evolve::plan::WRITER_LIMIT`, measured: a table
    //! whose log enables `typeWidening`, or column mapping (mode name), takes
    //! no append from deltalake-core 1.1.3. The feature is enabled by a
    //! hand-written commit, as a writer that has it would write it. If a
    //! deltalake upgrade lifts a limit, its test fails: then the alter can be
    //! built.

    use std::sync::Arc;

    use arrow_array::{Int64Array, RecordBatch};
    use deltalake::DeltaTable;

    use crate::sink::{commit_append, AppendCommit};
    use crate::warehouse::{S3Settings, Warehouse};

    /// A table `id BIGINT` with `actions` committed as version 1; the error
    /// of appending a row to it.
    async fn append_error(actions: &[serde_json::Value]) -> String {
        let dir = tempfile::tempdir().expect("tempdir");
        let warehouse =
            Warehouse::parse(None, dir.path(), &S3Settings::default()).expect("warehouse");
        let url = warehouse.table_url("main", "s", "t").expect("url");
        let created = warehouse.create_for_test(&url, "id BIGINT").await;
        let meta = created.snapshot().expect("snapshot").metadata().clone();
        let log = url.to_file_path().expect("local").join("_delta_log");
        let mut lines = String::new();
        for action in actions {
            let mut action = action.clone();
            if let Some(m) = action.get_mut("metaData") {
                m["id"] = serde_json::json!(meta.id());
            }
            lines.push_str(&format!("{action}\n"));
        }
        std::fs::write(log.join(format!("{:020}.json", 1)), lines).expect("commit 1");
        let mut table: DeltaTable = warehouse.open(&url).await.expect("open");
        let schema = Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
            "id",
            arrow_schema::DataType::Int64,
            true,
        )]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1]))]).expect("batch");
        let commit = AppendCommit {
            app_id: "w",
            txn_version: 1,
            max_retries: 0,
            streams: &[],
        };
        match commit_append(&mut table, batch, commit).await {
            Ok(done) => panic!("the append landed at version {}", done.version),
            Err(e) => e.to_string(),
        }
    }

    fn schema(metadata: serde_json::Value) -> String {
        serde_json::json!({"type": "struct", "fields": [
            {"name": "id", "type": "long", "nullable": true, "metadata": metadata}
        ]})
        .to_string()
    }

    #[tokio::test]
    async fn deltalake_cannot_append_to_a_table_with_type_widening() {
        let e = append_error(&[
            serde_json::json!({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                "readerFeatures": ["typeWidening"], "writerFeatures": ["typeWidening"]}}),
            serde_json::json!({"metaData": {"format": {"provider": "parquet", "options": {}},
                "schemaString": schema(serde_json::json!({})), "partitionColumns": [],
                "configuration": {"delta.enableTypeWidening": "true"}, "createdTime": 0}}),
        ])
        .await;
        assert!(e.contains("ypeWidening"), "{e}");
    }

    #[tokio::test]
    async fn deltalake_cannot_append_to_a_column_mapped_table() {
        let e = append_error(&[
            serde_json::json!({"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}}),
            serde_json::json!({"metaData": {"format": {"provider": "parquet", "options": {}},
                "schemaString": schema(serde_json::json!({"delta.columnMapping.id": 1,
                    "delta.columnMapping.physicalName": "col-1"})),
                "partitionColumns": [],
                "configuration": {"delta.columnMapping.mode": "name",
                    "delta.columnMapping.maxColumnId": "1"}, "createdTime": 0}}),
        ])
        .await;
        assert!(e.to_ascii_lowercase().contains("column mapping"), "{e}");
    }
}
