//! Who may change the catalog.

use crate::auth::Caller;
use crate::error::{Result, ServerError};

/// Refuses a caller that may not change the catalog.
pub fn require_admin(caller: &Caller) -> Result<()> {
    if !caller.is_admin() {
        return Err(ServerError::PermissionDenied(
            "this token may not change the catalog (admin only)".into(),
        ));
    }
    Ok(())
}
