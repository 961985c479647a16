//! The rules of `sluice table alter`, pure (no pod, no store): an [`Alter`]
//! request checked against the table's schema gives the new schema and the
//! properties to set ([`Plan`]) or a precise refusal.
//!
//! Built: adding nullable columns at the end, and nullable fields at the end
//! of an existing STRUCT column (give the whole STRUCT with the new fields
//! after the old ones); setting `delta.*` table properties and
//! `sluice.autoEvolve` ([`AUTO_EVOLVE`]); and, with `rewrite` (`--rewrite`),
//! widening a top-level column's type, dropping columns and renaming one —
//! done by rewriting every data file in the commit of the new schema
//! (`evolve::rewrite`), because the zero-copy way (Delta `typeWidening`,
//! column mapping) is what the Delta writer Sluice commits with cannot write
//! ([`WRITER_LIMIT`]). Refused, each with its reason: a NOT NULL column
//! added; a name that exists; narrowing or another non-widening type change;
//! widening, dropping or renaming a partition column; dropping the table's last
//! column; renaming to a name that exists; widen, drop, rename without
//! `rewrite`.

use std::collections::BTreeMap;

use sluice_zeroparser::{Column, ColumnType, TableSchema};

use crate::error::{Result, ServerError};
use crate::sink::{rescued_data, system_columns, AddedColumns};

/// Why widening, dropping and renaming are refused today: deltalake-core
/// 1.1.3, which writes and commits every Sluice file, refuses tables with
/// those features (its `ProtocolChecker` lists neither `typeWidening` nor —
/// without its `datafusion` feature — `columnMapping` among the writer
/// features it supports, and its `RecordBatchWriter` refuses any table
/// whose column mapping mode is not `none`; measured by the tests in
/// `evolve::delta`). After such a change Sluice could no longer commit a
/// single row to the table. (The Python readers here refuse or misread such
/// tables too: `tests/python/test_evolve_readers.py`.)
pub const WRITER_LIMIT: &str = "the Delta writer Sluice commits with (deltalake-core 1.1.3) \
     cannot write a table with that feature, so no row could be committed after the change";

/// What one `sluice table alter` asks for.
#[derive(Debug, Clone, Default)]
pub struct Alter {
    /// New columns as SQL text (`humidity DOUBLE, site STRUCT<…>`).
    pub add_columns: Option<String>,
    /// Type changes, each `col FROM TO to` (`temp FLOAT TO DOUBLE`).
    pub widen: Vec<String>,
    /// Columns to drop.
    pub drop_columns: Vec<String>,
    /// A rename, `old TO new`.
    pub rename_column: Option<String>,
    /// Table properties to set.
    pub set_properties: BTreeMap<String, String>,
    /// Refuse unless the table's schema version is still this one.
    pub expected_schema_version: Option<i64>,
    /// Widen, drop and rename by rewriting the table's data files.
    pub rewrite: bool,
}

impl Alter {
    fn is_empty(&self) -> bool {
        self.add_columns
            .as_deref()
            .is_none_or(|t| t.trim().is_empty())
            && self.widen.is_empty()
            && self.drop_columns.is_empty()
            && self.rename_column.is_none()
            && self.set_properties.is_empty()
    }
}

/// What an accepted alter changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The table's columns after the change.
    pub schema: TableSchema,
    /// Names of the columns added or extended (for the log and the audit).
    pub added: Vec<String>,
    /// `delta.*` properties to set in the Delta table's configuration.
    pub properties: BTreeMap<String, String>,
    /// `sluice.*` properties to set in the catalog entry (`sluice.autoEvolve`).
    pub sluice_properties: BTreeMap<String, String>,
    /// Whether the data files must be rewritten (a widen, drop or rename).
    pub rewrite: bool,
    /// Columns renamed, `(old, new)`, in order.
    pub renames: Vec<(String, String)>,
}

/// How to ask for a rewrite, appended to the refusals without one.
const ASK_REWRITE: &str = "give --rewrite (`\"rewrite\": true` in the PATCH body) to rewrite \
     every data file of the table under the new schema in the same Delta commit";

/// The table property that lets JSON records with unknown top-level keys add
/// nullable columns (`add-columns`; `off` or absent: unknown keys fail the
/// record, or go to `_rescued_data`).
pub const AUTO_EVOLVE: &str = "sluice.autoEvolve";

