//! Lock helpers shared by the writer, the preparer and the handles.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, going on after a panic of another holder: every structure the WAL guards
/// with a mutex stays consistent at each unlock, so a poisoned lock holds valid data.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
