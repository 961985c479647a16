//! One audit event: who did what to which target, when and on which pod; its structured
//! log line and its row of the audit table (a JSON record of the table's fixed schema).

use serde::{Deserialize, Serialize};

/// The kinds of control-plane change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    /// A principal was created.
    #[serde(rename = "principal.create")]
    PrincipalCreate,
    /// A principal (and its grants) was deleted.
    #[serde(rename = "principal.delete")]
    PrincipalDelete,
    /// A privilege was granted.
    #[serde(rename = "grant")]
    Grant,
    /// A privilege was revoked.
    #[serde(rename = "revoke")]
    Revoke,
    /// A token-signing key was added.
    #[serde(rename = "keys.rotate")]
    KeysRotate,
    /// The signing keys were re-encrypted under a new key-encryption key.
    #[serde(rename = "keys.rotate_kek")]
    KeysRotateKek,
    /// A table was created.
    #[serde(rename = "table.create")]
    TableCreate,
    /// A table was dropped.
    #[serde(rename = "table.drop")]
    TableDrop,
    /// A table's schema or properties were changed.
    #[serde(rename = "table.alter")]
    TableAlter,
    /// A table was compacted on request.
    #[serde(rename = "table.optimize")]
    TableOptimize,
    /// A table was vacuumed on request.
    #[serde(rename = "table.vacuum")]
    TableVacuum,
    /// A pod was asked to drain.
    #[serde(rename = "pod.drain")]
    PodDrain,
}

impl Action {
    /// The name in the log line and the `action` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::PrincipalCreate => "principal.create",
            Action::PrincipalDelete => "principal.delete",
            Action::Grant => "grant",
            Action::Revoke => "revoke",
            Action::KeysRotate => "keys.rotate",
            Action::KeysRotateKek => "keys.rotate_kek",
            Action::TableCreate => "table.create",
            Action::TableDrop => "table.drop",
            Action::TableAlter => "table.alter",
            Action::TableOptimize => "table.optimize",
            Action::TableVacuum => "table.vacuum",
            Action::PodDrain => "pod.drain",
        }
    }
}

/// One control-plane change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEvent {
    /// When, RFC 3339 in UTC with microseconds.
    pub event_time: String,
    /// The principal's client id (or, for commands that bypass the API, the OS user).
    pub who: String,
    /// What was done.
    pub action: Action,
    /// What it was done to: a table, a principal, a key id, a pod.
    pub target: String,
    /// The pod that made the change (or `cli` for an offline command).
    pub pod: String,
    /// Specifics (the privilege of a grant, the principal of a grant, …); may be empty.
    pub detail: String,
}

impl AuditEvent {
    /// An event happening now.
    pub fn now(who: String, action: Action, target: &str, pod: &str, detail: String) -> AuditEvent {
        AuditEvent {
            event_time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            who,
            action,
            target: target.to_string(),
            pod: pod.to_string(),
            detail,
        }
    }

    /// The structured log line (tracing target `sluice::audit`).
    pub fn log(&self) {
        tracing::info!(
            target: "sluice::audit",
            who = %self.who,
            action = self.action.as_str(),
            target_name = %self.target,
            pod = %self.pod,
            at = %self.event_time,
            detail = %self.detail,
            "audit"
        );
    }

    /// The event as one JSON record of the audit table.
    pub fn to_json(&self) -> String {
        serde_json::json!({
            "event_time": self.event_time,
            "who": self.who,
            "action": self.action.as_str(),
            "target": self.target,
            "pod": self.pod,
            "detail": self.detail,
        })
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_round_trips_and_names_its_action() {
        let event = AuditEvent::now(
            "ops".into(),
            Action::KeysRotateKek,
            "kek-1",
            "cli",
            String::new(),
        );
        let json: serde_json::Value = serde_json::from_str(&event.to_json()).expect("json");
        assert_eq!(json["action"], "keys.rotate_kek");
        assert_eq!(json["who"], "ops");
        assert!(event.event_time.ends_with('Z'), "{}", event.event_time);
        let stored = serde_json::to_string(&event).expect("serialize");
        let back: AuditEvent = serde_json::from_str(&stored).expect("deserialize");
        assert_eq!(back, event);
    }
}