/// The values [`AUTO_EVOLVE`] takes.
pub const AUTO_EVOLVE_VALUES: [&str; 2] = ["add-columns", "off"];

/// The Delta type changes of the `typeWidening` feature.
fn is_widening(from: &ColumnType, to: &ColumnType) -> bool {
    use ColumnType as T;
    matches!(
        (from, to),
        (T::TinyInt, T::SmallInt | T::Int | T::BigInt)
            | (T::SmallInt, T::Int | T::BigInt)
            | (T::Int, T::BigInt)
            | (T::Float, T::Double)
            | (T::Date, T::TimestampNtz)
    )
}

/// Checks `alter` against a table of `schema` (with the columns Sluice adds,
/// `added`, and the Delta partition columns `partitions`).
pub fn plan(
    schema: &TableSchema,
    added: AddedColumns,
    partitions: &[String],
    alter: &Alter,
) -> Result<Plan> {
    if alter.is_empty() {
        return Err(ServerError::InvalidArgument(
            "alter: nothing to change; give --add-columns, --widen, --drop-columns, \
             --rename-column or --set-property"
                .into(),
        ));
    }
    let mut next = schema.clone();
    for text in &alter.widen {
        widen(&mut next, partitions, text, alter.rewrite)?;
    }
    for name in &alter.drop_columns {
        drop_column(&mut next, added, partitions, name, alter.rewrite)?;
    }
    let mut renames = Vec::new();
    if let Some(text) = &alter.rename_column {
        renames.push(rename(&mut next, added, partitions, text, alter.rewrite)?);
    }
    let rewrite = next != *schema;
    let (properties, sluice_properties) = check_properties(&alter.set_properties)?;
    let mut names = Vec::new();
    if let Some(text) = alter
        .add_columns
        .as_deref()
        .filter(|t| !t.trim().is_empty())
    {
        let new = TableSchema::parse(text)
            .map_err(|e| ServerError::InvalidArgument(format!("add columns: {e}")))?;
        for column in new.columns {
            check_reserved(added, &column.name)?;
            names.push(column.name.clone());
            add_column(&mut next.columns, column, "")?;
        }
        next.validate()
            .map_err(|e| ServerError::InvalidArgument(format!("add columns: {e}")))?;
    }
    Ok(Plan {
        schema: next,
        added: names,
        properties,
        sluice_properties,
        rewrite,
        renames,
    })
}

/// Adds `column` to `columns` (the fields at `path`): appended when new,
/// merged when it extends an existing STRUCT.
fn add_column(columns: &mut Vec<Column>, column: Column, path: &str) -> Result<()> {
    let at = format!("{path}{}", column.name);
    let existing = columns
        .iter_mut()
        .find(|c| c.name.eq_ignore_ascii_case(&column.name));
    let Some(existing) = existing else {
        if !column.nullable {
            return Err(ServerError::InvalidArgument(format!(
                "add columns: `{at}` is NOT NULL; a column added to a table must be nullable \
                 (the rows already written have no value for it)"
            )));
        }
        columns.push(column);
        return Ok(());
    };
    match (&mut existing.data_type, column.data_type) {
        (ColumnType::Struct(have), ColumnType::Struct(want)) if existing.name == column.name => {
            if want.len() < have.len()
                || have
                    .iter()
                    .zip(&want)
                    .any(|(h, w)| h.name != w.name || h.nullable != w.nullable)
            {
                return Err(ServerError::InvalidArgument(format!(
                    "add columns: STRUCT `{at}` exists; to add fields to it give its fields \
                     as they are, in order, followed by the new ones"
                )));
            }
            let mut fields = want.into_iter();
            for have_field in have.iter_mut() {
                let Some(w) = fields.next() else { break };
                if let (ColumnType::Struct(_), ColumnType::Struct(_)) =
                    (&have_field.data_type, &w.data_type)
                {
                    let mut inner = vec![have_field.clone()];
                    add_column(&mut inner, w, &format!("{at}."))?;
                    *have_field = inner.remove(0);
                } else if have_field.data_type != w.data_type {
                    return Err(ServerError::InvalidArgument(format!(
                        "add columns: field `{at}.{}` is {}, not {}; adding columns never \
                         changes a type",
                        w.name,
                        have_field.data_type.sql(),
                        w.data_type.sql()
                    )));
                }
            }
            let before = have.len();
            for field in fields {
                add_column(have, field, &format!("{at}."))?;
            }
            if have.len() == before {
                return Err(ServerError::InvalidArgument(format!(
                    "add columns: STRUCT `{at}` already has every field given"
                )));
            }
            Ok(())
        }
        _ => Err(ServerError::InvalidArgument(format!(
            "add columns: the table already has a column `{}`",
            existing.name
        ))),
    }
}

