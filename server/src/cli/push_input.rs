//! What `sluice push` reads: JSON lines, CSV with a header row, Parquet, or Avro object
//! container files, from a file or standard input; each gives JSON object texts in input order (or why a record is bad)
//! and its position in the input, for the progress line.
//!
//! CSV fields become JSON values by their text: empty → null, an integer → a number, a
//! decimal number → a number, `true`/`false` → a boolean, anything else → a string.
//! Parquet rows are written as JSON by `arrow-json`. Avro records (the file's top-level
//! schema must be a record) become JSON objects through `apache-avro`'s conversion: unions
//! as their branch's value, enums as their symbol, bytes and fixed as arrays of numbers,
//! logical dates and times as their underlying numbers.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use anyhow::{bail, Context};
use serde_json::{Map, Value};

/// The input formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormat {
    /// One JSON object per line (`.jsonl`, `.ndjson`, `.json`).
    Jsonl,
    /// Comma-separated values with a header row (`.csv`).
    Csv,
    /// Apache Parquet (`.parquet`, `.pq`).
    Parquet,
    /// Avro object container files (`.avro`).
    Avro,
}

impl InputFormat {
    /// The format a file name's extension says, if any.
    pub fn guess(path: &Path) -> Option<InputFormat> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "jsonl" | "ndjson" | "json" => Some(InputFormat::Jsonl),
            "csv" => Some(InputFormat::Csv),
            "parquet" | "pq" => Some(InputFormat::Parquet),
            "avro" => Some(InputFormat::Avro),
            _ => None,
        }
    }
}

/// One record of the input: its JSON text, or why it is not a record.
pub struct Item {
    /// The record, or the reason it is bad.
    pub record: Result<String, String>,
    /// How far into the input it ends (bytes for text formats, rows for Parquet).
    pub position: u64,
}

/// An opened input.
pub struct Input {
    /// The records, in order.
    pub items: Box<dyn Iterator<Item = Item> + Send>,
    /// The input's size in the unit of [`Item::position`], when known (a file).
    pub total: Option<u64>,
}

/// Opens `path` (`-` or none: standard input) as `format`.
pub fn open(path: Option<&Path>, format: InputFormat) -> anyhow::Result<Input> {
    let file = match path {
        Some(p) if p != Path::new("-") => {
            Some(File::open(p).with_context(|| format!("cannot open {}", p.display()))?)
        }
        _ => None,
    };
    let size = file
        .as_ref()
        .and_then(|f| f.metadata().ok())
        .map(|m| m.len());
    let reader: Box<dyn Read + Send> = match file {
        Some(f) => Box::new(f),
        None => Box::new(std::io::stdin()),
    };
    read(reader, format, size)
}

/// Reads `reader` (of `size` bytes, when known) as `format` (the `push_inputs` fuzz
/// target's entry).
pub fn read(
    reader: Box<dyn Read + Send>,
    format: InputFormat,
    size: Option<u64>,
) -> anyhow::Result<Input> {
    Ok(match format {
        InputFormat::Jsonl => Input {
            items: Box::new(jsonl(BufReader::with_capacity(1 << 20, reader))),
            total: size,
        },
        InputFormat::Csv => Input {
            items: Box::new(csv_records(reader)),
            total: size,
        },
        InputFormat::Parquet => parquet(reader)?,
        InputFormat::Avro => Input {
            items: Box::new(avro(reader)),
            total: size,
        },
    })
}

fn jsonl(mut reader: impl BufRead + Send) -> impl Iterator<Item = Item> + Send {
    let mut position = 0u64;
    let mut line = String::new();
    std::iter::from_fn(move || loop {
        line.clear();
        let read = match reader.read_line(&mut line) {
            Ok(0) => return None,
            Ok(n) => n,
            Err(e) => {
                return Some(Item {
                    record: Err(format!("unreadable input: {e}")),
                    position,
                })
            }
        };
        position += read as u64;
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        let record = if !text.starts_with('{') {
            Err("not a JSON object".to_string())
        } else {
            match serde_json::from_str::<serde::de::IgnoredAny>(text) {
                Ok(_) => Ok(text.to_string()),
                Err(e) => Err(format!("not JSON: {e}")),
            }
        };
        return Some(Item { record, position });
    })
}

/// A CSV field as a JSON value (see the module doc).
fn csv_value(field: &str) -> Value {
    if field.is_empty() {
        return Value::Null;
    }
    if let Ok(i) = field.parse::<i64>() {
        return Value::from(i);
    }
    if let Some(n) = field
        .parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
        .and_then(serde_json::Number::from_f64)
    {
        return Value::Number(n);
    }
    match field {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => Value::String(field.to_string()),
    }
}

