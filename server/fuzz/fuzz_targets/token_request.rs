//! The token endpoint's parsing of a stranger's request: the
//! `Authorization: Basic` value, the form body and the
//! `authorization_details` JSON inside it (the server's own
//! `server/src/auth/form.rs`, compiled here as is). Nothing may panic.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../src/auth/form.rs"]
#[allow(dead_code)]
mod form;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // First line: the Authorization header value; the rest: the body.
    let (header, body) = text.split_once('\n').unwrap_or((&text, ""));
    let _ = form::parse_basic(header);
    if let Ok(fields) = form::parse_form(body) {
        if let Some(details) = fields.get("authorization_details") {
            let known = |p: &str| match p.to_ascii_uppercase().as_str() {
                "MODIFY" => Some(0u8),
                "SELECT" => Some(1u8),
                _ => None,
            };
            let _ = form::requested_tables(details, known, 0);
        }
    }
    let _ = form::requested_tables(body, |p| Some(p.len()), 0);
});
