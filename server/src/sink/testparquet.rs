//! Test helper: the first column of a Parquet file read back as `i64`s, in file order.

use arrow_array::Int64Array;
use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use deltalake::parquet::file::reader::ChunkReader;

/// The first column's values of every row of the Parquet file `file`, in order.
pub(crate) fn first_column_ids<R: ChunkReader + 'static>(file: R) -> Vec<i64> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .expect("parquet")
        .build()
        .expect("reader");
    let mut ids = Vec::new();
    for batch in reader {
        let batch = batch.expect("batch");
        let column = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("ids");
        ids.extend(column.values().iter().copied());
    }
    ids
}
