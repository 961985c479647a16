//! Principals, grants and tokens end to end: `sluice principal create`,
//! `sluice grant` / `revoke`, table-scoped tokens from `/oidc/v1/token`,
//! refusals at stream creation that say why (expired, another table,
//! revoked grant, deleted principal), `sluice keys rotate` keeping older
//! tokens valid, and the official SDK writing as a non-admin principal.

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use databricks_zerobus_ingest_sdk::JsonString;
use hmac::{Hmac, Mac};
use tonic::Code;

use crate::harness::{wait_for_rows, Server};
use crate::raw::{create_json, exchange, json_record, token, token_for, Call};

/// Creates a principal with the CLI; returns its secret.
pub fn create_principal(server: &Server, name: &str) -> String {
    let out = server.cli(&["principal", "create", name]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "principal create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("SLUICE_CLIENT_SECRET="))
        .expect("secret printed")
        .to_string()
}

/// Runs the CLI and asserts success.
pub fn cli_ok(server: &Server, args: &[&str]) -> String {
    let out = server.cli(args);
    assert!(
        out.status.success(),
        "sluice {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The pod's newest signing key, `(kid, secret)`, read from the catalog file and decrypted
/// with the data dir's key-encryption key (as only a holder of both could).
pub fn newest_key(server: &Server) -> (String, Vec<u8>) {
    let catalog: serde_json::Value = serde_json::from_slice(
        &std::fs::read(server.data_dir.join("catalog.json")).expect("catalog"),
    )
    .expect("catalog json");
    let key: sluice_server::catalog::SigningKey = serde_json::from_value(
        catalog["signing_keys"]
            .as_array()
            .expect("keys")
            .last()
            .expect("key")
            .clone(),
    )
    .expect("signing key");
    let kek = sluice_server::auth::Kek::from_file(&server.data_dir.join("secrets.key"))
        .expect("key-encryption key");
    let secret = sluice_server::auth::open_key(&kek, &key).expect("decrypt");
    (key.kid, secret)
}

/// An HS256 JWT over `claims` with key id `kid`, signed with `secret`.
pub fn signed_token(kid: &str, secret: &[u8], claims: &serde_json::Value) -> String {
    let header = serde_json::json!({"alg": "HS256", "typ": "JWT", "kid": kid});
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret).expect("hmac");
    mac.update(input.as_bytes());
    format!(
        "{input}.{}",
        URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
    )
}

/// A token signed with the pod's newest key but already expired.
pub fn expired_token(server: &Server, sub: &str, table: &str) -> String {
    let (kid, secret) = newest_key(server);
    let now = chrono::Utc::now().timestamp();
    let claims = serde_json::json!({
        "sub": sub, "iat": now - 7200, "exp": now - 3600, "tables": [table], "admin": false
    });
    signed_token(&kid, &secret, &claims)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_scope_tokens_and_revocation_is_seen_at_stream_creation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let (a, b) = ("main.auth.a", "main.auth.b");
    server.create_table(a, "id BIGINT NOT NULL");
    server.create_table(b, "id BIGINT NOT NULL");
    let secret = create_principal(&server, "dev");
    let url = server.url.as_str();

    // No grant yet: the token endpoint refuses, naming principal and table.
    let (status, body) = token_for(url, "dev", &secret, &[a]).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error_description"].as_str().unwrap_or("").contains(a),
        "{body}"
    );
    // A wrong secret: 401 without echoing it.
    let (status, body) = token_for(url, "dev", "wrong-secret", &[a]).await;
    assert_eq!(status, 401);
    assert!(!body.to_string().contains("wrong-secret"));

    cli_ok(&server, &["grant", "MODIFY", "ON", "TABLE", a, "TO", "dev"]);
    cli_ok(&server, &["grant", "SELECT", "ON", "TABLE", b, "TO", "dev"]);
    let listed = cli_ok(&server, &["principal", "list"]);
    assert!(
        listed.contains("MODIFY main.auth.a") && listed.contains("SELECT main.auth.b"),
        "{listed}"
    );

    let tok_a = token(url, "dev", &secret, &[a]).await;
    let call = |table, token| Call { url, table, token };
    let (acks, status) = exchange(
        call(a, Some(&tok_a)),
        vec![create_json(a), json_record(0, r#"{"id": 1}"#)],
    )
    .await;
    assert!(status.is_none(), "{status:?}");
    assert_eq!(acks.last(), Some(&0));

    // A token for table a used on table b: PERMISSION_DENIED saying so.
    let (_, status) = exchange(call(b, Some(&tok_a)), vec![create_json(b)]).await;
    let status = status.expect("refused");
    assert_eq!(status.code(), Code::PermissionDenied);
    assert!(
        status.message().contains("scoped to"),
        "{}",
        status.message()
    );

    // SELECT only on b: a token is issued, but it cannot write.
    let tok_b = token(url, "dev", &secret, &[b]).await;
    let get = |name: &str, tok: &str| {
        reqwest::Client::new()
            .get(format!("{url}/api/2.1/unity-catalog/tables/{name}"))
            .bearer_auth(tok.to_string())
            .send()
    };
    assert_eq!(
        get(b, &tok_b).await.expect("get").status().as_u16(),
        200,
        "SELECT reads the definition"
    );
    assert_eq!(get(a, &tok_b).await.expect("get").status().as_u16(), 403);
    let (_, status) = exchange(call(b, Some(&tok_b)), vec![create_json(b)]).await;
    let status = status.expect("refused");
    assert_eq!(status.code(), Code::PermissionDenied);
    assert!(
        status.message().contains("no table for writing"),
        "{}",
        status.message()
    );

    // Expired: UNAUTHENTICATED saying expired.
    let expired = expired_token(&server, "dev", a);
    let (_, status) = exchange(call(a, Some(&expired)), vec![create_json(a)]).await;
    let status = status.expect("refused");
    assert_eq!(status.code(), Code::Unauthenticated);
    assert!(status.message().contains("expired"), "{}", status.message());

    // Revoked after the token was issued: refused at the next stream creation.
    cli_ok(
        &server,
        &["revoke", "MODIFY", "ON", "TABLE", a, "FROM", "dev"],
    );
    let (_, status) = exchange(call(a, Some(&tok_a)), vec![create_json(a)]).await;
    let status = status.expect("refused");
    assert_eq!(status.code(), Code::PermissionDenied);
    assert!(status.message().contains("revoked"), "{}", status.message());

    // Deleted principal: UNAUTHENTICATED saying it no longer exists.
    cli_ok(&server, &["grant", "MODIFY", "ON", "TABLE", a, "TO", "dev"]);
    let tok = token(url, "dev", &secret, &[a]).await;
    cli_ok(&server, &["principal", "delete", "dev"]);
    let (_, status) = exchange(call(a, Some(&tok)), vec![create_json(a)]).await;
    let status = status.expect("refused");
    assert_eq!(status.code(), Code::Unauthenticated);
    assert!(
        status.message().contains("no longer exists"),
        "{}",
        status.message()
    );
    assert!(!status.message().contains(&secret));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_keys_keep_older_tokens_valid_and_the_sdk_writes_as_a_granted_principal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let table = "main.auth.rot";
    server.create_table(table, "id BIGINT NOT NULL");
    let secret = create_principal(&server, "producer");
    cli_ok(
        &server,
        &["grant", "MODIFY", "ON", "TABLE", table, "TO", "producer"],
    );
    let url = server.url.as_str();
    let old = token(url, "producer", &secret, &[table]).await;
    let out = cli_ok(&server, &["keys", "rotate"]);
    assert!(out.contains("new signing key"), "{out}");
    let new = token(url, "producer", &secret, &[table]).await;
    let kid = |t: &str| t.split('.').next().map(str::to_string);
    assert_ne!(kid(&old), kid(&new), "the new token uses the new key");
    for (i, t) in [old, new].iter().enumerate() {
        let call = Call {
            url,
            table,
            token: Some(t),
        };
        let (acks, status) = exchange(
            call,
            vec![
                create_json(table),
                json_record(0, &format!(r#"{{"id": {i}}}"#)),
            ],
        )
        .await;
        assert!(status.is_none(), "token {i}: {status:?}");
        assert_eq!(acks.last(), Some(&0));
    }

    // The official SDK, with the principal's own credentials (OAuth with
    // authorization_details naming the table).
    let sdk = server.sdk();
    let mut stream = sdk
        .stream_builder()
        .table(table)
        .oauth("producer", secret.as_str())
        .json()
        .build()
        .await
        .expect("sdk stream as producer");
    for i in 10..20 {
        stream
            .ingest_record_offset(JsonString(format!(r#"{{"id": {i}}}"#)))
            .await
            .expect("ingest");
    }
    stream.flush().await.expect("flush");
    stream.close().await.expect("close");
    let info = server.table_info(table).await;
    let location = info["storage_location"].as_str().expect("location");
    wait_for_rows(location, 12, Duration::from_secs(30)).await;

    // A wrong secret through the official SDK fails to open a stream.
    let refused = sdk
        .stream_builder()
        .table(table)
        .oauth("producer", "not-the-secret")
        .json()
        .build()
        .await;
    let err = refused.err().expect("wrong secret refused").to_string();
    assert!(!err.contains("not-the-secret"), "{err}");
}

/// The token is checked when a stream is created; a stream that outlives
/// its token keeps being served (the SDKs fetch a new token for new streams).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_outlives_its_token_keeps_working() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with_args(dir.path(), "200ms", &["--token-ttl", "60s"]).await;
    let table = "main.auth.long";
    server.create_table(table, "id BIGINT NOT NULL");
    let tok = server.token().await;
    let mut stream = crate::raw::OpenStream::open(Call {
        url: &server.url,
        table,
        token: Some(&tok),
    })
    .await
    .expect("open");
    let o = stream.send(r#"{"id": 0}"#).await;
    stream.wait_acked(o).await;
    tokio::time::sleep(Duration::from_secs(62)).await;
    let (_, status) = exchange(
        Call {
            url: &server.url,
            table,
            token: Some(&tok),
        },
        vec![create_json(table)],
    )
    .await;
    assert_eq!(status.expect("expired").code(), Code::Unauthenticated);
    let o = stream.send(r#"{"id": 1}"#).await;
    stream.wait_acked(o).await;
    assert!(stream.close().await.is_none());
}
