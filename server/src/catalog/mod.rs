//! The catalog: tables, principals, grants and token-signing keys, and the
//! rules for changing them. Where it is stored is a [`CatalogStore`]:
//!
//! - [`FileStore`] (single node): one JSON file in the data directory,
//!   rewritten atomically;
//! - [`EtcdStore`] (cluster, `--join etcd://…`): one key in etcd that every
//!   pod reads, changed by compare-and-swap.
//!
//! The whole catalog is one document. A change reads the newest document,
//! applies the change to a copy and stores it only if nobody stored another
//! version meanwhile (else it starts again from the newer one), so pods never
//! lose each other's changes. Reads use the in-memory copy, reloaded when the
//! store reports a newer revision.

mod etcd_store;
mod file_store;
mod store;

pub use etcd_store::EtcdStore;
pub(crate) use file_store::persist_file;
pub use file_store::FileStore;
pub use store::{CatalogStore, Stored};

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sluice_zeroparser::TableSchema;

use crate::error::{Result, ServerError};

/// How many times a change is retried against newer versions before giving up.
const MAX_CHANGE_ATTEMPTS: usize = 32;

/// A registered table.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TableEntry {
    /// `catalog.schema.table`, lower case.
    pub full_name: String,
    /// Canonical column list (`TableSchema::to_sql`).
    pub columns: String,
    /// URL of the Delta table.
    pub storage_location: String,
    /// Stable id of the table.
    pub table_id: String,
    /// Creation time, milliseconds since the epoch.
    pub created_at: i64,
    /// Whether rows carry the `_sluice_*` system columns.
    #[serde(default)]
    pub system_columns: bool,
    /// Whether rows carry the `_rescued_data` column.
    #[serde(default)]
    pub rescued_data: bool,
    /// The Delta version of the table's last schema change by `sluice table
    /// alter` (0: none since it was created).
    #[serde(default)]
    pub schema_version: i64,
    /// An alter in progress (or cut short by a crash): the columns it sets.
    /// Its Delta commit may or may not have landed; `evolve::settle` finds
    /// out from the Delta log and completes or forgets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_columns: Option<String>,
    /// The pod whose alter is pending (None in catalogs written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_owner: Option<String>,
    /// When that alter began, milliseconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_since_ms: Option<i64>,
    /// `sluice.*` properties set by `sluice table alter` (`sluice.autoEvolve`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, String>,
}

impl TableEntry {
    /// A new table's entry: no added columns, no alter yet, no properties.
    pub fn new(
        full_name: impl Into<String>,
        columns: impl Into<String>,
        storage_location: impl Into<String>,
        table_id: impl Into<String>,
        created_at: i64,
    ) -> TableEntry {
        TableEntry {
            full_name: full_name.into(),
            columns: columns.into(),
            storage_location: storage_location.into(),
            table_id: table_id.into(),
            created_at,
            system_columns: false,
            rescued_data: false,
            schema_version: 0,
            pending_columns: None,
            pending_owner: None,
            pending_since_ms: None,
            properties: Default::default(),
        }
    }

    /// Forgets the record of a pending alter (completed or abandoned).
    fn clear_pending(&mut self) {
        self.pending_columns = None;
        self.pending_owner = None;
        self.pending_since_ms = None;
    }

    /// The columns the server adds after the table's own.
    pub fn added_columns(&self) -> crate::sink::AddedColumns {
        crate::sink::AddedColumns {
            rescued_data: self.rescued_data,
            system_columns: self.system_columns,
        }
    }

    /// Whether JSON records with unknown top-level keys add columns
    /// (`sluice.autoEvolve = add-columns`).
    pub fn auto_evolve(&self) -> bool {
        self.properties
            .get(crate::evolve::plan::AUTO_EVOLVE)
            .is_some_and(|v| v == "add-columns")
    }

    /// The parsed schema.
    pub fn schema(&self) -> Result<TableSchema> {
        TableSchema::parse(&self.columns).map_err(|e| {
            ServerError::Internal(format!(
                "stored schema of {} unreadable: {e}",
                self.full_name
            ))
        })
    }
}

/// A client that can obtain tokens.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PrincipalEntry {
    /// OAuth client id.
    pub client_id: String,
    /// Display name.
    pub name: String,
    /// Hex salt for the secret hash.
    pub salt: String,
    /// Hex SHA-256 of salt ‖ secret; the secret itself is never stored.
    pub secret_hash: String,
    /// Admins may do everything.
    pub admin: bool,
}

