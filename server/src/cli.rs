//! The `sluice table …` commands: a small HTTP client of the pod's
//! Unity-Catalog-shaped tables API, authenticated with the OAuth client
//! credentials in `SLUICE_CLIENT_ID` / `SLUICE_CLIENT_SECRET` (or, when those
//! are unset, the admin credentials file of a local data directory).

use std::path::Path;

use serde_json::Value;
use sluice_zeroparser::TableSchema;

use crate::error::{Result, ServerError};
use crate::http::{column_infos, TableInfo};

mod admin;
pub mod cluster;
pub mod cluster_up;
mod upkeep;

pub use admin::{parse_grant, GrantArgs};

/// A connection to a running pod.
pub struct Client {
    base: String,
    http: reqwest::Client,
    token: Option<String>,
}

fn http_err(e: reqwest::Error) -> ServerError {
    ServerError::Unavailable(format!("cannot reach the server: {e}"))
}

impl Client {
    /// Connects to `server`, fetching a token when credentials are known.
    pub async fn connect(server: &str, data_dir: &Path) -> Result<Client> {
        let base = server.trim_end_matches('/').to_string();
        let http = reqwest::Client::new();
        let credentials = match (
            std::env::var("SLUICE_CLIENT_ID"),
            std::env::var("SLUICE_CLIENT_SECRET"),
        ) {
            (Ok(id), Ok(secret)) => Some((id, secret)),
            _ => crate::pod::read_admin_credentials(data_dir),
        };
        let token = match credentials {
            Some((id, secret)) => {
                let resp = http
                    .post(format!("{base}/oidc/v1/token"))
                    .basic_auth(id, Some(secret))
                    .form(&[("grant_type", "client_credentials"), ("scope", "all-apis")])
                    .send()
                    .await
                    .map_err(http_err)?;
                let status = resp.status();
                let body: Value = resp.json().await.map_err(http_err)?;
                if !status.is_success() {
                    return Err(ServerError::Unauthenticated(format!(
                        "token request refused ({status}): {}",
                        body["error_description"].as_str().unwrap_or("")
                    )));
                }
                body["access_token"].as_str().map(str::to_string)
            }
            None => None,
        };
        Ok(Client { base, http, token })
    }

    /// A request to any path of the server, with the token attached.
    fn api(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.http.request(
            method,
            format!("{}/api/2.1/unity-catalog/tables{path}", self.base),
        );
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    async fn send(&self, r: reqwest::RequestBuilder) -> Result<Value> {
        let resp = r.send().await.map_err(http_err)?;
        let status = resp.status();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        let message = body["message"].as_str().unwrap_or("").to_string();
        Err(match status.as_u16() {
            400 => ServerError::InvalidArgument(message),
            401 => ServerError::Unauthenticated(format!(
                "{message} (set SLUICE_CLIENT_ID and SLUICE_CLIENT_SECRET)"
            )),
            403 => ServerError::PermissionDenied(message),
            404 => ServerError::NotFound(message),
            409 => ServerError::AlreadyExists(message),
            _ => ServerError::Internal(format!("server answered {status}: {message}")),
        })
    }

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
            .send(self.request(reqwest::Method::POST, "").json(&body))
            .await?;
        parse_info(v)
    }

    /// Lists tables.
    pub async fn list_tables(&self) -> Result<Vec<TableInfo>> {
        let v = self.send(self.request(reqwest::Method::GET, "")).await?;
        serde_json::from_value(v["tables"].clone())
            .map_err(|e| ServerError::Internal(format!("unexpected answer: {e}")))
    }

    /// Describes one table.
    pub async fn describe_table(&self, name: &str) -> Result<TableInfo> {
        let v = self
            .send(self.request(reqwest::Method::GET, &format!("/{name}")))
            .await?;
        parse_info(v)
    }

    /// Drops one table.
    pub async fn drop_table(&self, name: &str) -> Result<()> {
        self.send(self.request(reqwest::Method::DELETE, &format!("/{name}")))
            .await?;
        Ok(())
    }
}

fn parse_info(v: Value) -> Result<TableInfo> {
    serde_json::from_value(v).map_err(|e| ServerError::Internal(format!("unexpected answer: {e}")))
}

/// Human-readable description of a table.
pub fn describe_text(info: &TableInfo) -> String {
    let mut out = format!(
        "{}\n  location: {}\n  columns:\n",
        info.full_name, info.storage_location
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
