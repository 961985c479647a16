//! TLS on: `sluice serve --tls-cert --tls-key` with a CA and server
//! certificate the test makes (rcgen). The official Rust SDK connects with
//! a custom `TlsConfig` trusting that CA (its token comes from a headers
//! provider, since the SDK's own OAuth client only reads system roots), the
//! CLI works through `SSL_CERT_FILE`, and a plain-text client of the TLS port
//! gets UNAVAILABLE saying TLS is required (HTTP 400 for plain HTTP).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use databricks_zerobus_ingest_sdk::{
    HeadersProvider, JsonString, TlsConfig, ZerobusResult, ZerobusSdk,
};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};
use tonic::Code;

use crate::harness::{free_port, wait_for_rows, CLIENT_ID, CLIENT_SECRET};
use crate::raw::{create_json, exchange, Call};

/// A test CA and a server certificate for 127.0.0.1 and localhost, as PEM
/// files in `dir`: `(ca, cert, key)`.
pub fn make_certs(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("ca key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "Sluice test CA");
    let ca = ca_params.self_signed(&ca_key).expect("ca cert");
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().expect("server key");
    let params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .expect("server params");
    let cert = params.signed_by(&key, &issuer).expect("server cert");
    let paths = (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    );
    std::fs::write(&paths.0, ca.pem()).expect("write ca");
    std::fs::write(&paths.1, cert.pem()).expect("write cert");
    std::fs::write(&paths.2, key.serialize_pem()).expect("write key");
    paths
}

pub struct TlsServer {
    child: Child,
    pub url: String,
    pub https: reqwest::Client,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub async fn start_tls(data: &Path, cert: &Path, key: &Path, ca_pem: &[u8]) -> TlsServer {
    let port = free_port();
    let log = std::fs::File::create(data.join("server.log")).expect("log");
    std::fs::create_dir_all(data.join("pod")).expect("pod dir");
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--data-dir"])
        .arg(data.join("pod"))
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--flush-interval",
            "200ms",
        ])
        .args([
            "--bootstrap-principal",
            &format!("{CLIENT_ID}:{CLIENT_SECRET}"),
        ])
        .arg("--tls-cert")
        .arg(cert)
        .arg("--tls-key")
        .arg(key)
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn sluice");
    let https = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem).expect("ca"))
        .build()
        .expect("https client");
    let server = TlsServer {
        child,
        url: format!("https://127.0.0.1:{port}"),
        https,
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(r) = server
            .https
            .get(format!("{}/healthz", server.url))
            .send()
            .await
        {
            if r.status().is_success() {
                return server;
            }
        }
        assert!(
            Instant::now() < deadline,
            "sluice (TLS) did not become healthy:\n{}",
            std::fs::read_to_string(data.join("server.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Trusts exactly the test CA.
struct CaTls(Vec<u8>);

impl TlsConfig for CaTls {
    fn configure_endpoint(&self, endpoint: Endpoint) -> ZerobusResult<Endpoint> {
        let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&self.0));
        endpoint.tls_config(tls).map_err(|_| {
            databricks_zerobus_ingest_sdk::ZerobusError::FailedToEstablishTlsConnectionError
        })
    }
}

/// Sends a table-scoped token fetched over HTTPS.
struct Bearer {
    token: String,
    table: String,
}

#[tonic::async_trait]
impl HeadersProvider for Bearer {
    async fn get_headers(&self) -> ZerobusResult<HashMap<&'static str, String>> {
        Ok(HashMap::from([
            ("authorization", format!("Bearer {}", self.token)),
            ("x-databricks-zerobus-table-name", self.table.clone()),
        ]))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tls_on_the_sdk_and_cli_connect_and_plain_text_is_told_tls_is_required() {
    // Both rustls providers are compiled into this test binary (through
    // different dependencies), so tonic's client cannot pick one by itself.
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("tempdir");
    let (ca, cert, key) = make_certs(dir.path());
    let ca_pem = std::fs::read(&ca).expect("ca pem");
    let server = start_tls(dir.path(), &cert, &key, &ca_pem).await;
    let table = "main.tls.t";

    // The CLI over HTTPS, trusting the CA through SSL_CERT_FILE.
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["table", "create", table, "--columns", "id BIGINT NOT NULL"])
        .env("SLUICE_SERVER", &server.url)
        .env("SLUICE_CLIENT_ID", CLIENT_ID)
        .env("SLUICE_CLIENT_SECRET", CLIENT_SECRET)
        .env("SSL_CERT_FILE", &ca)
        .output()
        .expect("cli");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let token: serde_json::Value = server
        .https
        .post(format!("{}/oidc/v1/token", server.url))
        .basic_auth(CLIENT_ID, Some(CLIENT_SECRET))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .expect("token")
        .json()
        .await
        .expect("token json");
    let token = token["access_token"].as_str().expect("token").to_string();

    // The official Rust SDK with TLS on.
    let sdk = ZerobusSdk::builder()
        .endpoint(&server.url)
        .unity_catalog_url(&server.url)
        .tls_config(Arc::new(CaTls(ca_pem.clone())))
        .build()
        .expect("sdk");
    let mut stream = sdk
        .stream_builder()
        .table(table)
        .headers_provider(Arc::new(Bearer {
            token: token.clone(),
            table: table.into(),
        }))
        .json()
        .build()
        .await
        .expect("TLS stream");
    for i in 0..100 {
        stream
            .ingest_record_offset(JsonString(format!(r#"{{"id": {i}}}"#)))
            .await
            .expect("ingest");
    }
    stream.flush().await.expect("flush");
    stream.close().await.expect("close");
    let info: serde_json::Value = server
        .https
        .get(format!(
            "{}/api/2.1/unity-catalog/tables/{table}",
            server.url
        ))
        .bearer_auth(&token)
        .send()
        .await
        .expect("table info")
        .json()
        .await
        .expect("json");
    let location = info["storage_location"].as_str().expect("location");
    wait_for_rows(location, 100, Duration::from_secs(30)).await;

    // Plain-text gRPC to the TLS port: UNAVAILABLE, saying TLS is required.
    let plain = server.url.replace("https://", "http://");
    let (_, status) = exchange(
        Call {
            url: &plain,
            table,
            token: Some(&token),
        },
        vec![create_json(table)],
    )
    .await;
    let status = status.expect("refused");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains("requires TLS"),
        "{}",
        status.message()
    );
    println!(
        "| TLS required but plain text used | {:?} — {} |",
        status.code(),
        status.message()
    );

    // Plain HTTP: 400 with the same words.
    let resp = reqwest::get(format!("{plain}/healthz"))
        .await
        .expect("plain http");
    assert_eq!(resp.status().as_u16(), 400);
    assert!(resp
        .text()
        .await
        .unwrap_or_default()
        .contains("requires TLS"));
}
