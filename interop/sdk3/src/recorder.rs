//! A recording Zerobus endpoint for `PersistentStream`: it keeps every request the SDK sends,
//! decoded with Sluice's own wire types (`sluice-proto`), and answers like a minimal
//! persistent-stream server — a create with a minted stream id, a resume with a configured
//! `last_committed_offset`, each record with a cumulative ack — optionally dropping the first
//! connection mid-stream so the SDK's resume flow can be watched. `EphemeralStream` and
//! `RetireStream` answer UNIMPLEMENTED.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use sluice_proto::persistent_stream_request::Payload as In;
use sluice_proto::persistent_stream_response::Payload as Out;
use sluice_proto::zerobus_server::{Zerobus, ZerobusServer};
use sluice_proto::{
    CreateIngestStreamResponse, EphemeralStreamRequest, EphemeralStreamResponse,
    IngestRecordResponse, PersistentStreamRequest, PersistentStreamResponse,
    ResumeIngestStreamResponse, RetireStreamRequest, RetireStreamResponse,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status, Streaming};

use crate::HarnessError;

/// The header naming the target table.
const TABLE_HEADER: &str = "x-databricks-zerobus-table-name";

/// How the recorder answers.
#[derive(Debug, Clone)]
pub struct Script {
    /// The stream id answered to a create.
    pub minted_stream_id: String,
    /// The `last_committed_offset` answered to every resume (`None`: field absent).
    pub resume_watermark: Option<i64>,
    /// A fault on the first connection only.
    pub first_connection_fault: Option<Fault>,
}

/// On the first connection: ack only records up to `ack_up_to`, then end the connection with
/// UNAVAILABLE when the record at `drop_at` arrives.
#[derive(Debug, Clone, Copy)]
pub struct Fault {
    /// Highest offset acked before the drop.
    pub ack_up_to: i64,
    /// The offset whose arrival ends the connection.
    pub drop_at: i64,
}

/// One `PersistentStream` call as the recorder saw it.
#[derive(Debug, Clone, Default)]
pub struct Connection {
    /// The `x-databricks-zerobus-table-name` header, if sent.
    pub table_header: Option<String>,
    /// Every request, in arrival order.
    pub requests: Vec<PersistentStreamRequest>,
}

impl Connection {
    /// The offset of each ingest request (record or batch), in arrival order.
    pub fn ingest_offsets(&self) -> Vec<i64> {
        self.requests
            .iter()
            .filter_map(|r| match &r.payload {
                Some(In::IngestRecord(rec)) => rec.offset_id,
                Some(In::IngestRecordBatch(batch)) => batch.offset_id,
                _ => None,
            })
            .collect()
    }
}

type Log = Arc<Mutex<Vec<Connection>>>;

fn lock(log: &Log) -> MutexGuard<'_, Vec<Connection>> {
    log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running recorder; stops when dropped.
pub struct Recorder {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    log: Log,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Recorder {
    /// Starts a recorder on a free loopback port.
    pub async fn start(script: Script) -> Result<Recorder, HarnessError> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(HarnessError::io("bind the recorder"))?;
        let addr = listener
            .local_addr()
            .map_err(HarnessError::io("recorder address"))?;
        let log: Log = Arc::default();
        let service = Service {
            script,
            log: log.clone(),
            calls: AtomicUsize::new(0),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tonic::transport::Server::builder()
            .add_service(ZerobusServer::new(service))
            .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
                let _ = stopped.await;
            });
        tokio::spawn(server);
        Ok(Recorder {
            url: format!("http://{addr}"),
            log,
            _stop: stop,
        })
    }

    /// Every `PersistentStream` call so far, in order.
    pub fn connections(&self) -> Vec<Connection> {
        lock(&self.log).clone()
    }
}

struct Service {
    script: Script,
    log: Log,
    calls: AtomicUsize,
}

/// What the recorder does with one request.
enum Reply {
    Send(Out),
    Silent,
    Drop,
}

impl Script {
    /// The answer to `request` on the first connection or a later one.
    fn reply(&self, first_connection: bool, request: &PersistentStreamRequest) -> Reply {
        let fault = self.first_connection_fault.filter(|_| first_connection);
        let offset = match &request.payload {
            Some(In::CreateStream(_)) => {
                return Reply::Send(Out::CreateStreamResponse(CreateIngestStreamResponse {
                    stream_id: Some(self.minted_stream_id.clone()),
                }))
            }
            Some(In::ResumeStream(_)) => {
                return Reply::Send(Out::ResumeStreamResponse(ResumeIngestStreamResponse {
                    last_committed_offset: self.resume_watermark,
                }))
            }
            Some(In::IngestRecord(rec)) => rec.offset_id,
            Some(In::IngestRecordBatch(batch)) => batch.offset_id,
            None => None,
        };
        let Some(offset) = offset else {
            return Reply::Silent;
        };
        match fault {
            Some(f) if offset >= f.drop_at => Reply::Drop,
            Some(f) if offset > f.ack_up_to => Reply::Silent,
            _ => Reply::Send(Out::IngestRecordResponse(IngestRecordResponse {
                durability_ack_up_to_offset: Some(offset),
            })),
        }
    }
}

#[tonic::async_trait]
impl Zerobus for Service {
    type EphemeralStreamStream = ReceiverStream<Result<EphemeralStreamResponse, Status>>;

    async fn ephemeral_stream(
        &self,
        _request: Request<Streaming<EphemeralStreamRequest>>,
    ) -> Result<Response<Self::EphemeralStreamStream>, Status> {
        Err(Status::unimplemented(
            "the recorder serves PersistentStream only",
        ))
    }

    type PersistentStreamStream = ReceiverStream<Result<PersistentStreamResponse, Status>>;

    async fn persistent_stream(
        &self,
        request: Request<Streaming<PersistentStreamRequest>>,
    ) -> Result<Response<Self::PersistentStreamStream>, Status> {
        let index = self.calls.fetch_add(1, Ordering::SeqCst);
        let table_header = request
            .metadata()
            .get(TABLE_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        lock(&self.log).push(Connection {
            table_header,
            requests: Vec::new(),
        });
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(64);
        let script = self.script.clone();
        let log = self.log.clone();
        tokio::spawn(async move {
            while let Ok(Some(req)) = inbound.message().await {
                let reply = script.reply(index == 0, &req);
                lock(&log)[index].requests.push(req);
                let sent = match reply {
                    Reply::Send(payload) => tx
                        .send(Ok(PersistentStreamResponse {
                            payload: Some(payload),
                        }))
                        .await
                        .is_ok(),
                    Reply::Silent => true,
                    Reply::Drop => {
                        let _ = tx
                            .send(Err(Status::unavailable("recorder: connection dropped")))
                            .await;
                        false
                    }
                };
                if !sent {
                    return;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn retire_stream(
        &self,
        _request: Request<RetireStreamRequest>,
    ) -> Result<Response<RetireStreamResponse>, Status> {
        Err(Status::unimplemented("the recorder does not retire"))
    }
}