fn csv_records(reader: impl Read + Send + 'static) -> impl Iterator<Item = Item> + Send {
    let mut csv = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(reader);
    let headers = csv.headers().cloned().map_err(|e| e.to_string());
    let mut rows = csv.into_records();
    let mut header_error = headers.as_ref().err().cloned();
    std::iter::from_fn(move || {
        let Ok(headers) = &headers else {
            return header_error.take().map(|e| Item {
                record: Err(format!("CSV header: {e}")),
                position: 0,
            });
        };
        let row = rows.next()?;
        Some(match row {
            Ok(row) => {
                let position = row.position().map_or(0, |p| p.byte());
                let object: Map<String, Value> = headers
                    .iter()
                    .zip(row.iter())
                    .map(|(k, v)| (k.to_string(), csv_value(v)))
                    .collect();
                Item {
                    record: Ok(Value::Object(object).to_string()),
                    position,
                }
            }
            Err(e) => Item {
                position: e.position().map_or(0, |p| p.byte()),
                record: Err(format!("CSV: {e}")),
            },
        })
    })
}

fn parquet(mut reader: Box<dyn Read + Send>) -> anyhow::Result<Input> {
    use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
    let mut bytes = Vec::new();
    reader
        .read_to_end(&mut bytes)
        .context("cannot read the Parquet input")?;
    // The embedded Arrow schema (`ARROW:schema`) is not read: rows become JSON from the
    // Parquet types alone, and a damaged one made the crate panic (the `push_inputs` fuzz
    // target's find, seed `parquet-bad-arrow-schema`).
    let options = ArrowReaderOptions::new().with_skip_arrow_metadata(true);
    let builder =
        ParquetRecordBatchReaderBuilder::try_new_with_options(bytes::Bytes::from(bytes), options)
            .context("not a Parquet file")?;
    let total = u64::try_from(builder.metadata().file_metadata().num_rows()).ok();
    let mut batches = builder.build().context("cannot read the Parquet file")?;
    let mut pending: VecDeque<String> = VecDeque::new();
    let mut position = 0u64;
    let mut failed = false;
    let items = std::iter::from_fn(move || loop {
        if let Some(record) = pending.pop_front() {
            position += 1;
            return Some(Item {
                record: Ok(record),
                position,
            });
        }
        if failed {
            return None;
        }
        let batch = match batches.next()? {
            Ok(b) => b,
            Err(e) => {
                failed = true;
                return Some(Item {
                    record: Err(format!("Parquet: {e}")),
                    position,
                });
            }
        };
        let mut writer = arrow_json::LineDelimitedWriter::new(Vec::new());
        let written = writer.write(&batch).and_then(|()| writer.finish());
        if let Err(e) = written {
            failed = true;
            return Some(Item {
                record: Err(format!("Parquet row as JSON: {e}")),
                position,
            });
        }
        let text = String::from_utf8_lossy(&writer.into_inner()).into_owned();
        pending.extend(text.lines().map(str::to_string));
    });
    Ok(Input {
        items: Box::new(items),
        total,
    })
}

/// Counts the bytes read through it (an Avro file's position for the progress line).
struct Counted<R> {
    inner: R,
    read: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
}

fn avro(reader: impl Read + Send + 'static) -> impl Iterator<Item = Item> + Send {
    let read = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = Counted {
        inner: BufReader::with_capacity(1 << 20, reader),
        read: std::sync::Arc::clone(&read),
    };
    let mut records = match apache_avro::Reader::new(counted) {
        Ok(r) => Ok(r),
        Err(e) => Err(Some(format!("not an Avro object container file: {e}"))),
    };
    let mut failed = false;
    std::iter::from_fn(move || {
        let position = read.load(std::sync::atomic::Ordering::Relaxed);
        let records = match &mut records {
            Ok(r) => r,
            Err(e) => {
                return e.take().map(|e| Item {
                    record: Err(e),
                    position,
                })
            }
        };
        if failed {
            return None;
        }
        let record = match records.next()? {
            Ok(apache_avro::types::Value::Record(fields)) => {
                serde_json::Value::try_from(apache_avro::types::Value::Record(fields))
                    .map(|v| v.to_string())
                    .map_err(|e| format!("Avro record as JSON: {e}"))
            }
            Ok(other) => Err(format!(
                "an Avro value that is not a record: {:?}",
                apache_avro::schema::SchemaKind::from(&other)
            )),
            Err(e) => {
                failed = true;
                Err(format!("Avro: {e}"))
            }
        };
        Some(Item {
            record,
            position: read.load(std::sync::atomic::Ordering::Relaxed),
        })
    })
}