/// Refuses the names of the columns Sluice adds itself.
fn check_reserved(added: AddedColumns, name: &str) -> Result<()> {
    let lower = name.to_ascii_lowercase();
    let reserved = (added.rescued_data && lower == rescued_data::delta_field().name().as_str())
        || (added.system_columns && system_columns::NAMES.contains(&lower.as_str()));
    if reserved {
        return Err(ServerError::InvalidArgument(format!(
            "column `{name}` is one Sluice adds to this table itself"
        )));
    }
    Ok(())
}

fn column<'s>(schema: &'s TableSchema, name: &str, what: &str) -> Result<&'s Column> {
    schema
        .column_index(name)
        .map(|i| &schema.columns[i])
        .ok_or_else(|| ServerError::InvalidArgument(format!("{what}: no column `{name}`")))
}

fn parse_type(text: &str, what: &str) -> Result<ColumnType> {
    TableSchema::parse(&format!("x {text}"))
        .map(|mut s| s.columns.remove(0).data_type)
        .map_err(|e| ServerError::InvalidArgument(format!("{what}: type `{text}`: {e}")))
}

/// `col FROM TO to`: the column has type FROM; TO must be a Delta type
/// widening. Changes the column's type in `next` (with `rewrite`).
fn widen(next: &mut TableSchema, partitions: &[String], text: &str, rewrite: bool) -> Result<()> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let [name, from, to_kw, to] = words.as_slice() else {
        return Err(ServerError::InvalidArgument(format!(
            "widen: `{text}` must be `COLUMN FROM_TYPE TO TO_TYPE`, e.g. `temp FLOAT TO DOUBLE`"
        )));
    };
    if !to_kw.eq_ignore_ascii_case("TO") {
        return Err(ServerError::InvalidArgument(format!(
            "widen: `{text}` must be `COLUMN FROM_TYPE TO TO_TYPE`"
        )));
    }
    let have = column(next, name, "widen")?.clone();
    check_not_partition(partitions, &have.name, "widen")?;
    let (from, to) = (parse_type(from, "widen")?, parse_type(to, "widen")?);
    if have.data_type != from {
        return Err(ServerError::InvalidArgument(format!(
            "widen: column `{}` is {}, not {}",
            have.name,
            have.data_type.sql(),
            from.sql()
        )));
    }
    if !is_widening(&from, &to) {
        return Err(ServerError::InvalidArgument(format!(
            "widen: {} → {} of column `{}` is not a type widening (narrowing and other type \
             changes are refused; Delta widens TINYINT→SMALLINT→INT→BIGINT, FLOAT→DOUBLE, \
             DATE→TIMESTAMP_NTZ)",
            from.sql(),
            to.sql(),
            have.name
        )));
    }
    if !rewrite {
        return Err(ServerError::Unimplemented(format!(
            "widen: {} → {} of column `{}` in place needs the Delta table feature \
             typeWidening; {WRITER_LIMIT}; {ASK_REWRITE}",
            from.sql(),
            to.sql(),
            have.name
        )));
    }
    let i = next.column_index(name).unwrap_or_default();
    next.columns[i].data_type = to;
    Ok(())
}

/// Refuses a change of partition column `name`.
fn check_not_partition(partitions: &[String], name: &str, what: &str) -> Result<()> {
    if partitions.iter().any(|p| p.eq_ignore_ascii_case(name)) {
        return Err(ServerError::InvalidArgument(format!(
            "{what}: `{name}` is a partition column of the Delta table and cannot be changed"
        )));
    }
    Ok(())
}

