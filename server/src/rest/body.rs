//! A REST insert body, from bytes on the wire to one JSON text per record: the
//! `Content-Encoding` (identity, gzip, zstd) undone with the decoded size bounded (a
//! gzip bomb stops at the limit, it is never inflated whole), then the `Content-Type`'s
//! layout split — a JSON array of objects (`application/json`) or one object per line
//! (`application/x-ndjson`). Records are not parsed here: the table's parser does that.
//!
//! This file depends on nothing else in the crate (its errors are its own [`BodyError`]),
//! so the `rest_body` fuzz target compiles it as is.

use std::borrow::Cow;
use std::io::Read;

/// A body that cannot be taken apart into records.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// The content type is neither JSON nor NDJSON.
    #[error("unsupported content type {0:?}: send application/json (a JSON array of objects) or application/x-ndjson (one object per line)")]
    ContentType(String),
    /// The content encoding is not one Sluice decodes.
    #[error("unsupported content encoding {0:?}: send identity, gzip or zstd")]
    Encoding(String),
    /// The body (as sent, or once decoded) is over the limit.
    #[error("request body is over the limit of {limit} bytes{}", if *.decoded { " once decompressed" } else { "" })]
    TooLarge {
        /// The limit, bytes.
        limit: usize,
        /// Whether the decoded body passed it (the wire body was within).
        decoded: bool,
    },
    /// The compressed body does not decode.
    #[error("the {encoding} body does not decompress: {message}")]
    Corrupt {
        /// `gzip` or `zstd`.
        encoding: &'static str,
        /// What the decoder said.
        message: String,
    },
    /// The body is not valid JSON of the expected shape.
    #[error("malformed body: {0}")]
    Malformed(String),
    /// The body holds no record.
    #[error("the body holds no records: send at least one JSON object")]
    Empty,
}

/// How the records are laid out in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// A JSON array of objects.
    Array,
    /// One JSON object per line.
    Ndjson,
}

/// How the body is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Not compressed.
    Identity,
    /// gzip (RFC 1952).
    Gzip,
    /// Zstandard.
    Zstd,
}

/// The layout a `Content-Type` header names (parameters such as `charset` ignored).
pub fn layout(content_type: Option<&str>) -> Result<Layout, BodyError> {
    let value = content_type.unwrap_or("");
    let essence = value.split(';').next().unwrap_or("").trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Ok(Layout::Array)
    } else if essence.eq_ignore_ascii_case("application/x-ndjson") {
        Ok(Layout::Ndjson)
    } else {
        Err(BodyError::ContentType(value.to_string()))
    }
}

/// The encoding a `Content-Encoding` header names (absent: identity).
pub fn encoding(content_encoding: Option<&str>) -> Result<Encoding, BodyError> {
    match content_encoding.map(str::trim) {
        None | Some("") => Ok(Encoding::Identity),
        Some(v) if v.eq_ignore_ascii_case("identity") => Ok(Encoding::Identity),
        Some(v) if v.eq_ignore_ascii_case("gzip") || v.eq_ignore_ascii_case("x-gzip") => {
            Ok(Encoding::Gzip)
        }
        Some(v) if v.eq_ignore_ascii_case("zstd") => Ok(Encoding::Zstd),
        Some(v) => Err(BodyError::Encoding(v.to_string())),
    }
}

/// The decoded body, at most `limit` bytes (more: [`BodyError::TooLarge`]).
pub fn decode(body: &[u8], encoding: Encoding, limit: usize) -> Result<Cow<'_, [u8]>, BodyError> {
    if body.len() > limit {
        return Err(BodyError::TooLarge {
            limit,
            decoded: false,
        });
    }
    match encoding {
        Encoding::Identity => Ok(Cow::Borrowed(body)),
        Encoding::Gzip => bounded(flate2::read::MultiGzDecoder::new(body), "gzip", limit),
        Encoding::Zstd => {
            let decoder =
                zstd::stream::read::Decoder::new(body).map_err(|e| BodyError::Corrupt {
                    encoding: "zstd",
                    message: e.to_string(),
                })?;
            bounded(decoder, "zstd", limit)
        }
    }
}

/// Reads `reader` to its end, failing as soon as it yields more than `limit` bytes.
fn bounded(
    reader: impl Read,
    encoding: &'static str,
    limit: usize,
) -> Result<Cow<'static, [u8]>, BodyError> {
    let mut out = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader
        .take(cap)
        .read_to_end(&mut out)
        .map_err(|e| BodyError::Corrupt {
            encoding,
            message: e.to_string(),
        })?;
    if out.len() > limit {
        return Err(BodyError::TooLarge {
            limit,
            decoded: true,
        });
    }
    Ok(Cow::Owned(out))
}

/// The records of a decoded body, each the JSON text of one object, in order.
pub fn split(body: &[u8], layout: Layout) -> Result<Vec<&str>, BodyError> {
    let text = std::str::from_utf8(body)
        .map_err(|e| BodyError::Malformed(format!("the body is not UTF-8: {e}")))?;
    let records = match layout {
        Layout::Array => split_array(text)?,
        Layout::Ndjson => split_lines(text)?,
    };
    if records.is_empty() {
        return Err(BodyError::Empty);
    }
    Ok(records)
}

fn split_array(text: &str) -> Result<Vec<&str>, BodyError> {
    let items: Vec<&serde_json::value::RawValue> = serde_json::from_str(text)
        .map_err(|e| BodyError::Malformed(format!("expected a JSON array of objects: {e}")))?;
    items
        .into_iter()
        .enumerate()
        .map(|(i, raw)| object_text(raw.get(), i))
        .collect()
}

