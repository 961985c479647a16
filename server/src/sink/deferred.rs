//! Memtable rows kept as their records ([`RecordRun`]) until the flush, which parses every
//! stretch of them into batches of [`WRITE_ROWS`] rows, one at a time as the Parquet writer
//! takes them ([`batches`]). Two kinds of runs go this way:
//!
//! - A run of at most [`MAX_RECORDS`] records, whatever its format. A stream that sends a
//!   record or two per request (IoT fleets: thousands of streams at a few records a second
//!   each) made one Arrow batch per request — every column's buffers allocated for one row,
//!   then concatenated with thousands of others at the flush, then freed. In the 5 000-stream
//!   profile that was over a quarter of the pod's CPU per request.
//! - Every run of a stream whose records the builder checks without writing a column
//!   (protobuf into a flat table: `RecordParser::checks_cheaply`). A batch per run of ~120
//!   200-byte records cost the stream its `finish` and the flush the concatenation of those
//!   batches into groups and their frees (together about 9 % of the pod's perf samples).
//!
//! The stream still checks every record when it takes it — that check is the verdict the
//! producer gets — but then clears its builder (keeping its capacity) and hands the records
//! over instead of a batch. The flush parses the same bytes with the same plan into a
//! builder of the same columns, so it reaches the same verdict; a record it refuses anyway
//! fails the flush (the rows stay in the memtable and the WAL), never drops a row. Until the
//! flush's files are committed the records are kept, not their batches: a hand-off whose
//! files must be written again parses them again.

use std::sync::Arc;

use arrow_array::RecordBatch;
use bytes::Bytes;
use sluice_wal::Lsn;
use sluice_zeroparser::{DecodeErrorKind, RecordBatchBuilder, TableSchema};

use super::added::{builder_for, AddedColumns};
use super::commit::{WRITE_BYTES, WRITE_ROWS};
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

    /// Bytes of memory held (a run: its records and their list; the flush builds their rows
    /// one batch of at most [`WRITE_BYTES`] of records at a time, see [`batches`]).
    pub fn memory_size(&self) -> usize {
        match self {
            Rows::Batch(batch) => batch.get_array_memory_size(),
            Rows::Records(run) => {
                let bytes: usize = run.records.iter().map(|(_, r)| r.len()).sum();
                std::mem::size_of::<RecordRun>() + bytes + 48 * run.records.len()
            }
        }
    }
}

/// The memtable's rows as batches, in their order, made one at a time as the writer takes
/// them: a batch as it is; each stretch of runs built for one schema parsed into batches of
/// [`WRITE_ROWS`] rows or [`WRITE_BYTES`] of records (fewer at the stretch's end, or when a
/// batch would outgrow Arrow's 32-bit offsets), with the system columns when the table has
/// them. Only one such batch is built at a time, beside the records it comes from.
pub fn batches(rows: &[(Rows, Lsn)], added: AddedColumns) -> Batches<'_> {
    Batches {
        rows,
        next: 0,
        record: 0,
        open: None,
        added,
    }
}

/// The iterator of [`batches`].
pub struct Batches<'a> {
    rows: &'a [(Rows, Lsn)],
    /// The memtable entry being turned into batches.
    next: usize,
    /// The next record of that entry when it is a run.
    record: usize,
    open: Option<Stretch>,
    added: AddedColumns,
}

impl Iterator for Batches<'_> {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Result<RecordBatch>> {
        self.next_batch().transpose()
    }
}

impl Batches<'_> {
    fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        loop {
            let Some((rows, _)) = self.rows.get(self.next) else {
                return self.close();
            };
            let run = match rows {
                Rows::Batch(batch) => {
                    if let Some(stretch) = self.close()? {
                        return Ok(Some(stretch));
                    }
                    self.next += 1;
                    return Ok(Some(batch.clone()));
                }
                Rows::Records(run) => run,
            };
            if self.open.as_ref().is_some_and(|open| {
                !Arc::ptr_eq(&open.schema, &run.schema) && open.schema != run.schema
            }) {
                if let Some(stretch) = self.close()? {
                    return Ok(Some(stretch));
                }
            }
            let stretch = match &mut self.open {
                Some(stretch) => stretch,
                None => self.open.insert(Stretch::new(&run.schema, self.added)?),
            };
            while let Some((offset, record)) = run.records.get(self.record) {
                if !stretch.append(run, *offset, record)? {
                    // The batch is full before this record: it goes first.
                    return stretch.finish_batch().map(Some);
                }
                self.record += 1;
                if stretch.builder.len() >= WRITE_ROWS || stretch.record_bytes >= WRITE_BYTES {
                    return stretch.finish_batch().map(Some);
                }
            }
            (self.next, self.record) = (self.next + 1, 0);
        }
    }

    /// Finishes the open stretch: its rows as one batch, `None` when there is none.
    fn close(&mut self) -> Result<Option<RecordBatch>> {
        match self.open.take() {
            Some(mut stretch) if !stretch.builder.is_empty() => stretch.finish_batch().map(Some),
            _ => Ok(None),
        }
    }
}

