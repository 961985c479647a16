//! Token-signing keys at rest: the catalog file holds them only encrypted under the
//! key-encryption key (KEK), so a token forged with any bytes read from the file is
//! refused (401); a single node without a KEK generates `secrets.key` (0600) once and says
//! so; a plaintext catalog is encrypted on the first start (old tokens keep working); a
//! wrong KEK stops the start with a message naming the problem; `sluice keys rotate-kek`
//! re-encrypts under a new KEK, refused while the server runs.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use reqwest::StatusCode;

use crate::auth::{newest_key, signed_token};
use crate::harness::{free_port, Server, CLIENT_ID, CLIENT_SECRET};

fn catalog(data: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(data.join("catalog.json")).expect("catalog"))
        .expect("catalog json")
}

fn admin_claims() -> serde_json::Value {
    let now = chrono::Utc::now().timestamp();
    serde_json::json!({
        "sub": CLIENT_ID, "iat": now, "exp": now + 600, "tables": ["*"], "admin": true
    })
}

async fn principals_status(server: &Server, token: &str) -> StatusCode {
    reqwest::Client::new()
        .get(format!("{}/api/sluice/v1/principals", server.url))
        .bearer_auth(token)
        .send()
        .await
        .expect("request")
        .status()
}

/// Every byte string a thief could take for the key from the stored envelope.
fn candidate_keys(envelope: &str) -> Vec<Vec<u8>> {
    let body = envelope.rsplit('.').next().expect("body");
    let bytes = URL_SAFE_NO_PAD.decode(body).expect("base64 body");
    let mut out = vec![
        envelope.as_bytes().to_vec(),
        body.as_bytes().to_vec(),
        bytes.clone(),
    ];
    for start in 0..=bytes.len().saturating_sub(32) {
        out.push(bytes[start..start + 32].to_vec());
    }
    out
}

/// `sluice serve` expected to fail at start: its exit status and output.
fn serve_fails(data: &Path, extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--data-dir"])
        .arg(data)
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .args(extra)
        .env_remove("SLUICE_SECRETS_KEY")
        .stdin(Stdio::null())
        .output()
        .expect("run sluice serve");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "start succeeded:\n{text}");
    text
}