fn split_lines(text: &str) -> Result<Vec<&str>, BodyError> {
    text.split('\n')
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .enumerate()
        .map(|(i, line)| object_text(line, i))
        .collect()
}

/// `text` if it is a JSON object (by its first character; the parser checks the rest).
fn object_text(text: &str, index: usize) -> Result<&str, BodyError> {
    if text.starts_with('{') {
        Ok(text)
    } else {
        let found = match text.chars().next() {
            Some('[') => "an array",
            Some('"') => "a string",
            Some('t' | 'f') => "a boolean",
            Some('n') => "null",
            _ => "a number or invalid JSON",
        };
        Err(BodyError::Malformed(format!(
            "record {index}: expected a JSON object, found {found}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn content_types_and_encodings_are_recognised() {
        assert_eq!(
            layout(Some("application/json; charset=utf-8")),
            Ok(Layout::Array)
        );
        assert_eq!(layout(Some("Application/X-NDJSON")), Ok(Layout::Ndjson));
        assert!(matches!(
            layout(Some("text/plain")),
            Err(BodyError::ContentType(_))
        ));
        assert!(matches!(layout(None), Err(BodyError::ContentType(_))));
        assert_eq!(encoding(None), Ok(Encoding::Identity));
        assert_eq!(encoding(Some("GZIP")), Ok(Encoding::Gzip));
        assert_eq!(encoding(Some("zstd")), Ok(Encoding::Zstd));
        assert!(matches!(encoding(Some("br")), Err(BodyError::Encoding(_))));
    }

    #[test]
    fn a_gzip_bomb_stops_at_the_limit() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&vec![b' '; 8 << 20]).expect("compress");
        let bomb = gz.finish().expect("finish");
        assert!(bomb.len() < 64 << 10, "a small wire body");
        assert_eq!(
            decode(&bomb, Encoding::Gzip, 1 << 20),
            Err(BodyError::TooLarge {
                limit: 1 << 20,
                decoded: true
            })
        );
        assert_eq!(
            decode(&bomb, Encoding::Gzip, 8 << 20).map(|b| b.len()),
            Ok(8 << 20)
        );
        let zst = zstd::encode_all(&b"[{\"a\":1}]"[..], 3).expect("zstd");
        assert_eq!(
            decode(&zst, Encoding::Zstd, 100).as_deref(),
            Ok(&b"[{\"a\":1}]"[..])
        );
        assert!(matches!(
            decode(b"not gzip", Encoding::Gzip, 100),
            Err(BodyError::Corrupt { .. })
        ));
    }

    #[test]
    fn refusals_name_what_is_wrong() {
        assert_eq!(split(b"[]", Layout::Array), Err(BodyError::Empty));
        assert_eq!(split(b"\n\n", Layout::Ndjson), Err(BodyError::Empty));
        let err = split(b"[{\"a\":1}, 5]", Layout::Array).expect_err("number");
        assert!(
            err.to_string().contains("record 1: expected a JSON object"),
            "{err}"
        );
        let err = split(b"{\"a\":1}", Layout::Array).expect_err("not an array");
        assert!(err.to_string().contains("expected a JSON array"), "{err}");
        assert!(split(b"[{\"a\":", Layout::Array).is_err());
        assert!(split(&[0xff, 0xfe], Layout::Ndjson).is_err());
    }

    /// A JSON object with a few scalar fields (keys and strings may need escaping).
    fn object() -> impl Strategy<Value = serde_json::Value> {
        let scalar = prop_oneof![
            any::<i64>().prop_map(serde_json::Value::from),
            any::<bool>().prop_map(serde_json::Value::from),
            ".{0,12}".prop_map(serde_json::Value::from),
            Just(serde_json::Value::Null),
        ];
        prop::collection::btree_map(".{0,8}", scalar, 0..5)
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect()))
    }

    proptest! {
        /// The array and the NDJSON forms of the same objects split into the same
        /// records, each the text of one object, in order.
        #[test]
        fn array_and_ndjson_split_alike(objects in prop::collection::vec(object(), 1..20),
                                        pretty in any::<bool>(), crlf in any::<bool>()) {
            let array = if pretty {
                serde_json::to_string_pretty(&objects)
            } else {
                serde_json::to_string(&objects)
            }.expect("json");
            let eol = if crlf { "\r\n" } else { "\n" };
            let ndjson: String = objects
                .iter()
                .map(|o| serde_json::to_string(o).expect("json") + eol)
                .collect();
            let from_array = split(array.as_bytes(), Layout::Array).expect("array");
            let from_lines = split(ndjson.as_bytes(), Layout::Ndjson).expect("ndjson");
            prop_assert_eq!(from_array.len(), objects.len());
            prop_assert_eq!(from_lines.len(), objects.len());
            for ((a, l), o) in from_array.iter().zip(&from_lines).zip(&objects) {
                let a: serde_json::Value = serde_json::from_str(a).expect("array record");
                let l: serde_json::Value = serde_json::from_str(l).expect("line record");
                prop_assert_eq!(&a, o);
                prop_assert_eq!(&l, o);
            }
        }

        /// Any bytes: split fails cleanly or yields records that start with `{`.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            for layout in [Layout::Array, Layout::Ndjson] {
                if let Ok(records) = split(&bytes, layout) {
                    prop_assert!(records.iter().all(|r| r.starts_with('{')), "a record that is not an object");
                }
            }
        }
    }
}
