//! Client calls of `sluice table optimize|vacuum`: the admin API's upkeep
//! endpoints (`/api/sluice/v1/tables/NAME/optimize|vacuum`).

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;
use sluice_server::Result;

use super::client::Client;

impl Client {
    /// Compacts a table's small files now; returns the server's report.
    pub async fn optimize_table(&self, name: &str) -> Result<Value> {
        self.send(self.api(
            Method::POST,
            &format!("/api/sluice/v1/tables/{name}/optimize"),
        ))
        .await
    }

    /// Vacuums a table now (removed files older than `retention`, default
    /// the table's own retention); returns the server's report.
    pub async fn vacuum_table(&self, name: &str, retention: Option<Duration>) -> Result<Value> {
        let body = serde_json::json!({
            "retention_seconds": retention.map(|r| r.as_secs()),
        });
        self.send(
            self.api(
                Method::POST,
                &format!("/api/sluice/v1/tables/{name}/vacuum"),
            )
            .json(&body),
        )
        .await
    }
}
