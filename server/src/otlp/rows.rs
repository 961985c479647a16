//! The rows of one OTLP request: the table's columns ([`Col`]), the columns every OTLP
//! table starts with (record id, time, date, service name, resource, scope), the offsets of
//! the accepted items and the count and first message of the rejected ones. Item `i` of a
//! request (in request order, rejected ones included) has offset `first_offset + i`; its
//! record id is derived from the pod's OTLP stream key and that offset, so a replayed
//! request gives the same ids.

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::resource::v1::Resource;

use super::columns::Col;
use super::variant;

/// Columns every OTLP table starts with; a signal's own columns follow.
pub const COMMON_COLUMNS: usize = 8;

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// The resource of a group of items, its JSON written once.
pub struct ResourceCtx {
    service_name: Option<String>,
    attributes: Option<String>,
    dropped: i64,
    schema_url: String,
}

impl ResourceCtx {
    /// The resource `resource` with schema URL `schema_url`.
    pub fn new(resource: Option<&Resource>, schema_url: &str, buf: &mut Vec<u8>) -> ResourceCtx {
        let service_name = resource.and_then(|r| {
            r.attributes
                .iter()
                .rev()
                .find(|kv| kv.key == "service.name")
                .and_then(
                    |kv| match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(Value::StringValue(s)) => Some(s.clone()),
                        _ => None,
                    },
                )
        });
        ResourceCtx {
            service_name,
            attributes: resource.map(|r| variant::attributes(buf, &r.attributes).to_string()),
            dropped: resource.map_or(0, |r| r.dropped_attributes_count as i64),
            schema_url: schema_url.to_string(),
        }
    }
}

/// The instrumentation scope of a group of items, its JSON written once.
pub struct ScopeCtx {
    scope: Option<(String, String, String, i64)>,
    schema_url: String,
}

impl ScopeCtx {
    /// The scope `scope` with schema URL `schema_url`.
    pub fn new(scope: Option<&InstrumentationScope>, schema_url: &str, buf: &mut Vec<u8>) -> Self {
        ScopeCtx {
            scope: scope.map(|s| {
                (
                    s.name.clone(),
                    s.version.clone(),
                    variant::attributes(buf, &s.attributes).to_string(),
                    s.dropped_attributes_count as i64,
                )
            }),
            schema_url: schema_url.to_string(),
        }
    }
}

/// The rows being built from one request.
pub struct Rows {
    schema: SchemaRef,
    /// The table's columns, in order.
    pub cols: Vec<Col>,
    /// Columns the signal writes (the table's own); any after them (`_rescued_data`) are
    /// NULL.
    own: usize,
    stream_key: u64,
    next_offset: i64,
    received_at_us: i64,
    offsets: Vec<i64>,
    rejected: i64,
    first_error: Option<String>,
    /// Scratch buffer for JSON text.
    pub buf: Vec<u8>,
}

/// What a request gave.
pub struct Transcoded {
    /// The accepted items' rows (without system columns).
    pub batch: RecordBatch,
    /// The offset of each row.
    pub offsets: Vec<i64>,
    /// Items refused.
    pub rejected: i64,
    /// Why the first refused item was refused (with its position), if any was.
    pub message: Option<String>,
}

impl Rows {
    /// Rows of `schema` (the sink's batch schema) for a signal with `own` columns.
    pub fn new(
        schema: SchemaRef,
        own: usize,
        stream_key: u64,
        first_offset: i64,
        received_at_us: i64,
    ) -> Result<Rows, String> {
        let cols = schema
            .fields()
            .iter()
            .map(|f| {
                Col::new(f.data_type())
                    .ok_or_else(|| format!("column `{}` has a type OTLP never writes", f.name()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Rows {
            schema,
            cols,
            own,
            stream_key,
            next_offset: first_offset,
            received_at_us,
            offsets: Vec::new(),
            rejected: 0,
            first_error: None,
            buf: Vec::new(),
        })
    }

    /// Takes the next item's offset.
    pub fn next_item(&mut self) -> i64 {
        let offset = self.next_offset;
        self.next_offset += 1;
        offset
    }

    /// Counts the item at `offset` as rejected for `why`.
    pub fn reject(&mut self, what: &str, index: usize, why: String) {
        self.rejected += 1;
        if self.first_error.is_none() {
            self.first_error = Some(format!("{what} {index}: {why}"));
        }
    }

    /// Starts the row of the item at `offset` whose time is `time_nanos` (0: the request's
    /// arrival): writes the common columns. The caller then writes every own column.
    pub fn begin(&mut self, offset: i64, time_nanos: i64, res: &ResourceCtx, scope: &ScopeCtx) {
        let micros = if time_nanos > 0 {
            time_nanos / 1000
        } else {
            self.received_at_us
        };
        let mut id = [0u8; uuid::fmt::Hyphenated::LENGTH];
        let id = uuid::Uuid::from_u64_pair(self.stream_key, offset as u64)
            .hyphenated()
            .encode_lower(&mut id);
        let c = &mut self.cols;
        c[0].str(Some(id));
        c[1].i64(Some(micros));
        c[2].i32(Some(micros.div_euclid(MICROS_PER_DAY) as i32));
        c[3].str(res.service_name.as_deref());
        match &res.attributes {
            Some(attrs) => {
                c[4].child(0).str(Some(attrs));
                c[4].child(1).i64(Some(res.dropped));
                c[4].close();
            }
            None => c[4].null(),
        }
        c[5].str(Some(&res.schema_url));
        match &scope.scope {
            Some((name, version, attrs, dropped)) => {
                let s = &mut c[6];
                s.child(0).str(Some(name));
                s.child(1).str(Some(version));
                s.child(2).str(Some(attrs));
                s.child(3).i64(Some(*dropped));
                s.close();
            }
            None => c[6].null(),
        }
        c[7].str(Some(&scope.schema_url));
        for extra in &mut self.cols[self.own..] {
            extra.null();
        }
        self.offsets.push(offset);
    }

    /// The batch of the accepted rows and the counts.
    pub fn finish(mut self) -> Result<Transcoded, String> {
        let columns = self
            .cols
            .iter_mut()
            .map(Col::finish)
            .collect::<Result<Vec<_>, _>>()?;
        let batch = RecordBatch::try_new(self.schema, columns).map_err(|e| e.to_string())?;
        Ok(Transcoded {
            batch,
            offsets: self.offsets,
            rejected: self.rejected,
            message: self.first_error,
        })
    }
}

/// A nanosecond time or count that must fit BIGINT.
pub fn signed(value: u64, what: &str) -> Result<i64, String> {
    i64::try_from(value).map_err(|_| format!("{what} {value} does not fit BIGINT"))
}

/// An id of `len` bytes as lowercase hex (empty: None; `required`: it must be there).
pub fn hex_id(
    bytes: &[u8],
    len: usize,
    what: &str,
    required: bool,
) -> Result<Option<String>, String> {
    if bytes.is_empty() && !required {
        return Ok(None);
    }
    if bytes.len() != len {
        return Err(format!("{what} has {} bytes, expected {len}", bytes.len()));
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(len * 2);
    for b in bytes {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
    Ok(Some(out))
}
