//! Memtable rows of small runs kept as their records ([`RecordRun`]) until the flush,
//! which parses every stretch of them into one Arrow batch ([`to_batches`]).
//!
//! Why: a stream that sends a record or two per request (IoT fleets: thousands of streams
//! at a few records a second each) made one Arrow batch per request — every column's
//! buffers allocated for one row, then (back then) concatenated with thousands of others at
//! the flush, then freed. In the 5 000-stream profile that was over a quarter of the pod's CPU per request.
//! The stream still parses every record when it takes it — that parse is the check whose
//! verdict the producer gets — but then clears its builder (keeping its capacity) and hands
//! the records over instead of a batch. The flush parses the same bytes with the same plan
//! into a builder of the same columns, so it reaches the same verdict; a record it refuses
//! anyway fails the flush (the rows stay in the memtable and the WAL), never drops a row.

use std::sync::Arc;

use arrow_array::RecordBatch;
use bytes::Bytes;
use sluice_wal::Lsn;
use sluice_zeroparser::{DecodeErrorKind, RecordBatchBuilder, TableSchema};

use super::added::{builder_for, AddedColumns};
use super::system_columns::{self, SystemValues};
use crate::error::{Result, ServerError};
use crate::journal::plan::RecordPlan;

/// Runs of at most this many records are kept as records (larger runs make a batch
/// whose per-column costs are shared by enough rows).
pub const MAX_RECORDS: usize = 32;

/// One small run's records as its stream took them, parsed into rows at the flush.
pub struct RecordRun {
    plan: Arc<RecordPlan>,
    /// The columns the stream's builder had (the table's at its open or last evolve).
    schema: Arc<TableSchema>,
    /// Each record with its offset in the stream.
    records: Vec<(i64, Bytes)>,
    stream_key: u64,
    ingested_at_micros: i64,
}

impl RecordRun {
    /// The records of stream `stream_key` that its builder for `schema` took under
    /// `plan`, logged now.
    pub fn new(
        plan: Arc<RecordPlan>,
        schema: Arc<TableSchema>,
        records: Vec<(i64, Bytes)>,
        stream_key: u64,
    ) -> RecordRun {
        RecordRun {
            plan,
            schema,
            records,
            stream_key,
            ingested_at_micros: system_columns::now_micros(),
        }
    }
}

/// Rows in a memtable: a finished batch, or a small run's records.
#[derive(Clone)]
pub enum Rows {
    /// Rows already in Arrow.
    Batch(RecordBatch),
    /// Records parsed at the flush.
    Records(Arc<RecordRun>),
}

impl From<RecordBatch> for Rows {
    fn from(batch: RecordBatch) -> Rows {
        Rows::Batch(batch)
    }
}

impl Rows {
    /// Number of rows.
    pub fn num_rows(&self) -> usize {
        match self {
            Rows::Batch(batch) => batch.num_rows(),
            Rows::Records(run) => run.records.len(),
        }
    }

    /// Bytes of memory held (a run: its records, twice over for the rows they become).
    pub fn memory_size(&self) -> usize {
        match self {
            Rows::Batch(batch) => batch.get_array_memory_size(),
            Rows::Records(run) => {
                let bytes: usize = run.records.iter().map(|(_, r)| r.len()).sum();
                std::mem::size_of::<RecordRun>() + 2 * bytes + 48 * run.records.len()
            }
        }
    }
}

