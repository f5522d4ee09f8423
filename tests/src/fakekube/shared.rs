//! What the FAKE API server shares between requests: the store and the hooks, each
//! behind its own lock.

use super::hooks::Hooks;
use super::store::State;
use std::sync::{Mutex, MutexGuard};

/// Everything the server shares between requests.
pub struct Shared {
    /// Objects and settings.
    pub state: Mutex<State>,
    /// Error rules and the request log.
    pub hooks: Mutex<Hooks>,
}

impl Shared {
    /// Locks the store (a poisoned lock is still used: tests want answers, not panics).
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Locks the hooks.
    pub fn hooks(&self) -> MutexGuard<'_, Hooks> {
        self.hooks.lock().unwrap_or_else(|e| e.into_inner())
    }
}
