//! `sluice table create|list|describe|alter|drop|optimize|vacuum`: clients of the
//! pod's Unity-Catalog-shaped tables API (`optimize` and `vacuum` are in
//! [`super::upkeep`]).

use std::time::Duration;

use clap::Subcommand;
use reqwest::Method;
use serde_json::Value;
use sluice_server::http::{column_infos, TableInfo};
use sluice_server::otlp::Signal;
use sluice_server::sink::{rescued_data, system_columns};
use sluice_server::{Result, ServerError};
use sluice_zeroparser::TableSchema;

use super::client::{parse_answer, Client, ConnArgs};

/// The table commands.
#[derive(Subcommand)]
pub enum TableCommand {
    /// Create catalog.schema.table with the given columns.
    Create {
        /// catalog.schema.table
        name: String,
        /// e.g. "id BIGINT NOT NULL, device STRING, tags ARRAY<STRING>"
        #[arg(long, required_unless_present = "otlp", conflicts_with = "otlp")]
        columns: Option<String>,
        /// Create the flattened OpenTelemetry table of this signal (one row per span, log
        /// record or metric data point) instead of --columns.
        #[arg(long, value_parser = parse_signal)]
        otlp: Option<Signal>,
        /// Where the Delta table lives (default: under the warehouse); a Delta
        /// table already there with the same columns is attached, not created.
        #[arg(long)]
        location: Option<String>,
        /// Delta table property KEY=VALUE (repeatable), e.g. delta.checkpointInterval=10.
        #[arg(long = "property", value_parser = parse_property)]
        properties: Vec<(String, String)>,
        /// Add the system columns _sluice_stream_id, _sluice_offset, _sluice_ingested_at.
        #[arg(long)]
        system_columns: bool,
        /// Add the _rescued_data column: record fields that do not fit the columns are kept
        /// there as JSON text instead of failing the record.
        #[arg(long)]
        rescued_data: bool,
    },
    /// List tables.
    List,
    /// Show a table's columns and location.
    Describe {
        /// catalog.schema.table
        name: String,
        /// Print the Unity Catalog JSON.
        #[arg(long)]
        json: bool,
    },
    /// Change a table's schema or properties while streams keep flowing
    /// (one Delta metadata commit; see README "Evolving a table").
    Alter {
        /// catalog.schema.table
        name: String,
        /// Nullable columns to append, e.g. "humidity DOUBLE, site STRUCT<name: STRING>";
        /// an existing STRUCT given with extra fields after its own gets those fields.
        #[arg(long)]
        add_columns: Option<String>,
        /// A type widening "COLUMN FROM TO TO_TYPE" (repeatable), e.g. "temp FLOAT TO DOUBLE".
        #[arg(long)]
        widen: Vec<String>,
        /// Columns to drop, comma-separated.
        #[arg(long, value_delimiter = ',')]
        drop_columns: Vec<String>,
        /// A rename "OLD TO NEW".
        #[arg(long)]
        rename_column: Option<String>,
        /// Table property KEY=VALUE to set (repeatable), e.g. delta.logRetentionDuration=...
        #[arg(long = "set-property", value_parser = parse_property)]
        set_properties: Vec<(String, String)>,
        /// Refuse unless the table's schema version (shown by describe) is still this.
        #[arg(long)]
        expected_schema_version: Option<i64>,
        /// Let --widen, --drop-columns and --rename-column rewrite every data
        /// file of the table under the new schema, in the same Delta commit
        /// (cost: the whole table is read and written once).
        #[arg(long)]
        rewrite: bool,
    },
    /// Drop a table and delete its data.
    Drop {
        /// catalog.schema.table
        name: String,
    },
    /// Compact the table's small files now (runs beside ingest).
    Optimize {
        /// catalog.schema.table
        name: String,
    },
    /// Delete files the table removed more than the retention period ago.
    Vacuum {
        /// catalog.schema.table
        name: String,
        /// e.g. 168h; default the table's delta.deletedFileRetentionDuration (7 days).
        #[arg(long, value_parser = humantime::parse_duration)]
        retention: Option<Duration>,
    },
}

fn parse_signal(text: &str) -> std::result::Result<Signal, String> {
    Signal::parse(text).ok_or_else(|| "expected traces, logs or metrics".into())
}

fn parse_property(text: &str) -> std::result::Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => Err("expected KEY=VALUE".into()),
    }
}

