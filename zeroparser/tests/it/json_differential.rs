//! The single-pass JSON decode (its own scanner) against the value-tree decode (serde_json)
//! on random record texts: random whitespace, numbers in every form serde_json reads (and
//! some it refuses), strings with and without escapes, repeated and case-folded keys, nulls,
//! and records broken by one inserted or deleted byte. The verdicts, the errors and the rows
//! must be the same; and records of the plain forms must not need the value tree.

use proptest::prelude::*;
use sluice_zeroparser::{RecordBatchBuilder, TableSchema};

use crate::support::rows;

const NESTED: &str = "id BIGINT NOT NULL, device STRING, ts TIMESTAMP, temp DOUBLE, \
    tags ARRAY<STRING>, attrs MAP<STRING,STRING>, loc STRUCT<lat: DOUBLE, lon: DOUBLE NOT NULL>, \
    d DATE, b BINARY, n TIMESTAMP_NTZ, t TINYINT, s SMALLINT, i INT, f FLOAT, \
    ok BOOLEAN, strict ARRAY<INT NOT NULL>, ids MAP<BIGINT, BOOLEAN NOT NULL>, \
    flags MAP<BOOLEAN, INT>, events ARRAY<STRUCT<k: STRING, v: ARRAY<DOUBLE>>>";

const FLAT: &str = "id BIGINT NOT NULL, device STRING, ts TIMESTAMP, temp DOUBLE, \
    d DATE, t TINYINT, s SMALLINT, i INT, f FLOAT, ok BOOLEAN";

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a>(&mut self, options: &[&'a str]) -> &'a str {
        options[self.below(options.len() as u64) as usize]
    }
}

/// What the generator may write: only plain forms, or also the doubtful and bad ones.
#[derive(Clone, Copy, PartialEq)]
enum Forms {
    Plain,
    Any,
}

fn ws(rng: &mut Rng, forms: Forms) -> &'static str {
    if forms == Forms::Plain {
        return rng.pick(&["", " "]);
    }
    rng.pick(&["", "", " ", "\n  ", "\t", "\r\n"])
}

/// An integer; beyond TINYINT's range only if `wide` (or in `Forms::Any`).
fn integer(rng: &mut Rng, forms: Forms, wide: bool) -> String {
    let wide = wide || forms == Forms::Any;
    let plain = match rng.below(4) {
        0 => (rng.below(200) as i64 - 100).to_string(),
        1 if wide => (rng.next() as i64 >> rng.below(64)).to_string(),
        2 if wide => rng
            .pick(&["0", "-1", "32767", "9223372036854775807"])
            .into(),
        1 | 2 => rng.pick(&["0", "-1", "127", "-128"]).into(),
        _ if wide => rng.pick(&["3.0", "1e3", "1E+2", "-2.5e1", "-0"]).into(),
        _ => rng.pick(&["3.0", "1E+1", "-2.5e1", "-0", "-0.0"]).into(),
    };
    if forms == Forms::Plain || rng.below(4) != 0 {
        return plain;
    }
    rng.pick(&[
        "\"42\"",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "-9223372036854775809",
        "99999999999999999999999",
        "01",
        "1.",
        "-",
        "1.5",
        "1e400",
        "\"x\"",
        "true",
        "[]",
    ])
    .into()
}

fn double(rng: &mut Rng, forms: Forms) -> String {
    let plain = match rng.below(4) {
        0 => format!("{:.3}", (rng.next() % 100_000) as f64 / 7.0 - 5000.0),
        1 => format!("{:?}", f64::from_bits(rng.next() >> 2)),
        2 => format!("{:e}", (rng.next() % 1_000_000) as f64 / 1e3),
        _ => rng
            .pick(&[
                "0",
                "-0",
                "0.1",
                "1e-7",
                "-2.25E3",
                "7",
                "0.30000000000000004",
            ])
            .into(),
    };
    if forms == Forms::Plain || rng.below(4) != 0 {
        return plain;
    }
    rng.pick(&[
        "123456789012345678901234.5",
        "0.1000000000000000055511151231257827",
        "9007199254740993",
        "1.7976931348623157e308",
        "2e308",
        "5e-324",
        "1e-400",
        "\"NaN\"",
        "\"-Infinity\"",
        "\"2.5\"",
        ".5",
        "1e",
        "+1",
    ])
    .into()
}