/// The memtable's rows as batches, in their order: batches as they are, each stretch of
/// runs built for one schema parsed into one batch (more when a batch would outgrow
/// Arrow's 32-bit offsets), with the system columns when the table has them.
pub fn to_batches(rows: &[(Rows, Lsn)], added: AddedColumns) -> Result<Vec<RecordBatch>> {
    let mut out = Vec::new();
    let mut open: Option<Stretch> = None;
    for (rows, _) in rows {
        let run = match rows {
            Rows::Batch(batch) => {
                if let Some(mut stretch) = open.take() {
                    stretch.finish_batch(&mut out)?;
                }
                out.push(batch.clone());
                continue;
            }
            Rows::Records(run) => run,
        };
        let stretch = match &mut open {
            Some(stretch)
                if Arc::ptr_eq(&stretch.schema, &run.schema) || stretch.schema == run.schema =>
            {
                stretch
            }
            _ => {
                if let Some(mut stretch) = open.take() {
                    stretch.finish_batch(&mut out)?;
                }
                open.insert(Stretch::new(&run.schema, added)?)
            }
        };
        stretch.append(run, &mut out)?;
    }
    if let Some(mut stretch) = open {
        stretch.finish_batch(&mut out)?;
    }
    Ok(out)
}

/// Runs of one schema being parsed into one builder.
struct Stretch {
    schema: Arc<TableSchema>,
    builder: RecordBatchBuilder,
    /// The rows' system columns (None: the table has none).
    system: Option<SystemValues>,
}

impl Stretch {
    fn new(schema: &Arc<TableSchema>, added: AddedColumns) -> Result<Stretch> {
        Ok(Stretch {
            schema: schema.clone(),
            builder: builder_for(schema, added)
                .map_err(|e| ServerError::Internal(format!("a flush's builder: {e}")))?,
            system: added.system_columns.then(SystemValues::default),
        })
    }