/// Runs a table command against the pod of `conn`.
pub async fn run(conn: ConnArgs, command: TableCommand) -> anyhow::Result<()> {
    let client = conn.connect().await?;
    match command {
        TableCommand::Create {
            name,
            columns,
            otlp,
            location,
            mut properties,
            system_columns,
            rescued_data,
        } => {
            for (on, property) in [
                (system_columns, system_columns::PROPERTY),
                (rescued_data, rescued_data::PROPERTY),
            ] {
                if on {
                    properties.push((property.to_string(), "true".to_string()));
                }
            }
            let columns = match (otlp, columns) {
                (Some(signal), _) => signal.columns_sql(),
                (None, Some(columns)) => columns,
                (None, None) => anyhow::bail!("give --columns or --otlp"),
            };
            let info = client
                .create_table(&name, &columns, location.as_deref(), &properties)
                .await?;
            println!("created {}", info.full_name);
            print!("{}", describe_text(&info));
        }
        TableCommand::List => {
            for t in client.list_tables().await? {
                println!("{}", t.full_name);
            }
        }
        TableCommand::Describe { name, json } => {
            let info = client.describe_table(&name).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&info)?);
            } else {
                print!("{}", describe_text(&info));
            }
        }
        TableCommand::Alter {
            name,
            add_columns,
            widen,
            drop_columns,
            rename_column,
            set_properties,
            expected_schema_version,
            rewrite,
        } => {
            let body = serde_json::json!({
                "add_columns": add_columns,
                "widen": widen,
                "drop_columns": drop_columns,
                "rename_column": rename_column,
                "set_properties": set_properties.into_iter().collect::<std::collections::BTreeMap<_, _>>(),
                "expected_schema_version": expected_schema_version,
                "rewrite": rewrite,
            });
            let info = client.alter_table(&name, &body).await?;
            println!(
                "altered {} (schema version {})",
                info.full_name, info.schema_version
            );
            print!("{}", describe_text(&info));
        }
        TableCommand::Drop { name } => {
            client.drop_table(&name).await?;
            println!("dropped {name}");
        }
        TableCommand::Optimize { name } => {
            let mut progress = super::progress::Progress::start();
            let message = format!("optimizing {name}: compacting small files on the pod");
            let report = progress
                .during(&message, client.optimize_table(&name))
                .await?;
            progress.finish(&super::progress::optimize_summary(&name, &report));
            println!("{}", serde_json::to_string_pretty(&report)?);
        }
        TableCommand::Vacuum { name, retention } => {
            let mut progress = super::progress::Progress::start();
            let message = format!("vacuuming {name}: deleting removed files on the pod");
            let report = progress
                .during(&message, client.vacuum_table(&name, retention))
                .await?;
            progress.finish(&super::progress::vacuum_summary(&name, &report));
            println!("{}", serde_json::to_string_pretty(&report)?);
        }
    }
    Ok(())
}

/// A request to the tables API: `path` is empty or `/NAME`.
fn tables(client: &Client, method: Method, path: &str) -> reqwest::RequestBuilder {
    client.api(method, &format!("/api/2.1/unity-catalog/tables{path}"))
}

impl Client {
    /// Creates `name` with the columns given as SQL text.
    pub async fn create_table(
        &self,
        name: &str,
        columns: &str,
        location: Option<&str>,
        properties: &[(String, String)],
    ) -> Result<TableInfo> {
        let schema = TableSchema::parse(columns)
            .map_err(|e| ServerError::InvalidArgument(format!("--columns: {e}")))?;
        let mut body = serde_json::json!({
            "name": name,
            "table_type": "MANAGED",
            "data_source_format": "DELTA",
            "columns": column_infos(&schema)?,
        });
        if let Some(location) = location {
            body["storage_location"] = serde_json::json!(location);
        }
        if !properties.is_empty() {
            let map: serde_json::Map<String, Value> = properties
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            body["properties"] = Value::Object(map);
        }
        let v = self
            .send(tables(self, Method::POST, "").json(&body))
            .await?;
        parse_answer(v)
    }

    /// Lists tables.
    pub async fn list_tables(&self) -> Result<Vec<TableInfo>> {
        let v = self.send(tables(self, Method::GET, "")).await?;
        parse_answer(v["tables"].clone())
    }

    /// Describes one table.
    pub async fn describe_table(&self, name: &str) -> Result<TableInfo> {
        let v = self
            .send(tables(self, Method::GET, &format!("/{name}")))
            .await?;
        parse_answer(v)
    }

    /// Alters one table (`body`: the tables API's alter request).
    pub async fn alter_table(&self, name: &str, body: &Value) -> Result<TableInfo> {
        let v = self
            .send(tables(self, Method::PATCH, &format!("/{name}")).json(body))
            .await?;
        parse_answer(v)
    }

    /// Drops one table.
    pub async fn drop_table(&self, name: &str) -> Result<()> {
        self.send(tables(self, Method::DELETE, &format!("/{name}")))
            .await?;
        Ok(())
    }
}

/// Human-readable description of a table.
pub fn describe_text(info: &TableInfo) -> String {
    let mut out = format!(
        "{}\n  location: {}\n  schema version: {}\n  columns:\n",
        info.full_name, info.storage_location, info.schema_version
    );
    for c in &info.columns {
        out.push_str(&format!(
            "    {} {}{}\n",
            c.name,
            c.type_text.to_ascii_uppercase(),
            if c.nullable { "" } else { " NOT NULL" }
        ));
    }
    out
}
