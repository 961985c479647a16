//! Describing and listing tables, each filtered by what the caller may see.

use crate::auth::Caller;
use crate::catalog::TableEntry;
use crate::error::{Result, ServerError};
use crate::pod::Pod;

/// Whether `caller` may see table `full_name`.
fn may_see(caller: &Caller, full_name: &str) -> bool {
    caller.is_admin() || caller.may_read(full_name)
}

/// The catalog entry of `full_name`, if `caller` may see it.
pub fn get_table(pod: &Pod, caller: &Caller, full_name: &str) -> Result<TableEntry> {
    if !may_see(caller, full_name) {
        return Err(ServerError::PermissionDenied(format!(
            "this token does not cover table {full_name}"
        )));
    }
    pod.catalog
        .table(full_name)?
        .ok_or_else(|| ServerError::NotFound(format!("table {full_name} does not exist")))
}

/// The catalog entries of every table `caller` may see.
pub fn list_tables(pod: &Pod, caller: &Caller) -> Result<Vec<TableEntry>> {
    Ok(pod
        .catalog
        .tables()?
        .into_iter()
        .filter(|entry| may_see(caller, &entry.full_name))
        .collect())
}
