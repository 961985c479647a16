//! OTLP export frames at start-up replay: the logged request transcoded again with the
//! offsets and arrival time it was logged with, so the replayed rows are the acked ones.

use arrow_array::RecordBatch;

use super::request::Request;
use super::schema::Signal;
use crate::error::Result;
use crate::journal::frames::OtlpFrame;
use crate::sink::TableSink;

/// The rows of an OTLP WAL frame for `sink` at replay (None: its items no longer fit, or
/// the table is no longer of the frame's signal; logged).
pub fn replay_rows(frame: &OtlpFrame<'_>, sink: &TableSink) -> Result<Option<RecordBatch>> {
    let Some(signal) = Signal::from_code(frame.signal) else {
        tracing::error!(
            table = sink.name(),
            "replay: OTLP frame of unknown signal {}",
            frame.signal
        );
        return Ok(None);
    };
    if Signal::of_table(&sink.schema()) != Some(signal) {
        tracing::error!(
            table = sink.name(),
            "replay: the table is no longer an OTLP {} table",
            signal.name()
        );
        return Ok(None);
    }
    let rows = Request::decode_proto(signal, frame.request).and_then(|request| {
        request.transcode(
            sink.batch_builder()
                .map_err(|e| e.to_string())?
                .arrow_schema(),
            frame.stream_key,
            frame.first_offset,
            frame.received_at_us,
        )
    });
    match rows {
        Ok(rows) => Ok(Some(sink.with_system_columns(
            rows.batch,
            frame.stream_key,
            rows.offsets.into_iter(),
        )?)),
        Err(e) => {
            tracing::error!(table = sink.name(), "replay: OTLP frame rejected: {e}");
            Ok(None)
        }
    }
}