fn string(rng: &mut Rng, forms: Forms) -> String {
    let plain = rng.pick(&[
        "",
        "a",
        "dev-7",
        "héllo 日本",
        "a b c",
        "x\\\"y",
        "tab\\tnew\\nline",
    ]);
    if forms == Forms::Plain || rng.below(3) != 0 {
        return format!("\"{plain}\"");
    }
    rng.pick(&[
        "\"\\u0041\\u00e9\"",
        "\"\\ud83d\\ude00\"",
        "\"\\ud800\"",
        "\"\\/\\b\\f\\r\\\\\"",
        "\"bad \\x escape\"",
        "\"raw \u{1} control\"",
        "\"unterminated",
        "7",
        "null",
    ])
    .into()
}

fn scalar(rng: &mut Rng, forms: Forms, name: &str) -> String {
    match name {
        "id" | "ts" => integer(rng, forms, true),
        "t" | "s" | "i" | "d" => integer(rng, forms, false),
        // FLOAT: a double beyond f32's range is out of range.
        "f" if forms == Forms::Plain => format!("{:?}", (rng.below(100_000) as f32 - 5e4) / 8.0),
        "temp" | "lat" | "lon" | "f" | "v" => double(rng, forms),
        "ok" => rng.pick(&["true", "false", "true"]).into(),
        "b" => rng.pick(&["\"YWJj\"", "\"\"", "\"+/8=\""]).into(),
        "n" => rng
            .pick(&["\"2024-01-02 03:04:05\"", "12", "\"2024-01-02T03:04:05.5\""])
            .into(),
        _ => string(rng, forms),
    }
}

fn list(rng: &mut Rng, forms: Forms, item: impl Fn(&mut Rng) -> String) -> String {
    let items: Vec<String> = (0..rng.below(4)).map(|_| item(rng)).collect();
    let sep = format!("{},{}", ws(rng, forms), ws(rng, forms));
    format!("[{}{}{}]", ws(rng, forms), items.join(&sep), ws(rng, forms))
}

fn object(rng: &mut Rng, forms: Forms, members: Vec<(String, String)>) -> String {
    let sep = format!("{},{}", ws(rng, forms), ws(rng, forms));
    let colon = format!("{}:{}", ws(rng, forms), ws(rng, forms));
    let members: Vec<String> = members
        .into_iter()
        .map(|(k, v)| format!("\"{k}\"{colon}{v}"))
        .collect();
    format!(
        "{{{}{}{}}}",
        ws(rng, forms),
        members.join(&sep),
        ws(rng, forms)
    )
}

fn value(rng: &mut Rng, forms: Forms, name: &str) -> String {
    if rng.below(10) == 0 {
        return "null".into();
    }
    match name {
        "tags" => list(rng, forms, |rng| string(rng, forms)),
        "strict" => list(rng, forms, |rng| integer(rng, forms, false)),
        "attrs" => {
            let members = (0..rng.below(4))
                .map(|_| {
                    (
                        rng.pick(&["a", "b", "c", "d"]).to_owned(),
                        string(rng, forms),
                    )
                })
                .collect();
            object(rng, forms, members)
        }
        "ids" => {
            let members = (0..rng.below(4))
                .map(|_| {
                    let key = rng.pick(&["1", "2", "-3", "x"]).to_owned();
                    (key, rng.pick(&["true", "false"]).to_owned())
                })
                .collect();
            object(rng, forms, members)
        }
        "flags" => {
            let members = (0..rng.below(3))
                .map(|_| {
                    (
                        rng.pick(&["true", "false"]).to_owned(),
                        integer(rng, forms, false),
                    )
                })
                .collect();
            object(rng, forms, members)
        }
        "loc" => {
            let mut members = Vec::new();
            for k in ["lat", "lon", "LON"] {
                if rng.below(4) != 0 {
                    members.push((k.to_owned(), value(rng, forms, "lat")));
                }
            }
            object(rng, forms, members)
        }
        "events" => list(rng, forms, |rng| {
            let members = vec![
                ("k".to_owned(), string(rng, forms)),
                ("v".to_owned(), list(rng, forms, |rng| double(rng, forms))),
            ];
            object(rng, forms, members)
        }),
        _ => scalar(rng, forms, name),
    }
}

