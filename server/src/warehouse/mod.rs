//! The warehouse: where table folders live (`<warehouse>/<catalog>/<schema>/<table>`)
//! and how Delta reaches them. A local folder (a path or `file://` URL, the
//! default) or an S3 / S3-compatible bucket (`s3://bucket/prefix`).
//!
//! Every Delta table is opened through [`Warehouse::table_builder`], which
//! hands deltalake the warehouse's storage options, so S3 settings given as
//! flags reach every open, create, commit and upkeep call. Commits go through
//! deltalake's default log store, whose commit is a put-if-absent of
//! `_delta_log/<version>.json` (`PutMode::Create`); on S3 that is a PUT with
//! `If-None-Match: *` (see [`s3`]), so several writers are safe without a
//! lock service. A local folder is reached through [`local::DurableLocal`], whose writes
//! are fsync'd (file and folders) before they return: the WAL is purged after a commit.

pub mod local;
pub mod s3;
mod wrapped;

pub(crate) use wrapped::wrapped_store;

use std::collections::HashMap;
use std::path::Path;

use deltalake::{DeltaTable, DeltaTableBuilder};
use url::Url;

use crate::error::{Result, ServerError};

pub use s3::S3Settings;

/// The root URL of all tables and the storage options to reach them.
#[derive(Clone, Debug)]
pub struct Warehouse {
    root: Url,
    options: HashMap<String, String>,
}

impl Warehouse {
    /// Parses `--warehouse` (default: `default_dir`) with the S3 settings
    /// given as flags (the `AWS_*` environment fills in the rest).
    pub fn parse(spec: Option<&str>, default_dir: &Path, s3: &S3Settings) -> Result<Warehouse> {
        // Any table may live in a local folder (an attached location), whatever the root.
        local::register();
        let root = match spec {
            Some(s) if s.contains("://") => {
                let url = Url::parse(s)
                    .map_err(|e| ServerError::Config(format!("--warehouse `{s}`: {e}")))?;
                match url.scheme() {
                    "file" | "s3" | "s3a" => url,
                    other => {
                        return Err(ServerError::Config(format!(
                            "--warehouse scheme `{other}` is not supported (use a local path, file:// or s3://)"
                        )))
                    }
                }
            }
            Some(s) => local_url(Path::new(s))?,
            None => local_url(default_dir)?,
        };
        let root = if root.path().ends_with('/') {
            root
        } else {
            Url::parse(&format!("{root}/"))
                .map_err(|e| ServerError::Config(format!("--warehouse: {e}")))?
        };
        let options = match root.scheme() {
            "file" => {
                if let Ok(path) = root.to_file_path() {
                    local::create_dir_durable(&path)
                        .map_err(|e| ServerError::io(format!("creating {}", path.display()), e))?;
                }
                HashMap::new()
            }
            _ => {
                if root.host_str().is_none_or(str::is_empty) {
                    return Err(ServerError::Config(format!(
                        "--warehouse {root}: an S3 warehouse needs a bucket (s3://bucket/prefix)"
                    )));
                }
                s3::register();
                s3.storage_options()
            }
        };
        Ok(Warehouse { root, options })
    }

    /// The root URL.
    pub fn root(&self) -> &Url {
        &self.root
    }

    /// Storage options handed to deltalake (and to Python readers in tests).
    pub fn storage_options(&self) -> &HashMap<String, String> {
        &self.options
    }

    /// The URL of a table's folder (ends with `/`); a local folder is
    /// created, since Delta's local store expects it to exist.
    pub fn table_url(&self, catalog: &str, schema: &str, table: &str) -> Result<Url> {
        let url = self
            .root
            .join(&format!("{catalog}/{schema}/{table}/"))
            .map_err(|e| ServerError::Internal(format!("table URL: {e}")))?;
        ensure_local_dir(&url)?;
        Ok(url)
    }

    /// A deltalake builder for the table at `url` with this warehouse's
    /// storage options.
    pub fn table_builder(&self, url: &Url) -> Result<DeltaTableBuilder> {
        ensure_local_dir(url)?;
        Ok(DeltaTableBuilder::from_url(url.clone())?.with_storage_options(self.options.clone()))
    }

    /// Opens the Delta table at `url` (it must exist).
    pub async fn open(&self, url: &Url) -> Result<DeltaTable> {
        Ok(self.table_builder(url)?.load().await?)
    }

    /// The table at `url`, loaded if it exists, unloaded (version `None`)
    /// if there is no Delta log yet.
    pub async fn open_or_empty(&self, url: &Url) -> Result<DeltaTable> {
        let mut table = self.table_builder(url)?.build()?;
        match table.load().await {
            Ok(()) | Err(deltalake::DeltaTableError::NotATable(_)) => Ok(table),
            Err(e) => Err(e.into()),
        }
    }

    /// Tests: creates a Delta table at `url` with `columns` (DDL, e.g.
    /// `id BIGINT NOT NULL`).
    #[cfg(test)]
    pub(crate) async fn create_for_test(&self, url: &Url, columns: &str) -> DeltaTable {
        let columns = sluice_zeroparser::TableSchema::parse(columns).expect("schema");
        self.open_or_empty(url)
            .await
            .expect("open")
            .create()
            .with_columns(crate::sink::delta_fields(&columns.columns).expect("fields"))
            .await
            .expect("create")
    }
}

fn ensure_local_dir(url: &Url) -> Result<()> {
    if url.scheme() == "file" {
        if let Ok(path) = url.to_file_path() {
            local::create_dir_durable(&path)
                .map_err(|e| ServerError::io(format!("creating {}", path.display()), e))?;
        }
    }
    Ok(())
}

fn local_url(path: &Path) -> Result<Url> {
    local::create_dir_durable(path)
        .map_err(|e| ServerError::io(format!("creating {}", path.display()), e))?;
    let abs = std::fs::canonicalize(path)
        .map_err(|e| ServerError::io(format!("resolving {}", path.display()), e))?;
    Url::from_directory_path(&abs)
        .map_err(|_| ServerError::Config(format!("{} is not a usable path", abs.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_warehouse_keeps_prefix_and_passes_flags_as_options() {
        let s3 = S3Settings {
            endpoint: Some("http://127.0.0.1:9".into()),
            region: Some("eu-west-1".into()),
            allow_http: true,
            ..S3Settings::default()
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let w = Warehouse::parse(Some("s3://bucket/some/prefix"), dir.path(), &s3).expect("parse");
        assert_eq!(w.root().as_str(), "s3://bucket/some/prefix/");
        assert_eq!(
            w.table_url("c", "s", "t").expect("url").as_str(),
            "s3://bucket/some/prefix/c/s/t/"
        );
        let o = w.storage_options();
        assert_eq!(o["aws_endpoint"], "http://127.0.0.1:9");
        assert_eq!(o["aws_region"], "eu-west-1");
        assert_eq!(o["aws_allow_http"], "true");
        assert_eq!(o["aws_conditional_put"], "etag");
    }

    #[test]
    fn s3_warehouse_without_bucket_and_unknown_schemes_are_rejected() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s3 = S3Settings::default();
        assert!(Warehouse::parse(Some("s3:///prefix"), dir.path(), &s3).is_err());
        assert!(Warehouse::parse(Some("gs://bucket"), dir.path(), &s3).is_err());
    }

    #[test]
    fn local_warehouse_has_no_storage_options() {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = Warehouse::parse(None, dir.path(), &S3Settings::default()).expect("parse");
        assert_eq!(w.root().scheme(), "file");
        assert!(w.storage_options().is_empty());
    }
}
