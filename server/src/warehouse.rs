//! The warehouse: where table folders live (`<warehouse>/<catalog>/<schema>/<table>`).
//! Local folders (a path or `file://` URL) for now.

use std::path::Path;

use url::Url;

use crate::error::{Result, ServerError};

/// The root URL of all tables.
#[derive(Clone, Debug)]
pub struct Warehouse {
    root: Url,
}

impl Warehouse {
    /// Parses `--warehouse` (default: `default_dir`).
    pub fn parse(spec: Option<&str>, default_dir: &Path) -> Result<Warehouse> {
        let root = match spec {
            Some(s) if s.contains("://") => {
                let url = Url::parse(s)
                    .map_err(|e| ServerError::Config(format!("--warehouse `{s}`: {e}")))?;
                if url.scheme() != "file" {
                    return Err(ServerError::Config(format!(
                        "--warehouse scheme `{}` is not supported yet (use a local path or file://)",
                        url.scheme()
                    )));
                }
                url
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
        if root.scheme() == "file" {
            if let Ok(path) = root.to_file_path() {
                std::fs::create_dir_all(&path)
                    .map_err(|e| ServerError::io(format!("creating {}", path.display()), e))?;
            }
        }
        Ok(Warehouse { root })
    }

    /// The root URL.
    pub fn root(&self) -> &Url {
        &self.root
    }

    /// The URL of a table's folder (ends with `/`); a local folder is
    /// created, since Delta's local store expects it to exist.
    pub fn table_url(&self, catalog: &str, schema: &str, table: &str) -> Result<Url> {
        let url = self
            .root
            .join(&format!("{catalog}/{schema}/{table}/"))
            .map_err(|e| ServerError::Internal(format!("table URL: {e}")))?;
        if url.scheme() == "file" {
            if let Ok(path) = url.to_file_path() {
                std::fs::create_dir_all(&path)
                    .map_err(|e| ServerError::io(format!("creating {}", path.display()), e))?;
            }
        }
        Ok(url)
    }
}

fn local_url(path: &Path) -> Result<Url> {
    std::fs::create_dir_all(path)
        .map_err(|e| ServerError::io(format!("creating {}", path.display()), e))?;
    let abs = std::fs::canonicalize(path)
        .map_err(|e| ServerError::io(format!("resolving {}", path.display()), e))?;
    Url::from_directory_path(&abs)
        .map_err(|_| ServerError::Config(format!("{} is not a usable path", abs.display())))
}