/// A record of `schema`'s columns: members left out, repeated or in another case, and
/// (in `Forms::Any`) sometimes an unknown one.
fn record(rng: &mut Rng, forms: Forms, columns: &[&str]) -> String {
    let mut members = Vec::new();
    for name in columns {
        for _ in 0..[0, 1, 1, 1, 2][rng.below(5) as usize] {
            let key = if rng.below(8) == 0 {
                name.to_uppercase()
            } else {
                (*name).to_owned()
            };
            members.push((key, value(rng, forms, name)));
        }
    }
    if forms == Forms::Any && rng.below(10) == 0 {
        members.push(("unknown".to_owned(), "1".to_owned()));
    }
    format!("{}{}", object(rng, forms, members), ws(rng, forms))
}

/// `text` with one byte inserted or deleted at a random place (kept UTF-8).
fn broken(rng: &mut Rng, text: &str) -> String {
    let mut at = rng.below(text.len() as u64 + 1) as usize;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let mut out = text.to_owned();
    if rng.below(2) == 0 && at < text.len() {
        out.remove(at);
    } else {
        out.insert(
            at,
            rng.pick(&[",", "]", "}", "\"", ":", "x", "0", "\\", "-", "."])
                .as_bytes()[0] as char,
        );
    }
    out
}

fn names(schema: &TableSchema) -> Vec<&str> {
    schema.columns.iter().map(|c| c.name.as_str()).collect()
}

/// Appends `records` to a one-pass builder and a value-tree builder of `schema`; the
/// verdicts, errors and rows must agree. Returns the one-pass builder's value-tree count
/// and how many records were accepted.
fn differential(schema: &TableSchema, records: &[String]) -> Result<(u64, usize), TestCaseError> {
    let mut direct = RecordBatchBuilder::new(schema);
    let mut tree = RecordBatchBuilder::new(schema);
    for record in records {
        let ours = direct.append_json(record);
        let theirs = tree.append_json_via_value_tree(record);
        prop_assert_eq!(&ours, &theirs, "verdicts differ for {:?}", record);
        if serde_json::from_str::<serde_json::Value>(record).is_err() {
            prop_assert!(
                ours.is_err(),
                "accepted text serde_json refuses: {:?}",
                record
            );
        }
    }
    let via_tree = direct.json_records_via_value_tree();
    let accepted = direct.len();
    prop_assert_eq!(rows(&direct.finish()), rows(&tree.finish()));
    Ok((via_tree, accepted))
}

/// [`differential`] on both schemas, with records from `generate` (given each schema's
/// column names); the counts of each.
fn on_both_schemas(
    seed: u64,
    mut generate: impl FnMut(&mut Rng, &[&str]) -> Vec<String>,
) -> Result<Vec<(u64, usize, Vec<String>)>, TestCaseError> {
    let mut rng = Rng(seed | 1);
    let mut out = Vec::new();
    for text in [NESTED, FLAT] {
        let schema = TableSchema::parse(text).expect("schema parses");
        let records = generate(&mut rng, &names(&schema));
        let (via_tree, accepted) = differential(&schema, &records)?;
        out.push((via_tree, accepted, records));
    }
    Ok(out)
}

proptest! {
    #[test]
    fn random_json_texts_decode_in_one_pass_like_serde_json(seed in any::<u64>()) {
        on_both_schemas(seed, |rng, columns| {
            (0..6)
                .map(|_| {
                    let record = record(rng, Forms::Any, columns);
                    if rng.below(4) == 0 { broken(rng, &record) } else { record }
                })
                .collect()
        })?;
    }

    #[test]
    fn records_of_plain_forms_take_the_single_pass(seed in any::<u64>()) {
        let counts = on_both_schemas(seed, |rng, columns| {
            // Every column written once (so NOT NULL ones are there), with a plain value.
            (0..4)
                .map(|_| {
                    let members = columns
                        .iter()
                        .filter(|name| !matches!(**name, "strict" | "ids" | "loc" | "flags" | "attrs"))
                        .map(|name| {
                            let mut v = value(rng, Forms::Plain, name);
                            if *name == "id" && v == "null" {
                                v = "1".into();
                            }
                            ((*name).to_owned(), v)
                        })
                        .collect();
                    object(rng, Forms::Plain, members)
                })
                .collect()
        })?;
        for (via_tree, accepted, records) in counts {
            prop_assert_eq!(accepted, records.len(), "plain records refused: {:?}", records);
            prop_assert_eq!(via_tree, 0, "plain records went through the value tree: {:?}", records);
        }
    }
}