/// A key that signs access tokens. Stored encrypted (`sealed`); `secret` is only read
/// from catalogs written before encryption, which are migrated at start.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SigningKey {
    /// Key id, carried in the token header.
    pub kid: String,
    /// Legacy: base64 of the plaintext 32-byte HMAC key (empty once sealed).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub secret: String,
    /// The HMAC key encrypted under the key-encryption key (`auth::Kek` envelope).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed: Option<String>,
    /// Creation time, milliseconds since the epoch.
    pub created_at: i64,
}

/// A privilege on a table held by a principal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Privilege {
    /// Write records (what a producer needs).
    Modify,
    /// Read the table's definition and data.
    Select,
}

impl Privilege {
    /// Parses `MODIFY` or `SELECT` (any case).
    pub fn parse(text: &str) -> Option<Privilege> {
        match text.trim().to_ascii_uppercase().as_str() {
            "MODIFY" => Some(Privilege::Modify),
            "SELECT" => Some(Privilege::Select),
            _ => None,
        }
    }

    /// The SQL name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Privilege::Modify => "MODIFY",
            Privilege::Select => "SELECT",
        }
    }
}

/// One grant: `privilege` on `table` to the principal `client_id`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Grant {
    /// Client id of the principal.
    pub client_id: String,
    /// `catalog.schema.table`, lower case.
    pub table: String,
    /// The privilege.
    pub privilege: Privilege,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct CatalogState {
    #[serde(default)]
    tables: BTreeMap<String, TableEntry>,
    #[serde(default)]
    principals: BTreeMap<String, PrincipalEntry>,
    #[serde(default)]
    signing_keys: Vec<SigningKey>,
    #[serde(default)]
    grants: std::collections::BTreeSet<Grant>,
}

/// The in-memory copy and the store revision it was read at.
struct Cached {
    state: CatalogState,
    revision: i64,
}

/// The catalog a pod serves.
pub struct Catalog {
    store: Box<dyn CatalogStore>,
    cached: Mutex<Cached>,
}

impl Catalog {
    /// Opens (or creates) the embedded single-node catalog in `data_dir`.
    pub fn open(data_dir: &Path) -> Result<Catalog> {
        Catalog::with_store(Box::new(FileStore::open(data_dir)?))
    }

