//! The `sluice table` commands and the Unity-Catalog-shaped HTTP API they use.

use crate::harness::Server;

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_create_list_describe_drop_work_and_refuse_bad_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "1s").await;
    let columns =
        "id BIGINT NOT NULL, device STRING, ts TIMESTAMP, temp DOUBLE, tags ARRAY<STRING>, \
                   attrs MAP<STRING,STRING>, loc STRUCT<lat: DOUBLE, lon: DOUBLE>";
    server.create_table("Main.Demo.Readings", columns);

    let list = server.cli(&["table", "list"]);
    assert!(list.status.success(), "{}", stderr(&list));
    assert_eq!(stdout(&list).trim(), "main.demo.readings");

    let describe = server.cli(&["table", "describe", "main.demo.readings"]);
    let text = stdout(&describe);
    assert!(text.contains("id BIGINT NOT NULL"), "{text}");
    assert!(
        text.contains("loc STRUCT<LAT: DOUBLE, LON: DOUBLE>"),
        "{text}"
    );

    let info = server.table_info("main.demo.readings").await;
    assert_eq!(info["full_name"], "main.demo.readings");
    assert_eq!(info["catalog_name"], "main");
    assert_eq!(info["data_source_format"], "DELTA");
    let cols = info["columns"].as_array().expect("columns");
    assert_eq!(cols.len(), 7);
    assert_eq!(cols[0]["type_name"], "LONG");
    assert_eq!(cols[0]["nullable"], false);
    assert_eq!(cols[4]["type_name"], "ARRAY");
    let tj: serde_json::Value =
        serde_json::from_str(cols[6]["type_json"].as_str().expect("type_json")).expect("json");
    assert_eq!(tj["type"]["type"], "struct");
    assert_eq!(tj["type"]["fields"][0]["name"], "lat");
    let location = info["storage_location"].as_str().expect("location");
    let path = url::Url::parse(location)
        .expect("url")
        .to_file_path()
        .expect("path");
    assert!(
        path.join("_delta_log").is_dir(),
        "Delta table created at {path:?}"
    );
    assert!(path.ends_with("main/demo/readings"));

    let again = server.cli(&[
        "table",
        "create",
        "main.demo.readings",
        "--columns",
        "id BIGINT",
    ]);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );

    let bad = server.cli(&["table", "create", "main.demo.bad", "--columns", "id BIGNUM"]);
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("BIGNUM"), "{}", stderr(&bad));

    let bad_name = server.cli(&["table", "create", "nodots", "--columns", "id BIGINT"]);
    assert!(!bad_name.status.success());
    assert!(
        stderr(&bad_name).contains("catalog.schema.table"),
        "{}",
        stderr(&bad_name)
    );

    let dropped = server.cli(&["table", "drop", "main.demo.readings"]);
    assert!(dropped.status.success(), "{}", stderr(&dropped));
    assert!(!path.join("_delta_log").exists(), "data deleted");
    let missing = server.cli(&["table", "describe", "main.demo.readings"]);
    assert!(!missing.status.success());
    assert!(
        stderr(&missing).contains("does not exist"),
        "{}",
        stderr(&missing)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_endpoint_refuses_wrong_secrets_and_the_api_refuses_missing_tokens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "1s").await;
    let http = reqwest::Client::new();
    let bad = http
        .post(format!("{}/oidc/v1/token", server.url))
        .basic_auth(crate::harness::CLIENT_ID, Some("wrong"))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .expect("send");
    assert_eq!(bad.status(), 401);
    let body: serde_json::Value = bad.json().await.expect("json");
    assert_eq!(body["error"], "invalid_client");

    let anonymous = http
        .get(format!("{}/api/2.1/unity-catalog/tables", server.url))
        .send()
        .await
        .expect("send");
    assert_eq!(anonymous.status(), 401);

    let ok = http
        .get(format!("{}/api/2.1/unity-catalog/tables", server.url))
        .bearer_auth(server.token().await)
        .send()
        .await
        .expect("send");
    assert_eq!(ok.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_none_lets_unchanged_sdk_code_in_and_says_so_loudly() {
    use databricks_zerobus_ingest_sdk::JsonString;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with_args(dir.path(), "100ms", &["--auth", "none"]).await;
    assert!(
        server.log().contains("AUTHENTICATION IS OFF"),
        "{}",
        server.log()
    );
    assert!(
        !dir.path().join("admin-credentials").exists(),
        "no admin principal is created without auth"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "table",
            "create",
            "main.open.t",
            "--columns",
            "id BIGINT",
            "--server",
            &server.url,
        ])
        .args(["--data-dir", "/nonexistent"])
        .env_remove("SLUICE_CLIENT_ID")
        .env_remove("SLUICE_CLIENT_SECRET")
        .output()
        .expect("cli");
    assert!(out.status.success(), "{}", stderr(&out));
    let stream = server
        .sdk()
        .stream_builder()
        .table("main.open.t")
        .oauth("anyone", "anything")
        .json()
        .build()
        .await
        .expect("stream without real credentials");
    let offset = stream
        .ingest_record_offset(JsonString(r#"{"id": 7}"#.into()))
        .await
        .expect("ingest");
    stream.wait_for_offset(offset).await.expect("acked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_start_generates_an_admin_printed_once_and_stored_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |dir: &std::path::Path| {
        let port = crate::harness::free_port();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["serve", "--data-dir"])
            .arg(dir)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env_remove("SLUICE_BOOTSTRAP_CLIENT_ID")
            .env_remove("SLUICE_BOOTSTRAP_CLIENT_SECRET")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "server did not listen"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let out = child.wait_with_output().expect("wait");
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first = run(dir.path());
    assert!(first.contains("SLUICE_CLIENT_SECRET="), "{first}");
    let file = dir.path().join("admin-credentials");
    let mode = std::fs::metadata(&file)
        .expect("credentials file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let stored = std::fs::read_to_string(&file).expect("read");
    let secret_line = first
        .lines()
        .find(|l| l.trim().starts_with("SLUICE_CLIENT_SECRET="))
        .expect("secret line")
        .trim()
        .to_string();
    assert!(stored.contains(&secret_line));
    let second = run(dir.path());
    assert!(
        !second.contains("SLUICE_CLIENT_SECRET="),
        "printed only once: {second}"
    );
}