    /// Parses `run`'s records into the builder; a batch that is full goes to `out` first.
    fn append(&mut self, run: &RecordRun, out: &mut Vec<RecordBatch>) -> Result<()> {
        let stream_id = self
            .system
            .as_ref()
            .map(|_| system_columns::stream_id(run.stream_key));
        for (offset, record) in &run.records {
            let mut parsed = run.plan.append_to(&mut self.builder, record);
            if matches!(&parsed, Some(Err(e)) if e.kind() == &DecodeErrorKind::BatchFull) {
                self.finish_batch(out)?;
                parsed = run.plan.append_to(&mut self.builder, record);
            }
            match parsed {
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    return Err(ServerError::Internal(format!(
                        "record at offset {offset} of a stream, accepted when it came, fails the flush's parse: {e}"
                    )))
                }
                None => {
                    return Err(ServerError::Internal(format!(
                        "record at offset {offset} of a stream has no plan that parses it"
                    )))
                }
            }
            if let (Some(system), Some(id)) = (&mut self.system, &stream_id) {
                system.push(id, *offset, run.ingested_at_micros);
            }
        }
        Ok(())
    }

    /// Moves the rows built so far into `out` as one batch.
    fn finish_batch(&mut self, out: &mut Vec<RecordBatch>) -> Result<()> {
        let batch = self.builder.finish();
        let batch = match &mut self.system {
            Some(system) => system_columns::extend_with(batch, std::mem::take(system))?,
            None => batch,
        };
        if batch.num_rows() > 0 {
            out.push(batch);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use arrow_array::{Int64Array, RecordBatch, StringArray};
    use bytes::Bytes;
    use sluice_zeroparser::TableSchema;

    use super::{to_batches, RecordRun, Rows};
    use crate::journal::plan::RecordPlan;
    use crate::sink::added::AddedColumns;

    fn schema() -> Arc<TableSchema> {
        Arc::new(TableSchema::parse("id BIGINT NOT NULL, name STRING").expect("schema"))
    }

    /// A JSON run of stream `key` with ids `ids` at offsets from `first_offset`.
    fn run(schema: &Arc<TableSchema>, key: u64, first_offset: i64, ids: &[i64]) -> Rows {
        let records = ids
            .iter()
            .zip(first_offset..)
            .map(|(id, offset)| {
                (
                    offset,
                    Bytes::from(format!(r#"{{"id":{id},"name":"n{id}"}}"#)),
                )
            })
            .collect();
        Rows::Records(Arc::new(RecordRun::new(
            Arc::new(RecordPlan::Json),
            schema.clone(),
            records,
            key,
        )))
    }

    fn batch(schema: &Arc<TableSchema>, ids: &[i64]) -> Rows {
        let names: Vec<String> = ids.iter().map(|id| format!("n{id}")).collect();
        Rows::Batch(
            RecordBatch::try_new(
                schema.arrow_schema(),
                vec![
                    Arc::new(Int64Array::from(ids.to_vec())),
                    Arc::new(StringArray::from(names)),
                ],
            )
            .expect("batch"),
        )
    }

    fn ids(batches: &[RecordBatch]) -> Vec<Vec<i64>> {
        batches
            .iter()
            .map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect()
    }

    #[test]
    fn runs_between_batches_become_one_batch_each_stretch_in_order() {
        let s = schema();
        let rows = vec![
            (run(&s, 1, 0, &[1]), 10),
            (run(&s, 2, 0, &[2, 3]), 20),
            (batch(&s, &[4, 5]), 30),
            (run(&s, 1, 1, &[6]), 40),
        ];
        let batches = to_batches(&rows, AddedColumns::default()).expect("parsed");
        assert_eq!(ids(&batches), vec![vec![1, 2, 3], vec![4, 5], vec![6]]);
        assert_eq!(batches[0].column(1).as_string::<i32>().value(2), "n3");
        assert_eq!(rows.iter().map(|(r, _)| r.num_rows()).sum::<usize>(), 6);
    }

    #[test]
    fn runs_of_another_schema_start_another_batch() {
        let (old, new) = (schema(), schema());
        let wider = Arc::new(
            TableSchema::parse("id BIGINT NOT NULL, name STRING, extra INT").expect("schema"),
        );
        let rows = vec![
            (run(&old, 1, 0, &[1]), 10),
            (run(&new, 2, 0, &[2]), 20),
            (run(&wider, 3, 0, &[3]), 30),
        ];
        let batches = to_batches(&rows, AddedColumns::default()).expect("parsed");
        // Equal schemas share a batch even as two allocations; the wider one does not.
        assert_eq!(ids(&batches), vec![vec![1, 2], vec![3]]);
        assert_eq!(batches[1].num_columns(), 3);
    }

    #[test]
    fn system_columns_name_each_rows_own_stream_and_offset() {
        let s = schema();
        let rows = vec![(run(&s, 7, 4, &[1, 2]), 10), (run(&s, 8, 9, &[3]), 20)];
        let added = AddedColumns {
            rescued_data: true,
            system_columns: true,
        };
        let batches = to_batches(&rows, added).expect("parsed");
        let b = &batches[0];
        let schema = b.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names,
            vec![
                "id",
                "name",
                "_rescued_data",
                "_sluice_stream_id",
                "_sluice_offset",
                "_sluice_ingested_at"
            ]
        );
        let streams = b.column(3).as_string::<i32>();
        let (a, c) = (
            crate::sink::system_columns::stream_id(7),
            crate::sink::system_columns::stream_id(8),
        );
        assert_eq!(
            (streams.value(0), streams.value(1), streams.value(2)),
            (a.as_str(), a.as_str(), c.as_str())
        );
        assert_eq!(
            b.column(4).as_primitive::<Int64Type>().values().to_vec(),
            vec![4, 5, 9]
        );
    }

    #[test]
    fn a_record_the_parse_refuses_fails_the_whole_conversion() {
        let s = schema();
        let bad = Rows::Records(Arc::new(RecordRun::new(
            Arc::new(RecordPlan::Json),
            s.clone(),
            vec![(3, Bytes::from_static(b"{\"name\":\"no id\"}"))],
            1,
        )));
        let rows = vec![(run(&s, 1, 0, &[1]), 10), (bad, 20)];
        let err = to_batches(&rows, AddedColumns::default()).expect_err("refused");
        assert!(err.to_string().contains("offset 3"), "{err}");
    }
}
