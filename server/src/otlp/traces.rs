//! Spans into rows of a traces table (one row per span; events and links as ARRAYs of
//! STRUCTs). A span is refused — counted in `rejected_spans`, the rest of the request
//! ingested — when its trace id is not 16 bytes, its span id not 8, its parent span id
//! neither empty nor 8, a link's ids not so, or a time or count does not fit BIGINT.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::Span;

use super::rows::{hex_id, signed, ResourceCtx, Rows, ScopeCtx, COMMON_COLUMNS};
use super::variant;

/// Columns of a traces table.
pub const COLUMNS: usize = COMMON_COLUMNS + 16;

/// Spans in `request`.
pub fn count(request: &ExportTraceServiceRequest) -> usize {
    request
        .resource_spans
        .iter()
        .flat_map(|r| &r.scope_spans)
        .map(|s| s.spans.len())
        .sum()
}

/// Writes every span of `request` that fits into `rows`.
pub fn transcode(request: &ExportTraceServiceRequest, rows: &mut Rows) {
    let mut index = 0;
    for rs in &request.resource_spans {
        let res = ResourceCtx::new(rs.resource.as_ref(), &rs.schema_url, &mut rows.buf);
        for ss in &rs.scope_spans {
            let scope = ScopeCtx::new(ss.scope.as_ref(), &ss.schema_url, &mut rows.buf);
            for span in &ss.spans {
                let offset = rows.next_item();
                match Checked::of(span) {
                    Ok(checked) => write(rows, offset, span, &checked, &res, &scope),
                    Err(why) => rows.reject("span", index, why),
                }
                index += 1;
            }
        }
    }
}

/// What a span needs converted before it can be written.
struct Checked {
    trace_id: String,
    span_id: String,
    parent: Option<String>,
    start: i64,
    end: i64,
    events: Vec<i64>,
    links: Vec<(String, String)>,
}

impl Checked {
    fn of(span: &Span) -> Result<Checked, String> {
        let events = span
            .events
            .iter()
            .map(|e| signed(e.time_unix_nano, "event time_unix_nano"))
            .collect::<Result<_, _>>()?;
        let links = span
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| {
                Ok((
                    hex_id(&l.trace_id, 16, &format!("link {i} trace_id"), true)?
                        .unwrap_or_default(),
                    hex_id(&l.span_id, 8, &format!("link {i} span_id"), true)?.unwrap_or_default(),
                ))
            })
            .collect::<Result<_, String>>()?;
        Ok(Checked {
            trace_id: hex_id(&span.trace_id, 16, "trace_id", true)?.unwrap_or_default(),
            span_id: hex_id(&span.span_id, 8, "span_id", true)?.unwrap_or_default(),
            parent: hex_id(&span.parent_span_id, 8, "parent_span_id", false)?,
            start: signed(span.start_time_unix_nano, "start_time_unix_nano")?,
            end: signed(span.end_time_unix_nano, "end_time_unix_nano")?,
            events,
            links,
        })
    }
}

fn write(
    rows: &mut Rows,
    offset: i64,
    span: &Span,
    checked: &Checked,
    res: &ResourceCtx,
    scope: &ScopeCtx,
) {
    rows.begin(offset, checked.start, res, scope);
    let buf = &mut rows.buf;
    let c = &mut rows.cols[COMMON_COLUMNS..];
    c[0].str(Some(&checked.trace_id));
    c[1].str(Some(&checked.span_id));
    c[2].str(Some(&span.trace_state));
    c[3].str(checked.parent.as_deref());
    c[4].i64(Some(span.flags as i64));
    c[5].str(Some(&span.name));
    c[6].str(Some(&kind_name(span.kind)));
    c[7].i64(Some(checked.start));
    c[8].i64(Some(checked.end));
    c[9].str(Some(variant::attributes(buf, &span.attributes)));
    c[10].i64(Some(span.dropped_attributes_count as i64));
    let events = c[11].child(0);
    for (event, time) in span.events.iter().zip(&checked.events) {
        events.child(0).i64(Some(*time));
        events.child(1).str(Some(&event.name));
        events
            .child(2)
            .str(Some(variant::attributes(buf, &event.attributes)));
        events
            .child(3)
            .i64(Some(event.dropped_attributes_count as i64));
        events.close();
    }
    c[11].close();
    c[12].i64(Some(span.dropped_events_count as i64));
    let links = c[13].child(0);
    for (link, (trace_id, span_id)) in span.links.iter().zip(&checked.links) {
        links.child(0).str(Some(trace_id));
        links.child(1).str(Some(span_id));
        links.child(2).str(Some(&link.trace_state));
        links
            .child(3)
            .str(Some(variant::attributes(buf, &link.attributes)));
        links
            .child(4)
            .i64(Some(link.dropped_attributes_count as i64));
        links.child(5).i64(Some(link.flags as i64));
        links.close();
    }
    c[13].close();
    c[14].i64(Some(span.dropped_links_count as i64));
    match &span.status {
        Some(status) => {
            c[15].child(0).str(Some(&status.message));
            c[15].child(1).str(Some(&status_name(status.code)));
            c[15].close();
        }
        None => c[15].null(),
    }
}

fn kind_name(kind: i32) -> String {
    SpanKind::try_from(kind)
        .map(|k| k.as_str_name().to_string())
        .unwrap_or_else(|_| kind.to_string())
}

fn status_name(code: i32) -> String {
    StatusCode::try_from(code)
        .map(|k| k.as_str_name().to_string())
        .unwrap_or_else(|_| code.to_string())
}