/// Removes column `name` from `next` (with `rewrite`).
fn drop_column(
    next: &mut TableSchema,
    added: AddedColumns,
    partitions: &[String],
    name: &str,
    rewrite: bool,
) -> Result<()> {
    check_reserved(added, name)?;
    let have = column(next, name, "drop columns")?.name.clone();
    check_not_partition(partitions, &have, "drop columns")?;
    if next.columns.len() == 1 {
        return Err(ServerError::InvalidArgument(format!(
            "drop columns: `{have}` is the table's last column; a table keeps at least one \
             (drop the table instead)"
        )));
    }
    if !rewrite {
        return Err(ServerError::Unimplemented(format!(
            "drop columns: dropping `{have}` in place needs Delta column mapping (mode \
             name); {WRITER_LIMIT}; {ASK_REWRITE}"
        )));
    }
    next.columns.retain(|c| c.name != have);
    Ok(())
}

/// `old TO new`: renames the column in `next` (with `rewrite`); returns `(old, new)`.
fn rename(
    next: &mut TableSchema,
    added: AddedColumns,
    partitions: &[String],
    text: &str,
    rewrite: bool,
) -> Result<(String, String)> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let [old, to_kw, new] = words.as_slice() else {
        return Err(ServerError::InvalidArgument(format!(
            "rename column: `{text}` must be `OLD TO NEW`"
        )));
    };
    if !to_kw.eq_ignore_ascii_case("TO") {
        return Err(ServerError::InvalidArgument(format!(
            "rename column: `{text}` must be `OLD TO NEW`"
        )));
    }
    let have = column(next, old, "rename column")?.name.clone();
    check_reserved(added, new)?;
    check_not_partition(partitions, &have, "rename column")?;
    if let Some(i) = next.column_index(new) {
        return Err(ServerError::InvalidArgument(format!(
            "rename column: cannot rename `{have}` to `{new}`: the table already has a column `{}`",
            next.columns[i].name
        )));
    }
    if !rewrite {
        return Err(ServerError::Unimplemented(format!(
            "rename column: renaming `{have}` in place needs Delta column mapping (mode \
             name); {WRITER_LIMIT}; {ASK_REWRITE}"
        )));
    }
    let i = next.column_index(&have).unwrap_or_default();
    next.columns[i].name = (*new).to_string();
    next.validate()
        .map_err(|e| ServerError::InvalidArgument(format!("rename column: {e}")))?;
    Ok((have, (*new).to_string()))
}