fn write_key(path: &Path, byte: u8) {
    std::fs::write(path, STANDARD.encode([byte; 32])).expect("key file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalog_file_holds_no_usable_signing_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut server = Server::start(&data, "200ms").await;
    let kek_file = data.join("secrets.key");
    let mode = std::fs::metadata(&kek_file)
        .expect("secrets.key")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(server.log().contains("generated a key-encryption key"));

    let stored = catalog(&data);
    let key = stored["signing_keys"][0].clone();
    assert!(key.get("secret").is_none(), "a plain key is stored: {key}");
    let envelope = key["sealed"].as_str().expect("sealed key");
    let kid = key["kid"].as_str().expect("kid");
    for candidate in candidate_keys(envelope) {
        let forged = signed_token(kid, &candidate, &admin_claims());
        assert_eq!(
            principals_status(&server, &forged).await,
            StatusCode::UNAUTHORIZED
        );
    }
    // The same forgery with the decrypted key is accepted: what the file lacks is the KEK.
    let (kid, secret) = newest_key(&server);
    let genuine = signed_token(&kid, &secret, &admin_claims());
    assert_eq!(principals_status(&server, &genuine).await, StatusCode::OK);

    // A restart reads the generated KEK back (no second one is generated).
    server.terminate();
    server.restart().await;
    assert_eq!(
        server
            .log()
            .matches("generated a key-encryption key")
            .count(),
        1
    );
    assert_eq!(principals_status(&server, &genuine).await, StatusCode::OK);
    server.terminate();

    // A wrong KEK stops the start, naming the problem; the keys are not regenerated.
    let wrong = dir.path().join("wrong.key");
    write_key(&wrong, 1);
    let out = serve_fails(
        &data,
        &["--secrets-key-file", wrong.to_str().expect("path")],
    );
    assert!(
        out.contains("is encrypted under key-encryption key")
            && out.contains("wrong --secrets-key-file"),
        "{out}"
    );
    let short = dir.path().join("short.key");
    std::fs::write(&short, STANDARD.encode([1u8; 16])).expect("short key");
    let out = serve_fails(
        &data,
        &["--secrets-key-file", short.to_str().expect("path")],
    );
    assert!(out.contains("must be 32 bytes"), "{out}");
    // Without secrets.key the encrypted catalog cannot be used, and no new KEK is made.
    let kept = dir.path().join("kept.key");
    std::fs::rename(&kek_file, &kept).expect("move the KEK away");
    let out = serve_fails(&data, &[]);
    assert!(out.contains("secrets.key is missing"), "{out}");
    assert!(!kek_file.exists());
    std::fs::rename(&kept, &kek_file).expect("move it back");
    assert_eq!(catalog(&data)["signing_keys"], stored["signing_keys"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plaintext_catalog_is_encrypted_at_start_and_rotate_kek_re_encrypts_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let first_kek = dir.path().join("first.key");
    write_key(&first_kek, 3);
    let kek_flag = ["--secrets-key-file", first_kek.to_str().expect("path")];
    let mut server = Server::start_with_args(&data, "200ms", &kek_flag).await;
    assert!(!data.join("secrets.key").exists(), "a KEK was given");
    let token = server.token().await;
    server.terminate();

    // Turn the catalog into what an older version wrote: the key in plain text.
    let kek = sluice_server::auth::Kek::from_file(&first_kek).expect("kek");
    let mut stored = catalog(&data);
    for key in stored["signing_keys"].as_array_mut().expect("keys") {
        let parsed: sluice_server::catalog::SigningKey =
            serde_json::from_value(key.clone()).expect("key");
        let plain = sluice_server::auth::open_key(&kek, &parsed).expect("decrypt");
        key["secret"] = STANDARD.encode(plain).into();
        key.as_object_mut().expect("object").remove("sealed");
    }
    std::fs::write(data.join("catalog.json"), stored.to_string()).expect("write");
    server.restart().await;
    assert!(server
        .log()
        .contains("held token-signing keys in plain text"));
    let migrated = catalog(&data);
    assert!(
        migrated["signing_keys"][0].get("secret").is_none(),
        "{migrated}"
    );
    assert!(migrated["signing_keys"][0]["sealed"].is_string());
    assert_eq!(principals_status(&server, &token).await, StatusCode::OK);

    // rotate-kek is refused while the server runs.
    let second_kek = dir.path().join("second.key");
    write_key(&second_kek, 4);
    let rotate = |old: &Path| {
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["keys", "rotate-kek", "--data-dir"])
            .arg(&data)
            .arg("--secrets-key-file")
            .arg(old)
            .arg("--new-key-file")
            .arg(&second_kek)
            .env_remove("SLUICE_JOIN")
            .output()
            .expect("run rotate-kek")
    };
    let busy = rotate(&first_kek);
    assert!(!busy.status.success());
    assert!(
        String::from_utf8_lossy(&busy.stderr).contains("must be stopped"),
        "{}",
        String::from_utf8_lossy(&busy.stderr)
    );
    server.terminate();
    let rotated = rotate(&first_kek);
    assert!(
        rotated.status.success(),
        "{}",
        String::from_utf8_lossy(&rotated.stderr)
    );
    assert!(String::from_utf8_lossy(&rotated.stdout).contains("re-encrypted 1 signing keys"));
    let out = serve_fails(&data, &kek_flag);
    assert!(out.contains("wrong --secrets-key-file"), "{out}");
    let mut server = Server::start_with_args(
        &data,
        "200ms",
        &["--secrets-key-file", second_kek.to_str().expect("path")],
    )
    .await;
    assert_eq!(principals_status(&server, &token).await, StatusCode::OK);
    let fresh = reqwest::Client::new()
        .post(format!("{}/oidc/v1/token", server.url))
        .basic_auth(CLIENT_ID, Some(CLIENT_SECRET))
        .form(&[("grant_type", "client_credentials")])
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("token request");
    assert!(fresh.status().is_success());
    server.terminate();
}

#[test]
fn a_bootstrap_secret_shorter_than_32_characters_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let short = "only-31-characters-long-secret!";
    assert_eq!(short.len(), 31);
    let out = serve_fails(
        dir.path(),
        &["--bootstrap-principal", &format!("ops:{short}")],
    );
    assert!(
        out.contains("has 31 characters; at least 32 are required"),
        "{out}"
    );
    assert!(
        !out.contains(short),
        "the refusal does not echo the secret: {out}"
    );
}
