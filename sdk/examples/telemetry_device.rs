//! A telemetry device: sends one JSON reading per interval through an offline spool, so
//! readings taken while the network is down are kept on disk and sent later — also after
//! the device restarts. It starts even when the server is unreachable.
//!
//! Configuration (environment): `SLUICE_ENDPOINT`, `SLUICE_CLIENT_ID`,
//! `SLUICE_CLIENT_SECRET`, `TABLE` (columns `id BIGINT, device STRING, temp DOUBLE`),
//! `SPOOL_DIR`, `DEVICE_ID`, `FIRST_ID` (default 0), `READINGS` (default 100),
//! `INTERVAL_MS` (default 0). With `POWER_OFF=1` the device syncs its spool and stops
//! without waiting for acks (what a power cut after the last reading leaves); otherwise
//! it waits for every ack and closes.
//!
//! `cargo run -p sluice-sdk --example telemetry_device`

use std::time::Duration;

use sluice_sdk::{Client, SpoolOptions};

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = Client::builder(env("SLUICE_ENDPOINT", "http://127.0.0.1:50051"))
        .credentials(env("SLUICE_CLIENT_ID", ""), env("SLUICE_CLIENT_SECRET", ""))
        .build()?;
    let spool = SpoolOptions::new(env("SPOOL_DIR", "device-spool")).max_bytes(16 << 20);
    let stream = client
        .stream(env("TABLE", "main.iot.readings"))
        .json()
        .spool(spool)
        .open_timeout(Duration::ZERO)
        .open()
        .await?;
    let device = env("DEVICE_ID", "device-1");
    let first: i64 = env("FIRST_ID", "0").parse()?;
    let readings: i64 = env("READINGS", "100").parse()?;
    let interval = Duration::from_millis(env("INTERVAL_MS", "0").parse()?);
    for i in first..first + readings {
        let temp = 20.0 + (i % 100) as f64 / 10.0;
        let reading = serde_json::json!({"id": i, "device": device, "temp": temp});
        stream.send(reading.to_string()).await?;
        if !interval.is_zero() {
            tokio::time::sleep(interval).await;
        }
    }
    if env("POWER_OFF", "0") == "1" {
        stream.spool_sync().await?;
        println!("spooled {readings} readings; powering off");
        std::process::exit(0);
    }
    stream.close().await?;
    println!("sent {readings} readings; every spooled reading acked");
    Ok(())
}
