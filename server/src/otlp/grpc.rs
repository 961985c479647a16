//! The OTLP collector services over gRPC, on the pod's one port beside the Zerobus and
//! Flight services: `opentelemetry.proto.collector.{trace,logs,metrics}.v1.*Service/Export`
//! (the `opentelemetry-proto` crate's tonic servers; gzip requests accepted). Each call
//! reads `authorization: Bearer` and `x-databricks-zerobus-table-name`, hands the request
//! to [`export`](super::export) and answers with its partial success; a refusal is the
//! pod's gRPC status (UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND, INVALID_ARGUMENT, …).

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::logs::v1::logs_service_server::{
    LogsService, LogsServiceServer,
};
use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use tonic::codec::CompressionEncoding;
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

use super::export::{export, Exported, OtlpIngest};
use super::request::Request as OtlpRequest;
use super::response;
use crate::auth::TABLE_HEADER;
use crate::pod::Pod;

/// The three OTLP services of a pod (one value serves all three).
#[derive(Clone)]
pub struct OtlpGrpc {
    pod: Arc<Pod>,
    otlp: Arc<OtlpIngest>,
}

impl OtlpGrpc {
    /// The services over `pod`.
    pub fn new(pod: Arc<Pod>, otlp: Arc<OtlpIngest>) -> Self {
        OtlpGrpc { pod, otlp }
    }

    /// The tonic servers of the three services, bounded by the pod's message limit.
    pub fn servers(
        self,
    ) -> (
        TraceServiceServer<OtlpGrpc>,
        LogsServiceServer<OtlpGrpc>,
        MetricsServiceServer<OtlpGrpc>,
    ) {
        let limit = self.pod.config.max_message_bytes;
        (
            TraceServiceServer::new(self.clone())
                .accept_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(limit),
            LogsServiceServer::new(self.clone())
                .accept_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(limit),
            MetricsServiceServer::new(self)
                .accept_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(limit),
        )
    }

    async fn handle(
        &self,
        metadata: &MetadataMap,
        request: OtlpRequest,
    ) -> Result<Exported, Status> {
        let authorization = metadata.get("authorization").and_then(|v| v.to_str().ok());
        let caller = self.pod.auth.verify_bearer(authorization)?;
        let table = metadata
            .get(TABLE_HEADER)
            .map(|v| {
                v.to_str().map_err(|_| {
                    Status::invalid_argument(format!("{TABLE_HEADER} header is not ASCII"))
                })
            })
            .transpose()?;
        Ok(export(&self.pod, &self.otlp, &caller, table, &request, None).await?)
    }

    /// [`OtlpGrpc::handle`], with a refusal counted in `sluice_refusals_total{code}`.
    async fn answer(
        &self,
        metadata: &MetadataMap,
        request: OtlpRequest,
    ) -> Result<Exported, Status> {
        let out = self.handle(metadata, request).await;
        if let Err(status) = &out {
            crate::ingest::acks::count_refusal(status);
        }
        out
    }
}

#[tonic::async_trait]
impl TraceService for OtlpGrpc {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let (metadata, _, message) = request.into_parts();
        let out = self.answer(&metadata, OtlpRequest::Traces(message)).await?;
        Ok(Response::new(response::traces(out)))
    }
}

#[tonic::async_trait]
impl LogsService for OtlpGrpc {
    async fn export(
        &self,
        request: Request<ExportLogsServiceRequest>,
    ) -> Result<Response<ExportLogsServiceResponse>, Status> {
        let (metadata, _, message) = request.into_parts();
        let out = self.answer(&metadata, OtlpRequest::Logs(message)).await?;
        Ok(Response::new(response::logs(out)))
    }
}

#[tonic::async_trait]
impl MetricsService for OtlpGrpc {
    async fn export(
        &self,
        request: Request<ExportMetricsServiceRequest>,
    ) -> Result<Response<ExportMetricsServiceResponse>, Status> {
        let (metadata, _, message) = request.into_parts();
        let out = self
            .answer(&metadata, OtlpRequest::Metrics(message))
            .await?;
        Ok(Response::new(response::metrics(out)))
    }
}
