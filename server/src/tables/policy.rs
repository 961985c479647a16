//! The rules a new table is checked against, pure (no pod, no store): its
//! name, the columns its Delta table gets, the `sluice.*` properties, and
//! which storage locations it may attach to.

use std::collections::HashMap;

use sluice_zeroparser::TableSchema;

use crate::error::{Result, ServerError};
use crate::sink::{rescued_data, system_columns};

/// Checks and splits `catalog.schema.table` (names: letters, digits, `_`),
/// lowercased.
pub fn split_name(full: &str) -> Result<(String, String, String)> {
    let parts: Vec<&str> = full.split('.').collect();
    let valid = |p: &str| {
        !p.is_empty() && p.len() <= 255 && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    match parts.as_slice() {
        [c, s, t] if valid(c) && valid(s) && valid(t) => Ok((
            c.to_ascii_lowercase(),
            s.to_ascii_lowercase(),
            t.to_ascii_lowercase(),
        )),
        _ => Err(ServerError::InvalidArgument(format!(
            "table name `{full}` must be catalog.schema.table (letters, digits and _)"
        ))),
    }
}

/// Parses a new table's columns (SQL text, e.g. `id BIGINT NOT NULL, name STRING`).
pub fn parse_columns(columns: &str) -> Result<TableSchema> {
    if columns.trim().is_empty() {
        return Err(ServerError::InvalidArgument(
            "a table needs at least one column".into(),
        ));
    }
    TableSchema::parse(columns).map_err(|e| ServerError::InvalidArgument(format!("columns: {e}")))
}

/// Whether the `sluice.*` table property `name` is set to `true` (any case).
pub fn property_on(properties: &HashMap<String, String>, name: &str) -> bool {
    properties
        .get(name)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// The columns the server adds after a table's own, as its properties ask.
pub fn added_columns(
    schema: &TableSchema,
    properties: &HashMap<String, String>,
) -> Result<crate::sink::AddedColumns> {
    let added = crate::sink::AddedColumns {
        rescued_data: property_on(properties, rescued_data::PROPERTY),
        system_columns: property_on(properties, system_columns::PROPERTY),
    };
    if added.rescued_data {
        rescued_data::check_schema(schema)?;
    }
    Ok(added)
}

pub use crate::sink::delta_columns;

/// The `delta.*` properties, which go to a new Delta table's configuration.
pub fn delta_configuration(
    properties: &HashMap<String, String>,
) -> impl Iterator<Item = (String, Option<String>)> + '_ {
    properties
        .iter()
        .filter(|(k, _)| k.starts_with("delta."))
        .map(|(k, v)| (k.clone(), Some(v.clone())))
}

/// The URL of an explicit `storage_location`: same scheme as the warehouse
/// `root` (its storage options must fit), ending with `/`. An absolute local
/// path (`/data/t`) is taken as the `file://` URL of that directory; a relative
/// path is refused (it would be relative to the server's working directory,
/// not the caller's).
pub fn attach_url(root: &url::Url, location: &str) -> Result<url::Url> {
    if location.starts_with('/') {
        let url = url::Url::from_directory_path(location).map_err(|()| {
            ServerError::InvalidArgument(format!(
                "storage_location `{location}`: not a usable path"
            ))
        })?;
        return attach_url(root, url.as_str());
    }
    if !location.contains("://") {
        return Err(ServerError::InvalidArgument(format!(
            "storage_location `{location}` is neither a URL nor an absolute path \
             (give s3://bucket/prefix, file:///dir or /dir)"
        )));
    }
    let with_slash = if location.ends_with('/') {
        location.to_string()
    } else {
        format!("{location}/")
    };
    let url = url::Url::parse(&with_slash)
        .map_err(|e| ServerError::InvalidArgument(format!("storage_location `{location}`: {e}")))?;
    if url.scheme() != root.scheme() {
        return Err(ServerError::InvalidArgument(format!(
            "storage_location `{location}` is not on the warehouse's store ({})",
            root.scheme()
        )));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::AddedColumns;

    fn props(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn names_are_three_checked_parts_lowercased() {
        assert_eq!(
            split_name("Main.Default.Events_1").ok(),
            Some(("main".into(), "default".into(), "events_1".into()))
        );
        for bad in ["t", "s.t", "a.b.c.d", "a..c", "a.b-c.d", "a.b.c d", ""] {
            assert!(
                matches!(split_name(bad), Err(ServerError::InvalidArgument(_))),
                "{bad:?} accepted"
            );
        }
        assert!(split_name(&format!("a.b.{}", "t".repeat(256))).is_err());
    }

    #[test]
    fn a_table_needs_columns_that_parse() {
        let e = parse_columns(" ").err();
        assert!(
            matches!(&e, Some(ServerError::InvalidArgument(m)) if m == "a table needs at least one column"),
            "{e:?}"
        );
        let e = parse_columns("id NOSUCHTYPE").err();
        assert!(
            matches!(&e, Some(ServerError::InvalidArgument(m)) if m.starts_with("columns: ")),
            "{e:?}"
        );
        assert_eq!(
            parse_columns("id BIGINT").map(|s| s.columns.len()).ok(),
            Some(1)
        );
    }

    #[test]
    fn added_columns_follow_the_sluice_properties() {
        let schema = parse_columns("id BIGINT").expect("schema");
        let on = props(&[
            ("sluice.rescuedData", "TRUE"),
            ("sluice.systemColumns", "true"),
        ]);
        let added = added_columns(&schema, &on).expect("added");
        assert!(added.rescued_data && added.system_columns);
        let off = props(&[("sluice.rescuedData", "yes")]);
        assert_eq!(
            added_columns(&schema, &off).ok(),
            Some(AddedColumns::default())
        );
        // A table that has a `_rescued_data` column of its own cannot keep one.
        let clash = parse_columns("_rescued_data STRING").expect("schema");
        assert!(added_columns(&clash, &on).is_err());
    }

    #[test]
    fn delta_columns_are_the_tables_then_rescued_data_then_system_columns() {
        let schema = parse_columns("id BIGINT, name STRING").expect("schema");
        let names = |added| -> Vec<String> {
            delta_columns(&schema, added)
                .expect("fields")
                .iter()
                .map(|f| f.name().to_string())
                .collect()
        };
        assert_eq!(names(AddedColumns::default()), ["id", "name"]);
        let all = names(AddedColumns {
            rescued_data: true,
            system_columns: true,
        });
        let system: Vec<String> = system_columns::delta_fields()
            .iter()
            .map(|f| f.name().to_string())
            .collect();
        assert_eq!(all[..3], ["id", "name", "_rescued_data"]);
        assert_eq!(all[3..], system[..]);
    }

    #[test]
    fn only_delta_properties_configure_the_delta_table() {
        let p = props(&[
            ("delta.checkpointInterval", "5"),
            ("sluice.systemColumns", "true"),
        ]);
        let config: Vec<_> = delta_configuration(&p).collect();
        assert_eq!(
            config,
            [(
                "delta.checkpointInterval".to_string(),
                Some("5".to_string())
            )]
        );
    }

    #[test]
    fn attached_locations_are_on_the_warehouse_store_and_end_with_a_slash() {
        let root = url::Url::parse("s3://bucket/warehouse/").expect("url");
        assert_eq!(
            attach_url(&root, "s3://other/t")
                .map(|u| u.to_string())
                .ok(),
            Some("s3://other/t/".to_string())
        );
        assert!(matches!(
            attach_url(&root, "file:///tmp/t"),
            Err(ServerError::InvalidArgument(m)) if m.contains("not on the warehouse's store (s3)")
        ));
        assert!(matches!(
            attach_url(&root, "not a url"),
            Err(ServerError::InvalidArgument(m)) if m.contains("neither a URL nor an absolute path")
        ));
    }

    #[test]
    fn an_absolute_path_is_the_file_url_of_that_directory_and_a_relative_one_is_refused() {
        let root = url::Url::parse("file:///srv/warehouse/").expect("url");
        assert_eq!(
            attach_url(&root, "/data/t").map(|u| u.to_string()).ok(),
            Some("file:///data/t/".to_string())
        );
        assert_eq!(
            attach_url(&root, "/data/t/").map(|u| u.to_string()).ok(),
            Some("file:///data/t/".to_string())
        );
        assert!(matches!(
            attach_url(&root, "data/t"),
            Err(ServerError::InvalidArgument(m)) if m.contains("absolute path")
        ));
        let s3 = url::Url::parse("s3://bucket/w/").expect("url");
        assert!(matches!(
            attach_url(&s3, "/data/t"),
            Err(ServerError::InvalidArgument(m)) if m.contains("not on the warehouse's store (s3)")
        ));
    }
}
