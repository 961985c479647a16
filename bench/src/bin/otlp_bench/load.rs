//! The Rust OTLP load: `clients` tasks, each with its own connection, export requests of
//! spans as fast as answers come (closed loop) for the window — over gRPC
//! (`TraceService/Export`, the `opentelemetry-proto` tonic client) or OTLP/HTTP
//! (`POST /v1/traces`, `application/x-protobuf`) — and time each from send to its answer.
//! Each client cycles through a few prepared requests so the generator stays cheap.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use sluice_bench::stats::Samples;

use super::spans;

/// Prepared requests per client.
const PREPARED: u64 = 8;

/// Which OTLP transport.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// gRPC `TraceService/Export`.
    Grpc,
    /// `POST /v1/traces` with a protobuf body.
    Http,
}

/// What one load run did.
pub struct Outcome {
    /// Requests answered inside the window.
    pub requests: u64,
    /// Spans in them.
    pub spans: u64,
    /// Request bytes (protobuf) in them.
    pub bytes: u64,
    /// Request latencies, ms.
    pub latency_ms: Samples,
}

/// Runs the load for `window`.
pub async fn run(
    transport: Transport,
    url: &str,
    token: &str,
    table: &str,
    clients: usize,
    per_request: usize,
    window: Duration,
) -> Result<Outcome> {
    let deadline = Instant::now() + window;
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (url, token, table) = (url.to_string(), token.to_string(), table.to_string());
        tasks.push(tokio::spawn(async move {
            let prepared: Vec<ExportTraceServiceRequest> = (0..PREPARED)
                .map(|n| spans::request(c as u64, n, per_request))
                .collect();
            let encoded: Vec<Vec<u8>> = prepared.iter().map(|r| r.encode_to_vec()).collect();
            let mut latency = Samples::new();
            let (mut requests, mut sent_spans, mut bytes) = (0u64, 0u64, 0u64);
            let mut grpc = match transport {
                Transport::Grpc => Some(TraceServiceClient::connect(url.clone()).await?),
                Transport::Http => None,
            };
            let http = reqwest::Client::builder().http1_only().build()?;
            let mut n = 0usize;
            while Instant::now() < deadline {
                let i = n % PREPARED as usize;
                n += 1;
                let sent = Instant::now();
                match grpc.as_mut() {
                    Some(client) => {
                        let mut request = tonic::Request::new(prepared[i].clone());
                        let meta = request.metadata_mut();
                        meta.insert("authorization", format!("Bearer {token}").parse()?);
                        meta.insert("x-databricks-zerobus-table-name", table.parse()?);
                        let answer = client.export(request).await?.into_inner();
                        if answer
                            .partial_success
                            .as_ref()
                            .is_some_and(|p| p.rejected_spans > 0)
                        {
                            bail!("spans rejected: {:?}", answer.partial_success);
                        }
                    }
                    None => {
                        let resp = http
                            .post(format!("{url}/v1/traces"))
                            .bearer_auth(&token)
                            .header("content-type", "application/x-protobuf")
                            .header("x-databricks-zerobus-table-name", &table)
                            .body(encoded[i].clone())
                            .send()
                            .await?;
                        let status = resp.status();
                        let _ = resp.bytes().await?;
                        if !status.is_success() {
                            bail!("/v1/traces answered {status}");
                        }
                    }
                }
                if Instant::now() <= deadline {
                    latency.push_ms(sent.elapsed());
                    requests += 1;
                    sent_spans += per_request as u64;
                    bytes += encoded[i].len() as u64;
                }
            }
            anyhow::Ok((requests, sent_spans, bytes, latency))
        }));
    }
    let mut out = Outcome {
        requests: 0,
        spans: 0,
        bytes: 0,
        latency_ms: Samples::new(),
    };
    for t in tasks {
        let (requests, spans, bytes, latency) = t.await??;
        out.requests += requests;
        out.spans += spans;
        out.bytes += bytes;
        out.latency_ms.extend(&latency);
    }
    Ok(out)
}
