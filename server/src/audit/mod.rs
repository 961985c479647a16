//! The audit trail of the control plane: every change (principal create/delete, grant,
//! revoke, signing-key rotation, KEK rotation, table create/drop/optimize/vacuum, pod drain)
//! is logged as one structured line (tracing target `sluice::audit`: who, action, target,
//! pod, time) and, with `--audit-table CATALOG.SCHEMA.TABLE`, appended as a row to that
//! Delta table through the pod's WAL and sink like any ingested record (durable before the
//! change is answered; replayed after a crash).
//!
//! - [`event`]: the event, its log line and its row;
//! - [`table`]: the audit table (created on first use with a fixed schema) and the append;
//! - [`pending`]: events of offline commands (`sluice keys rotate-kek`) parked in the data
//!   dir or etcd until a pod with an audit table appends them.

pub mod event;
pub mod pending;
pub mod table;

pub use event::{Action, AuditEvent};

use crate::auth::Caller;
use crate::pod::Pod;

/// Who a verified caller is, as the audit trail names it: the principal's client id, or
/// `anonymous` when authentication is off.
pub fn who(caller: &Caller) -> String {
    match caller {
        Caller::Anonymous => "anonymous".to_string(),
        Caller::Token(claims) => claims.sub.clone(),
    }
}

/// Records a change `caller` made on this pod: logs it and appends it to the audit table,
/// if there is one. A failed append is logged (the change stands; its log line remains).
pub async fn record(pod: &Pod, caller: &Caller, action: Action, target: &str, detail: String) {
    let event = AuditEvent::now(who(caller), action, target, pod.pod_id(), detail);
    record_event(pod, &event).await;
}

/// Logs `event` and appends it to the audit table, if there is one.
pub async fn record_event(pod: &Pod, event: &AuditEvent) {
    event.log();
    if let Err(e) = table::append(pod, std::slice::from_ref(event)).await {
        metrics::counter!("sluice_audit_append_failures_total").increment(1);
        tracing::error!(
            action = event.action.as_str(),
            target = %event.target,
            "appending to the audit table failed (the change is done; only this log has it): {e}"
        );
    }
}
