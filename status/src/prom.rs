//! The Prometheus text exposition format (version 0.0.4), as far as a pod's `/metrics`
//! uses it: `# HELP`/`# TYPE` comments, and sample lines `name{label="value",…} value`
//! with an optional timestamp. Label values may hold `\\`, `\"` and `\n` escapes.

use crate::error::{Result, StatusError};

/// One sample line.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Metric name (a summary's quantiles keep the base name, with a `quantile` label).
    pub name: String,
    /// Labels in the order written.
    pub labels: Vec<(String, String)>,
    /// The value (`NaN`, `+Inf` and `-Inf` included).
    pub value: f64,
}

impl Sample {
    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Every sample of one `/metrics` answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Samples(pub Vec<Sample>);

impl Samples {
    /// Parses Prometheus text; a line that is not a sample or a comment is an error.
    pub fn parse(text: &str) -> Result<Samples> {
        let mut out = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            out.push(parse_line(line).map_err(|reason| StatusError::BadLine {
                line: i + 1,
                reason,
            })?);
        }
        Ok(Samples(out))
    }

    /// The samples named `name` whose labels include every pair of `with`.
    pub fn matching<'a>(
        &'a self,
        name: &'a str,
        with: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.0
            .iter()
            .filter(move |s| s.name == name && with.iter().all(|(k, v)| s.label(k) == Some(*v)))
    }

    /// The first sample named `name` with the labels `with`.
    pub fn value(&self, name: &str, with: &[(&str, &str)]) -> Option<f64> {
        self.matching(name, with).next().map(|s| s.value)
    }

    /// The sum of every sample named `name` with the labels `with` (0 with none).
    pub fn sum(&self, name: &str, with: &[(&str, &str)]) -> f64 {
        self.matching(name, with).map(|s| s.value).sum()
    }

    /// The distinct values of label `key` among the samples named `name`, in first-seen order.
    pub fn label_values(&self, name: &str, key: &str) -> Vec<String> {
        let mut seen: Vec<String> = Vec::new();
        for s in self.matching(name, &[]) {
            if let Some(v) = s.label(key) {
                if !seen.iter().any(|x| x == v) {
                    seen.push(v.to_string());
                }
            }
        }
        seen
    }
}

fn parse_line(line: &str) -> std::result::Result<Sample, String> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .ok_or("no value after the metric name")?;
    let name = &line[..name_end];
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        || name.starts_with(|c: char| c.is_ascii_digit())
    {
        return Err(format!("bad metric name {name:?}"));
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, tail) = parse_labels(after)?;
        labels = parsed;
        rest = tail;
    }
    let mut fields = rest.split_whitespace();
    let value = fields.next().ok_or("no value")?;
    let value = parse_value(value).ok_or_else(|| format!("bad value {value:?}"))?;
    if let Some(ts) = fields.next() {
        ts.parse::<i64>()
            .map_err(|_| format!("bad timestamp {ts:?}"))?;
    }
    if fields.next().is_some() {
        return Err("text after the timestamp".into());
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

type Labels = Vec<(String, String)>;

/// Parses `k="v",…}` (the opening brace already taken); returns the labels and the rest.
fn parse_labels(mut s: &str) -> std::result::Result<(Labels, &str), String> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(rest) = s.strip_prefix('}') {
            return Ok((labels, rest));
        }
        let eq = s.find('=').ok_or("label without `=`")?;
        let key = s[..eq].trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("bad label name {key:?}"));
        }
        let mut chars = s[eq + 1..].trim_start().char_indices();
        let body = s[eq + 1..].trim_start();
        if !matches!(chars.next(), Some((_, '"'))) {
            return Err(format!("label {key} has no quoted value"));
        }
        let mut value = String::new();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c @ ('\\' | '"'))) => value.push(c),
                    _ => return Err(format!("bad escape in label {key}")),
                },
                '"' => {
                    end = Some(i + 1);
                    break;
                }
                c => value.push(c),
            }
        }
        let end = end.ok_or_else(|| format!("label {key}'s value is not closed"))?;
        labels.push((key.to_string(), value));
        s = body[end..].trim_start();
        if let Some(rest) = s.strip_prefix(',') {
            s = rest;
        } else if !s.starts_with('}') {
            return Err("labels not closed with `}`".into());
        }
    }
}

fn parse_value(v: &str) -> Option<f64> {
    match v {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => v.parse().ok(),
    }
}

