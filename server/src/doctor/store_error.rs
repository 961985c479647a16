//! Object-store errors as one readable line for the doctor's table: an S3 error answer
//! (an XML body with `<Code>` and `<Message>`) becomes `404 Not Found NoSuchBucket: The
//! specified bucket does not exist`; anything else has its whitespace folded and is cut
//! to a length a terminal row can hold.

/// Longest message kept.
const MAX_CHARS: usize = 300;

/// `error` (an `object_store` error's text) as one short line.
pub(super) fn readable(error: &str) -> String {
    if let (Some(code), Some(message)) = (tag(error, "Code"), tag(error, "Message")) {
        let status = error
            .split("status code: ")
            .nth(1)
            .and_then(|rest| rest.split(':').next())
            .map(|s| format!("{} ", s.trim()))
            .unwrap_or_default();
        return format!("S3 answered {status}{code}: {message}");
    }
    let folded = error.split_whitespace().collect::<Vec<_>>().join(" ");
    if folded.chars().count() > MAX_CHARS {
        let cut: String = folded.chars().take(MAX_CHARS).collect();
        format!("{cut}…")
    } else {
        folded
    }
}

/// The text of the first `<name>…</name>` element in `body`.
fn tag<'a>(body: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let start = body.find(&open)? + open.len();
    let end = body[start..].find(&format!("</{name}>"))? + start;
    Some(body[start..end].trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_s3_error_answer_becomes_status_code_and_message() {
        let error = "Generic S3 error: Error performing list request: Error performing GET \
            http://127.0.0.1:1/nope?list-type=2 in 7ms - Server returned non-2xx status code: \
            404 Not Found: <?xml version=\"1.0\" encoding=\"utf-8\"?>\n<Error><Code>NoSuchBucket\
            </Code><Message>The specified bucket does not exist</Message></Error>";
        assert_eq!(
            readable(error),
            "S3 answered 404 Not Found NoSuchBucket: The specified bucket does not exist"
        );
    }

    #[test]
    fn other_errors_are_folded_to_one_bounded_line() {
        assert_eq!(
            readable("HTTP error:\n  error sending request"),
            "HTTP error: error sending request"
        );
        let long = "x ".repeat(MAX_CHARS);
        assert_eq!(readable(&long).chars().count(), MAX_CHARS + 1);
    }
}