/// Runs of one schema being parsed into one builder.
struct Stretch {
    schema: Arc<TableSchema>,
    builder: RecordBatchBuilder,
    /// The rows' system columns (None: the table has none).
    system: Option<SystemValues>,
    /// The bytes of the records in the builder.
    record_bytes: usize,
    /// The last run's stream key and its `_sluice_stream_id` (made once per run, not row).
    stream_id: Option<(u64, String)>,
}

impl Stretch {
    fn new(schema: &Arc<TableSchema>, added: AddedColumns) -> Result<Stretch> {
        Ok(Stretch {
            schema: schema.clone(),
            builder: builder_for(schema, added)
                .map_err(|e| ServerError::Internal(format!("a flush's builder: {e}")))?,
            system: added.system_columns.then(SystemValues::default),
            record_bytes: 0,
            stream_id: None,
        })
    }

    /// Parses `record` (at `offset` of `run`'s stream) into the builder; false, with
    /// nothing appended, when the builder is full and must be finished first.
    fn append(&mut self, run: &RecordRun, offset: i64, record: &[u8]) -> Result<bool> {
        match run.plan.append_to(&mut self.builder, record) {
            Some(Ok(())) => {}
            Some(Err(e)) if e.kind() == &DecodeErrorKind::BatchFull && !self.builder.is_empty() => {
                return Ok(false)
            }
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
        if let Some(system) = &mut self.system {
            let id = match &self.stream_id {
                Some((key, id)) if *key == run.stream_key => id,
                _ => {
                    let id = system_columns::stream_id(run.stream_key);
                    &self.stream_id.insert((run.stream_key, id)).1
                }
            };
            system.push(id, offset, run.ingested_at_micros);
        }
        self.record_bytes += record.len();
        Ok(true)
    }

    /// The rows built so far as one batch; the builder starts again empty.
    fn finish_batch(&mut self) -> Result<RecordBatch> {
        let batch = self.builder.finish();
        self.record_bytes = 0;
        match &mut self.system {
            Some(system) => system_columns::extend_with(batch, std::mem::take(system)),
            None => Ok(batch),
        }
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

    use super::{batches, RecordRun, Rows};
    use crate::error::Result;
    use crate::journal::plan::RecordPlan;
    use crate::sink::added::AddedColumns;
    use crate::sink::commit::WRITE_ROWS;

    fn to_batches(
        rows: &[(Rows, sluice_wal::Lsn)],
        added: AddedColumns,
    ) -> Result<Vec<RecordBatch>> {
        batches(rows, added).collect()
    }

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
    fn a_long_stretch_is_cut_every_write_rows_rows_even_inside_a_run() {
        let s = schema();
        // Three runs of two streams, 1.5 groups each (4.5 in all): cuts fall inside runs.
        let per_run = WRITE_ROWS * 3 / 2;
        let ids: Vec<i64> = (0..3 * per_run as i64).collect();
        let rows: Vec<_> = ids
            .chunks(per_run)
            .enumerate()
            .map(|(i, chunk)| (run(&s, i as u64 % 2, 0, chunk), 10 * i as u64))
            .chain([(batch(&s, &[-1, -2]), 40)])
            .collect();
        let added = AddedColumns {
            rescued_data: false,
            system_columns: true,
        };
        let out = to_batches(&rows, added).expect("parsed");
        let sizes: Vec<usize> = out.iter().map(|b| b.num_rows()).collect();
        assert_eq!(
            sizes,
            vec![
                WRITE_ROWS,
                WRITE_ROWS,
                WRITE_ROWS,
                WRITE_ROWS,
                WRITE_ROWS / 2,
                2
            ],
            "groups of WRITE_ROWS, the stretch's rest, then the batch"
        );
        let mut want = ids.clone();
        want.extend([-1, -2]);
        let got: Vec<i64> = out
            .iter()
            .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect();
        assert_eq!(got, want);
        // The second batch holds the first run's (stream 0) last half and the second run's
        // (stream 1) first half: each row names its own stream and offset.
        let second = &out[1];
        let (streams, offsets) = (
            second
                .column_by_name("_sluice_stream_id")
                .expect("stream ids")
                .as_string::<i32>(),
            second
                .column_by_name("_sluice_offset")
                .expect("offsets")
                .as_primitive::<Int64Type>(),
        );
        let (zero, one) = (
            crate::sink::system_columns::stream_id(0),
            crate::sink::system_columns::stream_id(1),
        );
        let half = WRITE_ROWS / 2;
        assert_eq!(
            (streams.value(0), offsets.value(0)),
            (zero.as_str(), WRITE_ROWS as i64)
        );
        assert_eq!(
            (streams.value(half - 1), offsets.value(half - 1)),
            (zero.as_str(), (per_run - 1) as i64)
        );
        assert_eq!(
            (streams.value(half), offsets.value(half)),
            (one.as_str(), 0)
        );
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
