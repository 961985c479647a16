//! Parsing of what a client sends to the token endpoint: the form body, the
//! `Authorization: Basic` value and the `authorization_details` JSON. Pure
//! functions of bytes from strangers (no I/O, no server state), so the fuzz
//! targets in `server/fuzz` compile this very file.

use std::collections::HashMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::Deserialize;

/// Longest `authorization_details` accepted, bytes.
pub const MAX_DETAILS_BYTES: usize = 64 << 10;

#[derive(Deserialize)]
struct AuthorizationDetail {
    #[serde(default)]
    object_type: String,
    #[serde(default)]
    object_full_path: String,
    #[serde(default)]
    privileges: Vec<String>,
}

/// A table named in `authorization_details` and the privileges asked on it.
#[derive(Debug, PartialEq, Eq)]
pub struct TableRequest<P> {
    /// `catalog.schema.table`, lower case.
    pub table: String,
    /// Known privileges asked for, sorted, without duplicates.
    pub privileges: Vec<P>,
}

/// Parses an `application/x-www-form-urlencoded` body.
pub fn parse_form(body: &str) -> Result<HashMap<String, String>, String> {
    serde_urlencoded::from_str(body).map_err(|e| format!("body is not a form: {e}"))
}

/// Parses the value of an `Authorization: Basic base64(id:secret)` header.
pub fn parse_basic(value: &str) -> Option<(String, String)> {
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = STANDARD.decode(encoded.trim()).ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (id, secret) = text.split_once(':')?;
    Some((id.to_string(), secret.to_string()))
}

/// The tables named in `authorization_details` (lower case) with the
/// privileges asked for (`parse` keeps the known ones); a TABLE entry naming
/// no privilege asks for `default`.
pub fn requested_tables<P: Ord + Clone>(
    details: &str,
    parse: impl Fn(&str) -> Option<P>,
    default: P,
) -> Result<Vec<TableRequest<P>>, String> {
    if details.len() > MAX_DETAILS_BYTES {
        return Err(format!(
            "authorization_details is longer than {MAX_DETAILS_BYTES} bytes"
        ));
    }
    let parsed: Vec<AuthorizationDetail> = serde_json::from_str(details)
        .map_err(|e| format!("authorization_details is not a JSON array of objects: {e}"))?;
    let mut out: Vec<TableRequest<P>> = Vec::new();
    for d in parsed
        .into_iter()
        .filter(|d| d.object_type.eq_ignore_ascii_case("TABLE"))
    {
        let table = d.object_full_path.trim().to_ascii_lowercase();
        if table.is_empty() {
            return Err("authorization_details: a TABLE entry has no object_full_path".into());
        }
        let mut privileges: Vec<P> = d.privileges.iter().filter_map(|p| parse(p)).collect();
        if d.privileges.is_empty() {
            privileges.push(default.clone());
        }
        match out.iter_mut().find(|r| r.table == table) {
            Some(r) => r.privileges.extend(privileges),
            None => out.push(TableRequest { table, privileges }),
        }
    }
    for r in &mut out {
        r.privileges.sort();
        r.privileges.dedup();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_basic_auth_and_forms_parse() {
        let d = r#"[{"object_type":"CATALOG","object_full_path":"main"},
                    {"privileges":["MODIFY","select","x"],"object_type":"TABLE","object_full_path":"M.D.T"}]"#;
        let upper = |p: &str| Some(p.to_ascii_uppercase());
        let got = requested_tables(d, upper, "MODIFY".to_string()).expect("parse");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].table, "m.d.t");
        assert_eq!(got[0].privileges, vec!["MODIFY", "SELECT", "X"]);
        assert!(requested_tables("{", upper, String::new()).is_err());
        let b = format!("Basic {}", STANDARD.encode("id:se:cret"));
        assert_eq!(parse_basic(&b), Some(("id".into(), "se:cret".into())));
        assert_eq!(parse_basic("Bearer x"), None);
        assert_eq!(parse_form("a=1&b=%20").expect("form")["b"], " ");
    }
}
