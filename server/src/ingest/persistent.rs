//! One `PersistentStream` connection: its opening (create or resume, see
//! `persistent_open`) answered on the persistent response stream, then the
//! same select loop as an ephemeral stream (`stream::serve_opened`), whose
//! responses are forwarded as `PersistentStreamResponse`s.

use std::sync::Arc;

use sluice_proto::{
    ephemeral_stream_response, persistent_stream_request, persistent_stream_response,
    CreateIngestStreamResponse, EphemeralStreamResponse, PersistentStreamRequest,
    PersistentStreamResponse, ResumeIngestStreamResponse,
};
use tokio::sync::mpsc;
use tonic::{Status, Streaming};

use super::inbound::PersistentInbound;
use super::persistent_open::{create_persistent, resume_persistent};
use super::stream::{first_message, serve_opened};
use crate::auth::Caller;
use crate::limits::StreamSlot;
use crate::pod::Pod;

/// Where a persistent stream's responses go.
pub type PersistentTx = mpsc::Sender<Result<PersistentStreamResponse, Status>>;

/// Depth of the channel between the select loop and the persistent response stream.
const FORWARD_DEPTH: usize = 16;

/// Runs one persistent stream connection to its end.
pub async fn run_persistent(
    pod: Arc<Pod>,
    caller: Caller,
    header_table: Option<String>,
    mut inbound: Streaming<PersistentStreamRequest>,
    tx: PersistentTx,
    slot: StreamSlot,
) {
    let Some(first) = first_message(&pod, &mut inbound, &tx).await else {
        return;
    };
    use persistent_stream_request::Payload;
    let header = header_table.as_deref();
    let (opened, resumed) = match first.payload {
        Some(Payload::CreateStream(c)) => {
            (create_persistent(&pod, &caller, header, c).await, false)
        }
        Some(Payload::ResumeStream(r)) => (resume_persistent(&pod, &caller, header, r).await, true),
        _ => {
            let _ = tx
                .send(Err(Status::failed_precondition(
                    "the first message of a persistent stream must be create_stream or resume_stream",
                )))
                .await;
            return;
        }
    };
    let opened = match opened {
        Ok(o) => o,
        Err(e) => {
            crate::ingest::acks::refuse_open(&tx, e).await;
            return;
        }
    };
    let answer = if resumed {
        persistent_stream_response::Payload::ResumeStreamResponse(ResumeIngestStreamResponse {
            last_committed_offset: opened.watermark,
        })
    } else {
        persistent_stream_response::Payload::CreateStreamResponse(CreateIngestStreamResponse {
            stream_id: Some(opened.opened.stream_id.clone()),
        })
    };
    let answer = PersistentStreamResponse {
        payload: Some(answer),
    };
    if tx.send(Ok(answer)).await.is_err() {
        pod.streams.closed(opened.opened.key);
        return;
    }
    let (ephemeral_tx, ephemeral_rx) = mpsc::channel(FORWARD_DEPTH);
    let inbound = PersistentInbound(inbound);
    tokio::join!(
        serve_opened(
            &pod,
            opened.opened,
            inbound,
            ephemeral_tx,
            slot,
            Some(opened.attached)
        ),
        forward(ephemeral_rx, tx),
    );
}

/// Forwards the select loop's responses until either side is gone.
async fn forward(
    mut from: mpsc::Receiver<Result<EphemeralStreamResponse, Status>>,
    to: PersistentTx,
) {
    while let Some(item) = from.recv().await {
        if to.send(item.map(as_persistent)).await.is_err() {
            return;
        }
    }
}

/// An ephemeral stream's response as the persistent response with the same meaning.
fn as_persistent(response: EphemeralStreamResponse) -> PersistentStreamResponse {
    use ephemeral_stream_response::Payload as In;
    use persistent_stream_response::Payload as Out;
    PersistentStreamResponse {
        payload: response.payload.map(|p| match p {
            In::CreateStreamResponse(c) => Out::CreateStreamResponse(c),
            In::IngestRecordResponse(r) => Out::IngestRecordResponse(r),
            In::CloseStreamSignal(s) => Out::CloseStreamSignal(s),
        }),
    }
}
