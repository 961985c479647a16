//! [`ObjectText`]: the rescued-data text of one record, a JSON object written member by
//! member.

use crate::value::compact_json;

/// The members of one JSON object text, written in order: `{"k":v,...}`.
#[derive(Debug, Default)]
pub(crate) struct ObjectText {
    text: String,
}

impl ObjectText {
    /// Starts the member `key` (JSON-escaped here); its value follows.
    pub(crate) fn key(&mut self, key: &str) {
        self.text.push(if self.text.is_empty() { '{' } else { ',' });
        // Serialising a string cannot fail; the fallback keeps the text valid JSON anyway.
        let quoted = serde_json::to_string(key).unwrap_or_else(|_| String::from("\"\""));
        self.text.push_str(&quoted);
        self.text.push(':');
    }

    /// Appends a JSON value text with whitespace outside strings dropped.
    pub(crate) fn compact(&mut self, json: &str) {
        self.text.push_str(&compact_json(json));
    }

    /// Appends a JSON value text as it is (already compact).
    pub(crate) fn raw(&mut self, json: &str) {
        self.text.push_str(json);
    }

    /// The object text, or `None` if it has no members.
    pub(crate) fn finish(mut self) -> Option<String> {
        if self.text.is_empty() {
            return None;
        }
        self.text.push('}');
        Some(self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_text_escapes_keys_and_compacts_values() {
        let mut object = ObjectText::default();
        object.key("a\"b");
        object.compact("{ \"x\" : [1, 2] }");
        object.key("c");
        object.compact("3");
        assert_eq!(
            object.finish().as_deref(),
            Some(r#"{"a\"b":{"x":[1,2]},"c":3}"#)
        );
        assert_eq!(ObjectText::default().finish(), None);
    }
}