/// Splits the properties into `delta.*` ones and `sluice.autoEvolve`;
/// refuses the others with the reason.
type Properties = BTreeMap<String, String>;
fn check_properties(set: &Properties) -> Result<(Properties, Properties)> {
    let (mut delta, mut sluice) = (Properties::new(), Properties::new());
    for (key, value) in set {
        if key.starts_with("delta.columnMapping") || key.starts_with("delta.enableTypeWidening") {
            return Err(ServerError::Unimplemented(format!(
                "set property: `{key}`: {WRITER_LIMIT}"
            )));
        }
        if key.starts_with("delta.") {
            delta.insert(key.clone(), value.clone());
            continue;
        }
        if key == AUTO_EVOLVE {
            if !AUTO_EVOLVE_VALUES.contains(&value.as_str()) {
                return Err(ServerError::InvalidArgument(format!(
                    "set property: `{AUTO_EVOLVE}` is `add-columns` or `off`, not `{value}`"
                )));
            }
            sluice.insert(key.clone(), value.clone());
            continue;
        }
        let why = if key == rescued_data::PROPERTY || key == system_columns::PROPERTY {
            "it is set when the table is created (`--rescued-data`, `--system-columns`)"
        } else {
            "only delta.* properties and sluice.autoEvolve can be set"
        };
        return Err(ServerError::InvalidArgument(format!(
            "set property: `{key}`: {why}"
        )));
    }
    Ok((delta, sluice))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(text: &str) -> TableSchema {
        TableSchema::parse(text).expect("schema")
    }

    fn add(text: &str) -> Alter {
        Alter {
            add_columns: Some(text.into()),
            ..Alter::default()
        }
    }

    fn refused(s: &TableSchema, alter: &Alter) -> String {
        match plan(s, AddedColumns::default(), &["day".into()], alter) {
            Ok(p) => panic!("accepted: {p:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn nullable_columns_are_appended_and_structs_extended() {
        let s = schema("id BIGINT NOT NULL, site STRUCT<name: STRING>");
        let p = plan(
            &s,
            AddedColumns::default(),
            &[],
            &add("humidity DOUBLE, site STRUCT<name: STRING, elevation: DOUBLE>"),
        )
        .expect("plan");
        assert_eq!(
            p.schema.to_sql(),
            schema(
                "id BIGINT NOT NULL, site STRUCT<name: STRING, elevation: DOUBLE>, humidity DOUBLE"
            )
            .to_sql()
        );
        assert_eq!(p.added, ["humidity", "site"]);
    }

    #[test]
    fn a_struct_inside_a_struct_gets_its_new_fields_too() {
        let s = schema("id BIGINT, site STRUCT<name: STRING, pos: STRUCT<lat: DOUBLE>>");
        let p = plan(
            &s,
            AddedColumns::default(),
            &[],
            &add("site STRUCT<name: STRING, pos: STRUCT<lat: DOUBLE, lon: DOUBLE>, code: INT>"),
        )
        .expect("plan");
        assert_eq!(
            p.schema.to_sql(),
            schema("id BIGINT, site STRUCT<name: STRING, pos: STRUCT<lat: DOUBLE, lon: DOUBLE>, code: INT>")
                .to_sql()
        );
        let e = plan(
            &s,
            AddedColumns::default(),
            &[],
            &add("site STRUCT<name: STRING, pos: STRUCT<lat: FLOAT>>"),
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(e.contains("`site.pos.lat` is DOUBLE, not FLOAT"), "{e}");
    }

    #[test]
    fn each_refusal_names_its_reason() {
        let s =
            schema("id BIGINT NOT NULL, temp DOUBLE, t FLOAT, site STRUCT<name: STRING>, day DATE");
        let cases: Vec<(Alter, &str)> = vec![
            (Alter::default(), "nothing to change"),
            (add("humidity DOUBLE NOT NULL"), "must be nullable"),
            (add("temp DOUBLE"), "already has a column `temp`"),
            (
                add("site STRUCT<elevation: DOUBLE>"),
                "give its fields as they are",
            ),
            (add("site STRUCT<name: STRING>"), "already has every field"),
            (
                add("site STRUCT<name: STRING, e: DOUBLE NOT NULL>"),
                "`site.e` is NOT NULL",
            ),
            (
                Alter {
                    widen: vec!["temp DOUBLE TO FLOAT".into()],
                    ..Alter::default()
                },
                "not a type widening",
            ),
            (
                Alter {
                    widen: vec!["temp FLOAT TO DOUBLE".into()],
                    ..Alter::default()
                },
                "column `temp` is DOUBLE, not FLOAT",
            ),
            (
                Alter {
                    widen: vec!["t FLOAT TO DOUBLE".into()],
                    ..Alter::default()
                },
                "typeWidening",
            ),
            (
                Alter {
                    drop_columns: vec!["day".into()],
                    ..Alter::default()
                },
                "partition column",
            ),
            (
                Alter {
                    drop_columns: vec!["temp".into()],
                    ..Alter::default()
                },
                "column mapping",
            ),
            (
                Alter {
                    drop_columns: vec!["nope".into()],
                    ..Alter::default()
                },
                "no column `nope`",
            ),
            (
                Alter {
                    rename_column: Some("temp TO T".into()),
                    ..Alter::default()
                },
                "already has a column `t`",
            ),
            (
                Alter {
                    rename_column: Some("temp TO celsius".into()),
                    ..Alter::default()
                },
                "column mapping",
            ),
            (
                Alter {
                    set_properties: [("sluice.rescuedData".to_string(), "true".to_string())].into(),
                    ..Alter::default()
                },
                "set when the table is created",
            ),
            (
                Alter {
                    set_properties: [("sluice.autoEvolve".to_string(), "yes".to_string())].into(),
                    ..Alter::default()
                },
                "is `add-columns` or `off`, not `yes`",
            ),
            (
                Alter {
                    set_properties: [("delta.enableTypeWidening".to_string(), "true".to_string())]
                        .into(),
                    ..Alter::default()
                },
                "deltalake-core 1.1.3",
            ),
        ];
        for (alter, want) in cases {
            let got = refused(&s, &alter);
            assert!(got.contains(want), "{alter:?}: {got}");
        }
    }

    #[test]
    fn with_rewrite_widen_drop_and_rename_give_the_new_schema() {
        let s = schema("id BIGINT NOT NULL, t FLOAT, d DATE, n INT, note STRING, day DATE");
        let alter = Alter {
            widen: vec![
                "t FLOAT TO DOUBLE".into(),
                "d DATE TO TIMESTAMP_NTZ".into(),
                "n INT TO BIGINT".into(),
            ],
            drop_columns: vec!["note".into()],
            rename_column: Some("t TO celsius".into()),
            rewrite: true,
            ..Alter::default()
        };
        let p = plan(&s, AddedColumns::default(), &["day".into()], &alter).expect("plan");
        assert!(p.rewrite);
        assert_eq!(
            p.schema.to_sql(),
            schema("id BIGINT NOT NULL, celsius DOUBLE, d TIMESTAMP_NTZ, n BIGINT, day DATE")
                .to_sql()
        );
        assert_eq!(p.renames, [("t".to_string(), "celsius".to_string())]);
        // An additive change alone needs no rewrite, even when asked.
        let p = plan(
            &s,
            AddedColumns::default(),
            &[],
            &Alter {
                rewrite: true,
                ..add("h DOUBLE")
            },
        )
        .expect("plan");
        assert!(!p.rewrite);
        let refusals: Vec<(Alter, &str)> = vec![
            (
                Alter {
                    drop_columns: vec![
                        "id".into(),
                        "t".into(),
                        "d".into(),
                        "n".into(),
                        "note".into(),
                        "day".into(),
                    ],
                    rewrite: true,
                    ..Alter::default()
                },
                "partition column",
            ),
            (
                Alter {
                    rename_column: Some("day TO d2".into()),
                    rewrite: true,
                    ..Alter::default()
                },
                "partition column",
            ),
            (
                Alter {
                    widen: vec!["day DATE TO TIMESTAMP_NTZ".into()],
                    rewrite: true,
                    ..Alter::default()
                },
                "partition column",
            ),
            (
                Alter {
                    widen: vec!["n INT TO SMALLINT".into()],
                    rewrite: true,
                    ..Alter::default()
                },
                "not a type widening",
            ),
            (
                Alter {
                    widen: vec!["note STRING TO BINARY".into()],
                    rewrite: true,
                    ..Alter::default()
                },
                "not a type widening",
            ),
            (
                Alter {
                    drop_columns: vec!["note".into()],
                    rename_column: Some("note TO x".into()),
                    rewrite: true,
                    ..Alter::default()
                },
                "no column `note`",
            ),
            (
                Alter {
                    drop_columns: vec!["note".into()],
                    ..Alter::default()
                },
                "give --rewrite",
            ),
        ];
        for (alter, want) in refusals {
            let got = refused(&s, &alter);
            assert!(got.contains(want), "{alter:?}: {got}");
        }
        let one = schema("id BIGINT");
        let last = Alter {
            drop_columns: vec!["id".into()],
            rewrite: true,
            ..Alter::default()
        };
        assert!(refused(&one, &last).contains("the table's last column"));
    }

    #[test]
    fn sluice_added_columns_cannot_be_added_again() {
        let s = schema("id BIGINT");
        let added = AddedColumns {
            rescued_data: true,
            system_columns: true,
        };
        for name in ["_rescued_data", "_sluice_offset"] {
            let e = plan(&s, added, &[], &add(&format!("{name} STRING"))).err();
            assert!(
                e.as_ref()
                    .is_some_and(|e| e.to_string().contains("Sluice adds")),
                "{name}: {e:?}"
            );
        }
    }

    #[test]
    fn delta_properties_are_set() {
        let s = schema("id BIGINT");
        let alter = Alter {
            set_properties: [("delta.checkpointInterval".to_string(), "5".to_string())].into(),
            ..Alter::default()
        };
        let p = plan(&s, AddedColumns::default(), &[], &alter).expect("plan");
        assert_eq!(p.schema, s);
        assert_eq!(p.properties.len(), 1);
    }
}
