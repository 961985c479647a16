//! The HTTP client of a running pod that the `table`, `principal`, `grant`,
//! `revoke` and `keys` commands share: [`ConnArgs`] (`--server`,
//! `--data-dir`) and a [`Client`] authenticated with the OAuth client
//! credentials in `SLUICE_CLIENT_ID` / `SLUICE_CLIENT_SECRET` (or, when those
//! are unset, the admin credentials file of a local data directory). Each
//! command group adds its calls to [`Client`] in its own file.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sluice_server::auth::bootstrap::read_admin_credentials;
use sluice_server::config::DEFAULT_DATA_DIR;
use sluice_server::{Result, ServerError};

/// Where the pod is and whose credentials to use.
#[derive(clap::Args)]
pub struct ConnArgs {
    /// URL of the server.
    #[arg(
        long,
        global = true,
        env = "SLUICE_SERVER",
        default_value = "http://127.0.0.1:50051"
    )]
    server: String,
    /// Local data directory whose admin credentials to use when
    /// SLUICE_CLIENT_ID / SLUICE_CLIENT_SECRET are unset.
    #[arg(long, global = true, default_value = DEFAULT_DATA_DIR)]
    data_dir: PathBuf,
}

impl ConnArgs {
    /// The local data directory (`--data-dir`).
    pub fn data_dir(&self) -> &std::path::Path {
        &self.data_dir
    }

    /// The server's URL (`--server`).
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The OAuth client credentials to use: `SLUICE_CLIENT_ID` / `SLUICE_CLIENT_SECRET`,
    /// else the admin credentials file of the local data directory.
    pub fn credentials(&self) -> Option<(String, String)> {
        match (
            std::env::var("SLUICE_CLIENT_ID"),
            std::env::var("SLUICE_CLIENT_SECRET"),
        ) {
            (Ok(id), Ok(secret)) => Some((id, secret)),
            _ => read_admin_credentials(&self.data_dir),
        }
    }

    /// Connects to the pod.
    pub async fn connect(&self) -> Result<Client> {
        Client::connect(&self.server, &self.data_dir).await
    }
}

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
            _ => read_admin_credentials(data_dir),
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
    pub fn api(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    /// Sends a request; a non-2xx answer becomes the matching error, with the
    /// server's message.
    pub async fn send(&self, r: reqwest::RequestBuilder) -> Result<Value> {
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
}

/// Reads an answer's JSON into `T`.
pub fn parse_answer<T: serde::de::DeserializeOwned>(v: Value) -> Result<T> {
    serde_json::from_value(v).map_err(|e| ServerError::Internal(format!("unexpected answer: {e}")))
}
