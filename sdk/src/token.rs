//! OAuth2 client-credentials tokens from the server's token endpoint
//! (`POST {endpoint}/oidc/v1/token`, HTTP basic auth, `grant_type=client_credentials`),
//! cached and fetched again before they expire: a token is reused until 80 % of its
//! lifetime (`expires_in`) has passed, or until the server refused it (UNAUTHENTICATED).

use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::sync::Mutex;

use crate::error::{Result, SdkError};

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

pub(crate) struct Cached {
    token: String,
    refresh_at: Instant,
}

/// Where bearer tokens come from.
pub(crate) enum TokenSource {
    /// Client credentials exchanged at `url`.
    Credentials {
        http: reqwest::Client,
        url: String,
        id: String,
        secret: String,
        cached: Mutex<Option<Cached>>,
    },
    /// No authentication header (a server without auth, or a proxy adding it).
    None,
}

impl TokenSource {
    pub(crate) fn credentials(
        http: reqwest::Client,
        url: String,
        id: String,
        secret: String,
    ) -> Self {
        TokenSource::Credentials {
            http,
            url,
            id,
            secret,
            cached: Mutex::new(None),
        }
    }

    /// A bearer token valid for a while yet (`None`: send no header).
    pub(crate) async fn token(&self) -> Result<Option<String>> {
        let TokenSource::Credentials {
            http,
            url,
            id,
            secret,
            cached,
        } = self
        else {
            return Ok(None);
        };
        let mut cached = cached.lock().await;
        if let Some(c) = cached.as_ref() {
            if Instant::now() < c.refresh_at {
                return Ok(Some(c.token.clone()));
            }
        }
        let fail = |message: String| SdkError::Token {
            url: url.clone(),
            message,
        };
        let started = Instant::now();
        let response = http
            .post(url)
            .basic_auth(id, Some(secret))
            .form(&[("grant_type", "client_credentials"), ("scope", "all-apis")])
            .send()
            .await
            .map_err(|e| SdkError::Unavailable(format!("token endpoint {url}: {e}")))?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            let message = format!("HTTP {status}: {body}");
            // A server error or pacing is retried; a refusal of the credentials is final.
            if status.is_server_error() || status.as_u16() == 429 {
                return Err(SdkError::Unavailable(format!(
                    "token endpoint {url}: {message}"
                )));
            }
            return Err(fail(message));
        }
        let answer: TokenAnswer = response.json().await.map_err(|e| fail(e.to_string()))?;
        let lifetime = Duration::from_secs(answer.expires_in.unwrap_or(3600));
        *cached = Some(Cached {
            token: answer.access_token.clone(),
            refresh_at: started + lifetime.mul_f64(0.8),
        });
        tracing::debug!(lifetime_s = lifetime.as_secs(), "fetched an access token");
        Ok(Some(answer.access_token))
    }

    /// The server refused the cached token: the next [`TokenSource::token`] fetches anew.
    pub(crate) async fn invalidate(&self) {
        if let TokenSource::Credentials { cached, .. } = self {
            *cached.lock().await = None;
        }
    }
}
