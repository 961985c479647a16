//! The tonic `FlightService` of a pod: `DoPut` is admitted like a Zerobus stream (shutdown,
//! credentials, stream slots shared with them) and run on its own task; every other Flight
//! call is UNIMPLEMENTED (Sluice takes data in, it serves no reads).

use std::sync::Arc;

use arrow_flight::flight_service_server::FlightService;
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaResult, Ticket,
};
use futures::stream::BoxStream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::stream::run_put;
use crate::ingest::IngestService;

/// The Arrow Flight service of a pod.
pub struct FlightIngest {
    ingest: Arc<IngestService>,
}

impl FlightIngest {
    /// A Flight service admitting its streams through `ingest` (same slots and checks).
    pub fn new(ingest: Arc<IngestService>) -> Self {
        FlightIngest { ingest }
    }
}

type Unserved<T> = BoxStream<'static, Result<T, Status>>;

fn unserved<T>(call: &str) -> Result<Response<T>, Status> {
    Err(Status::unimplemented(format!(
        "Sluice serves only Arrow Flight DoPut (ingest); {call} is not served"
    )))
}

#[tonic::async_trait]
impl FlightService for FlightIngest {
    type HandshakeStream = Unserved<HandshakeResponse>;
    type ListFlightsStream = Unserved<FlightInfo>;
    type DoGetStream = Unserved<FlightData>;
    type DoPutStream = ReceiverStream<Result<PutResult, Status>>;
    type DoExchangeStream = Unserved<FlightData>;
    type DoActionStream = Unserved<arrow_flight::Result>;
    type ListActionsStream = Unserved<ActionType>;

    async fn do_put(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        self.ingest.spawn_stream(request, run_put)
    }

    async fn handshake(
        &self,
        _: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Self::HandshakeStream>, Status> {
        unserved("Handshake")
    }

    async fn list_flights(
        &self,
        _: Request<Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        unserved("ListFlights")
    }

    async fn get_flight_info(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        unserved("GetFlightInfo")
    }

    async fn poll_flight_info(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        unserved("PollFlightInfo")
    }

    async fn get_schema(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<SchemaResult>, Status> {
        unserved("GetSchema")
    }

    async fn do_get(&self, _: Request<Ticket>) -> Result<Response<Self::DoGetStream>, Status> {
        unserved("DoGet")
    }

    async fn do_exchange(
        &self,
        _: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        unserved("DoExchange")
    }

    async fn do_action(
        &self,
        _: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        unserved("DoAction")
    }

    async fn list_actions(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        unserved("ListActions")
    }
}