    /// A catalog kept in `store`.
    pub fn with_store(store: Box<dyn CatalogStore>) -> Result<Catalog> {
        let cached = load(store.as_ref())?;
        Ok(Catalog {
            store,
            cached: Mutex::new(cached),
        })
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Cached>> {
        self.cached
            .lock()
            .map_err(|_| ServerError::Internal("catalog lock poisoned".into()))
    }

    /// Applies `f` to the newest catalog and stores the result; if another
    /// writer stored a newer version first, reloads and applies `f` again.
    fn update<T>(&self, mut f: impl FnMut(&mut CatalogState) -> Result<T>) -> Result<T> {
        let mut guard = self.lock()?;
        if self.store.revision_hint() != guard.revision {
            *guard = load(self.store.as_ref())?;
        }
        for _ in 0..MAX_CHANGE_ATTEMPTS {
            let mut next = guard.state.clone();
            let out = f(&mut next)?;
            let bytes = serde_json::to_vec_pretty(&next)
                .map_err(|e| ServerError::Internal(format!("encoding catalog: {e}")))?;
            match self.store.replace(guard.revision, &bytes)? {
                Some(revision) => {
                    *guard = Cached {
                        state: next,
                        revision,
                    };
                    return Ok(out);
                }
                None => *guard = load(self.store.as_ref())?,
            }
        }
        Err(ServerError::Unavailable(format!(
            "the catalog changed under {MAX_CHANGE_ATTEMPTS} attempts in a row; retry"
        )))
    }

    fn read<T>(&self, f: impl FnOnce(&CatalogState) -> T) -> Result<T> {
        let mut guard = self.lock()?;
        if self.store.revision_hint() != guard.revision {
            *guard = load(self.store.as_ref())?;
        }
        Ok(f(&guard.state))
    }

    /// Registers a new table; fails if the name is taken.
    pub fn create_table(&self, entry: TableEntry) -> Result<TableEntry> {
        self.update(|s| {
            if s.tables.contains_key(&entry.full_name) {
                return Err(ServerError::AlreadyExists(format!(
                    "table {} already exists",
                    entry.full_name
                )));
            }
            s.tables.insert(entry.full_name.clone(), entry.clone());
            Ok(entry.clone())
        })
    }

    /// Looks a table up by its full name (case-insensitive).
    pub fn table(&self, full_name: &str) -> Result<Option<TableEntry>> {
        let key = full_name.to_ascii_lowercase();
        self.read(|s| s.tables.get(&key).cloned())
    }

    /// All tables, ordered by name.
    pub fn tables(&self) -> Result<Vec<TableEntry>> {
        self.read(|s| s.tables.values().cloned().collect())
    }

    /// Records an alter of `full_name` about to commit `columns` to Delta:
    /// refused when the table's columns are no longer `expected` or another
    /// alter is pending (a stale alter never overwrites a newer one).
    pub fn begin_alter(
        &self,
        full_name: &str,
        expected: &str,
        columns: &str,
        owner: &str,
    ) -> Result<()> {
        let key = full_name.to_ascii_lowercase();
        self.update(|s| {
            let entry = table_mut(s, &key)?;
            if entry.columns != expected || entry.pending_columns.is_some() {
                let under_way = match (&entry.pending_columns, &entry.pending_owner) {
                    (Some(_), Some(pod)) => format!("; an alter by pod {pod} is under way"),
                    (Some(_), None) => "; another alter is under way".to_string(),
                    (None, _) => String::new(),
                };
                return Err(ServerError::FailedPrecondition(format!(
                    "alter of {key}: the table changed meanwhile (schema version {}{under_way}); \
                     describe it again and retry",
                    entry.schema_version
                )));
            }
            entry.pending_columns = Some(columns.to_string());
            entry.pending_owner = Some(owner.to_string());
            entry.pending_since_ms = Some(now_millis());
            Ok(())
        })
    }

    /// Completes the pending alter of `full_name` that set `columns` over `from` (the
    /// columns it began with): they become the table's, at Delta version `version`.
    /// Already completed (another pod's `evolve::settle` found its Delta commit) is done,
    /// also when that pod has since begun an alter of its own, which stays pending;
    /// forgotten as abandoned while its commit was landing, it is completed all the same
    /// when the table still has `from`. Anything else is refused: the catalog then holds a
    /// change this alter did not make.
    pub fn finish_alter(
        &self,
        full_name: &str,
        from: &str,
        columns: &str,
        version: i64,
    ) -> Result<TableEntry> {
        let key = full_name.to_ascii_lowercase();
        self.update(|s| {
            let entry = table_mut(s, &key)?;
            let mine = entry.pending_columns.as_deref() == Some(columns);
            // Completed by another pod's settle; if that pod has since begun an alter of its
            // own, only at the version it read (this commit's or later), and its record stays.
            let done = !mine
                && entry.columns == columns
                && (entry.pending_columns.is_none() || entry.schema_version >= version);
            if done {
                return Ok(entry.clone());
            }
            let forgotten = entry.pending_columns.is_none() && entry.columns == from;
            if !(mine || forgotten) {
                return Err(ServerError::FailedPrecondition(format!(
                    "alter of {key}: committed to Delta at version {version}, but the catalog \
                     changed meanwhile (columns `{}`, pending `{}`)",
                    entry.columns,
                    entry.pending_columns.as_deref().unwrap_or("none")
                )));
            }
            entry.columns = columns.to_string();
            entry.schema_version = version;
            entry.clear_pending();
            Ok(entry.clone())
        })
    }

    /// Sets `sluice.*` properties of table `full_name`.
    pub fn set_table_properties(
        &self,
        full_name: &str,
        properties: &BTreeMap<String, String>,
    ) -> Result<TableEntry> {
        let key = full_name.to_ascii_lowercase();
        self.update(|s| {
            let entry = table_mut(s, &key)?;
            for (k, v) in properties {
                entry.properties.insert(k.clone(), v.clone());
            }
            Ok(entry.clone())
        })
    }

    /// Forgets the pending alter of `full_name` (its Delta commit did not land).
    pub fn abort_alter(&self, full_name: &str) -> Result<TableEntry> {
        let key = full_name.to_ascii_lowercase();
        self.update(|s| {
            let entry = table_mut(s, &key)?;
            entry.clear_pending();
            Ok(entry.clone())
        })
    }

    /// Removes a table; returns the removed entry.
    pub fn drop_table(&self, full_name: &str) -> Result<TableEntry> {
        let key = full_name.to_ascii_lowercase();
        self.update(|s| {
            s.grants.retain(|g| g.table != key);
            s.tables
                .remove(&key)
                .ok_or_else(|| ServerError::NotFound(format!("table {key} does not exist")))
        })
    }

    /// Adds a principal; fails if the client id is taken.
    pub fn add_principal(&self, p: PrincipalEntry) -> Result<()> {
        self.update(|s| {
            if s.principals.contains_key(&p.client_id) {
                return Err(ServerError::AlreadyExists(format!(
                    "principal {} already exists",
                    p.client_id
                )));
            }
            s.principals.insert(p.client_id.clone(), p.clone());
            Ok(())
        })
    }

    /// Looks a principal up by client id.
    pub fn principal(&self, client_id: &str) -> Result<Option<PrincipalEntry>> {
        self.read(|s| s.principals.get(client_id).cloned())
    }

    /// All principals, ordered by client id.
    pub fn principals(&self) -> Result<Vec<PrincipalEntry>> {
        self.read(|s| s.principals.values().cloned().collect())
    }

    /// Removes a principal and its grants; the last admin cannot go.
    pub fn delete_principal(&self, client_id: &str) -> Result<PrincipalEntry> {
        self.update(|s| {
            let p = s.principals.get(client_id).cloned().ok_or_else(|| {
                ServerError::NotFound(format!("principal {client_id} does not exist"))
            })?;
            if p.admin && s.principals.values().filter(|q| q.admin).count() == 1 {
                return Err(ServerError::InvalidArgument(format!(
                    "principal {client_id} is the last admin and cannot be deleted"
                )));
            }
            s.principals.remove(client_id);
            s.grants.retain(|g| g.client_id != client_id);
            Ok(p)
        })
    }

    /// Adds a grant (idempotent); the principal and the table must exist.
    pub fn grant(&self, grant: Grant) -> Result<()> {
        self.update(|s| {
            if !s.principals.contains_key(&grant.client_id) {
                return Err(ServerError::NotFound(format!(
                    "principal {} does not exist",
                    grant.client_id
                )));
            }
            if !s.tables.contains_key(&grant.table) {
                return Err(ServerError::NotFound(format!(
                    "table {} does not exist",
                    grant.table
                )));
            }
            s.grants.insert(grant.clone());
            Ok(())
        })
    }

    /// Removes a grant; returns whether it existed.
    pub fn revoke(&self, grant: &Grant) -> Result<bool> {
        self.update(|s| Ok(s.grants.remove(grant)))
    }

    /// Whether `client_id` holds `privilege` on `table` (lower case).
    pub fn has_grant(&self, client_id: &str, table: &str, privilege: Privilege) -> Result<bool> {
        let probe = Grant {
            client_id: client_id.to_string(),
            table: table.to_string(),
            privilege,
        };
        self.read(|s| s.grants.contains(&probe))
    }

    /// Every grant, ordered by principal, table and privilege.
    pub fn grants(&self) -> Result<Vec<Grant>> {
        self.read(|s| s.grants.iter().cloned().collect())
    }

    /// Whether any principal exists yet.
    pub fn has_principals(&self) -> Result<bool> {
        self.read(|s| !s.principals.is_empty())
    }

    /// The signing keys, newest last.
    pub fn signing_keys(&self) -> Result<Vec<SigningKey>> {
        self.read(|s| s.signing_keys.clone())
    }

    /// Applies `f` to every signing key in one change (re-encryption); returns how many
    /// keys `f` changed (it returns whether it did).
    pub fn change_signing_keys(
        &self,
        mut f: impl FnMut(&mut SigningKey) -> Result<bool>,
    ) -> Result<usize> {
        if self.signing_keys()?.is_empty() {
            return Ok(0);
        }
        self.update(|s| {
            let mut changed = 0;
            for key in &mut s.signing_keys {
                changed += usize::from(f(key)?);
            }
            Ok(changed)
        })
    }

    /// Adds a signing key (it becomes the one that signs).
    pub fn add_signing_key(&self, key: SigningKey) -> Result<()> {
        self.update(|s| {
            s.signing_keys.push(key.clone());
            Ok(())
        })
    }
}

/// The entry of table `key` (lower case) in `s`, to change it.
fn table_mut<'s>(s: &'s mut CatalogState, key: &str) -> Result<&'s mut TableEntry> {
    s.tables
        .get_mut(key)
        .ok_or_else(|| ServerError::NotFound(format!("table {key} does not exist")))
}

fn load(store: &dyn CatalogStore) -> Result<Cached> {
    Ok(match store.load()? {
        Some(stored) => Cached {
            state: serde_json::from_slice(&stored.bytes).map_err(|e| {
                ServerError::Internal(format!(
                    "catalog in {} is unreadable: {e}",
                    store.describe()
                ))
            })?,
            revision: stored.revision,
        },
        None => Cached {
            state: CatalogState::default(),
            revision: 0,
        },
    })
}

/// Milliseconds since the Unix epoch.
pub fn now_millis() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[cfg(test)]
mod alter_tests;