/// Writes samples as Prometheus text (label values escaped), one line each.
pub fn to_text(samples: &[Sample]) -> String {
    let mut out = String::new();
    for s in samples {
        out.push_str(&s.name);
        if !s.labels.is_empty() {
            let labels: Vec<String> = s
                .labels
                .iter()
                .map(|(k, v)| {
                    let v = v
                        .replace('\\', "\\\\")
                        .replace('"', "\\\"")
                        .replace('\n', "\\n");
                    format!("{k}=\"{v}\"")
                })
                .collect();
            out.push('{');
            out.push_str(&labels.join(","));
            out.push('}');
        }
        let value = match s.value {
            v if v.is_nan() => "NaN".to_string(),
            v if v == f64::INFINITY => "+Inf".to_string(),
            v if v == f64::NEG_INFINITY => "-Inf".to_string(),
            v => format!("{v}"),
        };
        out.push(' ');
        out.push_str(&value);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> impl Strategy<Value = Sample> {
        (
            "[a-z_:][a-z0-9_:]{0,12}",
            proptest::collection::vec(("[a-z_][a-z0-9_]{0,6}", "\\PC{0,12}"), 0..4),
            prop_oneof![any::<f64>(), Just(f64::INFINITY), Just(f64::NEG_INFINITY)],
        )
            .prop_map(|(name, labels, value)| Sample {
                name,
                labels,
                value,
            })
    }

    proptest! {
        /// Any samples written as text read back as the same samples (NaN as NaN).
        #[test]
        fn samples_survive_a_round_trip_through_text(samples in proptest::collection::vec(sample(), 0..8)) {
            let back = Samples::parse(&to_text(&samples)).expect("parse");
            prop_assert_eq!(back.0.len(), samples.len());
            for (a, b) in back.0.iter().zip(&samples) {
                prop_assert_eq!(&a.name, &b.name);
                prop_assert_eq!(&a.labels, &b.labels);
                prop_assert!(a.value == b.value || (a.value.is_nan() && b.value.is_nan()));
            }
        }

        /// Arbitrary text is read or refused with a line number, never a panic.
        #[test]
        fn any_text_is_read_or_refused(text in "\\PC{0,200}") {
            match Samples::parse(&text) {
                Ok(_) => {}
                Err(StatusError::BadLine { line, .. }) => prop_assert!(line >= 1),
            }
        }
    }

    #[test]
    fn samples_labels_and_escapes_are_read() {
        let text = "# HELP x y\n# TYPE x counter\nsluice_ingest_records_total 500\n\n\
            sluice_refusals_total{code=\"NotFound\"} 2\n\
            sluice_table_freshness_seconds{table=\"main.a\\\"b\",quantile=\"0.99\"} 0.25 1700000000\n\
            sluice_x{a=\"1\" , b=\"x\\\\y\\n\",} +Inf\n";
        let s = Samples::parse(text).expect("parse");
        assert_eq!(s.0.len(), 4);
        assert_eq!(s.value("sluice_ingest_records_total", &[]), Some(500.0));
        assert_eq!(
            s.value("sluice_refusals_total", &[("code", "NotFound")]),
            Some(2.0)
        );
        assert_eq!(
            s.value(
                "sluice_table_freshness_seconds",
                &[("table", "main.a\"b"), ("quantile", "0.99")]
            ),
            Some(0.25)
        );
        assert_eq!(s.0[3].label("b"), Some("x\\y\n"));
        assert_eq!(s.value("sluice_x", &[]), Some(f64::INFINITY));
        assert_eq!(
            s.label_values("sluice_refusals_total", "code"),
            vec!["NotFound"]
        );
        assert_eq!(s.sum("absent", &[]), 0.0);
    }

    #[test]
    fn a_bad_line_is_named() {
        for (text, reason) in [
            ("ok 1\nsluice_x", "no value after the metric name"),
            ("ok 1\nsluice_x{a=\"1\" 2", "labels not closed"),
            ("ok 1\nsluice_x{a=1} 2", "no quoted value"),
            ("ok 1\nsluice_x one", "bad value"),
            ("ok 1\n9x 1", "bad metric name"),
            ("ok 1\nx{a=\"\\q\"} 1", "bad escape"),
            ("ok 1\nx 1 2 3", "after the timestamp"),
        ] {
            match Samples::parse(text) {
                Err(StatusError::BadLine { line: 2, reason: r }) => {
                    assert!(r.contains(reason), "{text:?}: {r}")
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }
}
