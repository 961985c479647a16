//! Log records into rows of a logs table (one row per record; the body, any `AnyValue`,
//! as VARIANT). `time` is the record's time, else its observed time, else the request's
//! arrival. A record is refused — counted in `rejected_log_records`, the rest ingested —
//! when its trace id is neither empty nor 16 bytes, its span id neither empty nor 8, or a
//! time does not fit BIGINT.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::logs::v1::LogRecord;

use super::rows::{hex_id, signed, ResourceCtx, Rows, ScopeCtx, COMMON_COLUMNS};
use super::variant;

/// Columns of a logs table.
pub const COLUMNS: usize = COMMON_COLUMNS + 11;

/// Log records in `request`.
pub fn count(request: &ExportLogsServiceRequest) -> usize {
    request
        .resource_logs
        .iter()
        .flat_map(|r| &r.scope_logs)
        .map(|s| s.log_records.len())
        .sum()
}

/// Writes every log record of `request` that fits into `rows`.
pub fn transcode(request: &ExportLogsServiceRequest, rows: &mut Rows) {
    let mut index = 0;
    for rl in &request.resource_logs {
        let res = ResourceCtx::new(rl.resource.as_ref(), &rl.schema_url, &mut rows.buf);
        for sl in &rl.scope_logs {
            let scope = ScopeCtx::new(sl.scope.as_ref(), &sl.schema_url, &mut rows.buf);
            for record in &sl.log_records {
                let offset = rows.next_item();
                match Checked::of(record) {
                    Ok(checked) => write(rows, offset, record, &checked, &res, &scope),
                    Err(why) => rows.reject("log record", index, why),
                }
                index += 1;
            }
        }
    }
}

struct Checked {
    time: i64,
    observed: i64,
    trace_id: Option<String>,
    span_id: Option<String>,
}

impl Checked {
    fn of(record: &LogRecord) -> Result<Checked, String> {
        Ok(Checked {
            time: signed(record.time_unix_nano, "time_unix_nano")?,
            observed: signed(record.observed_time_unix_nano, "observed_time_unix_nano")?,
            trace_id: hex_id(&record.trace_id, 16, "trace_id", false)?,
            span_id: hex_id(&record.span_id, 8, "span_id", false)?,
        })
    }
}

fn write(
    rows: &mut Rows,
    offset: i64,
    record: &LogRecord,
    checked: &Checked,
    res: &ResourceCtx,
    scope: &ScopeCtx,
) {
    let time = if checked.time > 0 {
        checked.time
    } else {
        checked.observed
    };
    rows.begin(offset, time, res, scope);
    let buf = &mut rows.buf;
    let c = &mut rows.cols[COMMON_COLUMNS..];
    c[0].i64(Some(checked.time));
    c[1].i64(Some(checked.observed));
    c[2].i32(Some(record.severity_number));
    c[3].str(Some(&record.severity_text));
    match &record.body {
        Some(body) => c[4].str(Some(variant::any_value(buf, body))),
        None => c[4].null(),
    }
    c[5].str(Some(variant::attributes(buf, &record.attributes)));
    c[6].i64(Some(record.dropped_attributes_count as i64));
    c[7].i64(Some(record.flags as i64));
    c[8].str(checked.trace_id.as_deref());
    c[9].str(checked.span_id.as_deref());
    c[10].str(Some(&record.event_name));
}
