//! Every catalog and admin route authenticates before it parses: without a token, or with
//! a garbage one, each answers 401 whatever body it is sent (an empty body, a body of the
//! wrong shape), never 400/404/422. With an admin token every listed route exists (no
//! 401, no 404 for an unknown route, no 405). The token endpoint paces failed secrets
//! per client id: after the free failures it answers 429 with `Retry-After`, to the right
//! secret too, until the wait is over; other client ids are not affected.

use reqwest::{Method, StatusCode};
use sluice_server::http::PROTECTED_ROUTES;

use crate::harness::{Server, CLIENT_ID, CLIENT_SECRET};

/// A concrete path for a route pattern.
fn concrete(pattern: &str) -> String {
    pattern
        .replace("{full_name}", "m.s.t")
        .replace("{client_id}", "nobody")
}

async fn call(
    client: &reqwest::Client,
    server: &Server,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &'static str,
) -> (StatusCode, String) {
    let method = Method::from_bytes(method.as_bytes()).expect("method");
    let mut request = client
        .request(method, format!("{}{path}", server.url))
        .header("content-type", "application/json")
        .body(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("request");
    let status = response.status();
    (status, response.text().await.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread")]
async fn every_admin_and_catalog_route_answers_401_before_it_reads_the_body() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    server.create_table("m.s.t", "id BIGINT");
    let client = reqwest::Client::new();
    let garbage = "eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl";
    for (method, pattern) in PROTECTED_ROUTES {
        let path = concrete(pattern);
        for token in [None, Some(garbage), Some("not even a jwt")] {
            for body in ["", "{", r#"{"unexpected": [1, 2]}"#] {
                let (status, text) = call(&client, &server, method, &path, token, body).await;
                assert_eq!(
                    status,
                    StatusCode::UNAUTHORIZED,
                    "{method} {path} token {token:?} body {body:?}: {text}"
                );
                assert!(text.contains("UNAUTHENTICATED"), "{method} {path}: {text}");
            }
        }
    }
    let admin = server.token().await;
    for (method, pattern) in PROTECTED_ROUTES {
        let path = concrete(pattern);
        let (status, text) = call(&client, &server, method, &path, Some(&admin), "{}").await;
        assert!(
            ![
                StatusCode::UNAUTHORIZED,
                StatusCode::METHOD_NOT_ALLOWED,
                StatusCode::NOT_FOUND
            ]
            .contains(&status)
                || text.contains("does not exist"),
            "{method} {path} with an admin token: {status} {text}"
        );
    }
}

async fn token_status(server: &Server, id: &str, secret: &str) -> (StatusCode, Option<u64>) {
    let response = reqwest::Client::new()
        .post(format!("{}/oidc/v1/token", server.url))
        .basic_auth(id, Some(secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .expect("token request");
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.parse().ok());
    (response.status(), retry_after)
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_secrets_are_paced_per_client_id_with_429_and_retry_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    for _ in 0..6 {
        let (status, _) = token_status(&server, CLIENT_ID, "wrong-secret").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    let (status, retry) = token_status(&server, CLIENT_ID, CLIENT_SECRET).await;
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "the right secret waits too"
    );
    assert_eq!(retry, Some(1));
    // Another client id is not paced (and unknown ids get the same 401 as wrong secrets).
    let (status, _) = token_status(&server, "someone-else", "x").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (status, _) = token_status(&server, CLIENT_ID, "wrong-secret").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, retry) = token_status(&server, CLIENT_ID, CLIENT_SECRET).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(retry, Some(2), "the wait doubles");
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let (status, _) = token_status(&server, CLIENT_ID, CLIENT_SECRET).await;
    assert_eq!(status, StatusCode::OK);
    // A success clears the count: five failures are free again.
    for _ in 0..5 {
        let (status, _) = token_status(&server, CLIENT_ID, "wrong-secret").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    let (status, _) = token_status(&server, CLIENT_ID, CLIENT_SECRET).await;
    assert_eq!(status, StatusCode::OK);
}