/// Refuses a format that cannot be guessed.
pub fn format_for(path: Option<&Path>, given: Option<InputFormat>) -> anyhow::Result<InputFormat> {
    if let Some(f) = given {
        return Ok(f);
    }
    match path.filter(|p| *p != Path::new("-")) {
        Some(p) => match InputFormat::guess(p) {
            Some(f) => Ok(f),
            None => bail!(
                "cannot tell the format of {} from its extension; pass --format jsonl|csv|parquet|avro",
                p.display()
            ),
        },
        None => Ok(InputFormat::Jsonl),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_skips_blank_lines_and_names_bad_records() {
        let input = "{\"a\":1}\n\n{\"a\":\nnot json\n{\"b\":2}\n";
        let items: Vec<Item> = jsonl(input.as_bytes()).collect();
        assert_eq!(items.len(), 4);
        assert_eq!(items[0].record.as_deref(), Ok("{\"a\":1}"));
        assert!(items[1]
            .record
            .as_ref()
            .is_err_and(|e| e.starts_with("not JSON")));
        assert!(items[2]
            .record
            .as_ref()
            .is_err_and(|e| e == "not a JSON object"));
        assert_eq!(items[3].record.as_deref(), Ok("{\"b\":2}"));
        assert_eq!(items[3].position, input.len() as u64);
    }

    #[test]
    fn csv_fields_become_typed_json_values() {
        let input = "id,temp,name,ok,empty\n1,21.5,d1,true,\n";
        let items: Vec<Item> = csv_records(std::io::Cursor::new(input.to_string())).collect();
        assert_eq!(items.len(), 1);
        let v: Value =
            serde_json::from_str(items[0].record.as_ref().expect("record")).expect("json");
        assert_eq!(
            v,
            serde_json::json!({"id": 1, "temp": 21.5, "name": "d1", "ok": true, "empty": null})
        );
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_read_as_records_or_reasons_without_panicking(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
        ) {
            let jsonl_items = jsonl(&bytes[..]).count();
            proptest::prop_assert!(jsonl_items <= bytes.len());
            let _ = csv_records(std::io::Cursor::new(bytes.clone())).count();
            let _ = avro(std::io::Cursor::new(bytes.clone())).take(1000).count();
            let _ = parquet(Box::new(std::io::Cursor::new(bytes)));
        }
    }

    #[test]
    fn avro_records_become_json_objects() {
        let schema = apache_avro::Schema::parse_str(
            r#"{"type": "record", "name": "r", "fields": [
                {"name": "id", "type": "long"},
                {"name": "note", "type": ["null", "string"]}]}"#,
        )
        .expect("schema");
        let mut writer = apache_avro::Writer::new(&schema, Vec::new()).expect("writer");
        for (id, note) in [(1i64, Some("a")), (2, None)] {
            let mut r = apache_avro::types::Record::new(&schema).expect("record");
            r.put("id", id);
            r.put("note", note.map(str::to_string));
            writer.append_value(r).expect("append");
        }
        let bytes = writer.into_inner().expect("file");
        let items: Vec<Item> = avro(std::io::Cursor::new(bytes.clone())).collect();
        let records: Vec<&str> = items
            .iter()
            .map(|i| i.record.as_deref().expect("record"))
            .collect();
        assert_eq!(
            records,
            [r#"{"id":1,"note":"a"}"#, r#"{"id":2,"note":null}"#]
        );
        assert_eq!(items[1].position, bytes.len() as u64);
        let bad: Vec<Item> = avro(&b"Obj\x01 not avro"[..]).collect();
        assert_eq!(bad.len(), 1);
        assert!(bad[0]
            .record
            .as_ref()
            .is_err_and(|e| e.starts_with("not an Avro object container file")));
        let long = apache_avro::Schema::parse_str(r#""long""#).expect("schema");
        let mut writer = apache_avro::Writer::new(&long, Vec::new()).expect("writer");
        writer.append_value(7i64).expect("append");
        let bytes = writer.into_inner().expect("file");
        let items: Vec<Item> = avro(std::io::Cursor::new(bytes)).collect();
        assert!(items[0]
            .record
            .as_ref()
            .is_err_and(|e| e.starts_with("an Avro value that is not a record")));
    }

    #[test]
    fn a_parquet_file_with_a_damaged_arrow_schema_is_read_without_panicking() {
        // The push_inputs fuzz target's find: the parquet crate unwrapped a missing field
        // list while decoding the embedded Arrow schema.
        let seed = include_bytes!("../../fuzz/seeds/push_inputs/parquet-bad-arrow-schema");
        let file = seed[1..].to_vec();
        if let Ok(input) = parquet(Box::new(std::io::Cursor::new(file))) {
            let _ = input.items.count();
        }
    }

    #[test]
    fn formats_are_guessed_from_extensions() {
        assert_eq!(
            InputFormat::guess(Path::new("a/b.JSONL")),
            Some(InputFormat::Jsonl)
        );
        assert_eq!(
            InputFormat::guess(Path::new("x.parquet")),
            Some(InputFormat::Parquet)
        );
        assert_eq!(
            InputFormat::guess(Path::new("x.csv")),
            Some(InputFormat::Csv)
        );
        assert_eq!(
            InputFormat::guess(Path::new("x.avro")),
            Some(InputFormat::Avro)
        );
        assert!(format_for(Some(Path::new("x.txt")), None).is_err());
        assert_eq!(format_for(None, None).ok(), Some(InputFormat::Jsonl));
    }
}
