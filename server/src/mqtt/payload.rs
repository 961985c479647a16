//! A PUBLISH payload as records: one JSON object, or a JSON array of objects (split by
//! the REST body splitter, `rest::body`). Records are not parsed here: the table's parser
//! does that when the service writes them.

use crate::rest::body::{self, Layout};

/// The records of `payload`, each the JSON text of one object, in order; the error says
/// what is wrong (answered as PUBACK 0x99 Payload format invalid).
pub fn records(payload: &[u8]) -> Result<Vec<&str>, String> {
    let text =
        std::str::from_utf8(payload).map_err(|e| format!("the payload is not UTF-8 JSON: {e}"))?;
    let trimmed = text.trim();
    match trimmed.as_bytes().first() {
        Some(b'{') => Ok(vec![trimmed]),
        Some(b'[') => body::split(trimmed.as_bytes(), Layout::Array).map_err(|e| e.to_string()),
        Some(_) => Err("the payload must be one JSON object or a JSON array of objects".into()),
        None => Err("the payload is empty: send one JSON object or a JSON array of objects".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::records;

    #[test]
    fn an_object_or_an_array_of_objects_is_records() {
        assert_eq!(records(b" {\"a\":1}\n"), Ok(vec!["{\"a\":1}"]));
        assert_eq!(
            records(b"[{\"a\":1},{\"a\":2}]"),
            Ok(vec!["{\"a\":1}", "{\"a\":2}"])
        );
    }

    #[test]
    fn anything_else_is_refused_with_its_reason() {
        assert!(records(b"").expect_err("empty").contains("empty"));
        assert!(records(b"42").expect_err("number").contains("JSON object"));
        assert!(records(&[0xff, 0x00]).expect_err("bytes").contains("UTF-8"));
        assert!(records(b"[1]")
            .expect_err("array of numbers")
            .contains("record 0"));
        assert!(records(b"[]")
            .expect_err("no records")
            .contains("no records"));
    }
}
