//! `dependsOn`: ordering between the sources of one agent. After every poll each source
//! publishes its [`Readiness`] on a watch channel: `Ready` when the bundle its channel
//! currently names is the one this agent applied and it is Healthy, else why not (its
//! source unreachable, that bundle refused, failed, held or waiting itself, the applied
//! state Progressing or Degraded). A source that depends on others asks its [`Gate`] right
//! before it would apply a new bundle (after fetch, verify and plan: a bad bundle is
//! still refused as such); while a dependency is not ready the attempt is `Waiting`,
//! naming the dependency and why, and nothing is applied. The run loop wakes a waiting
//! source as soon as a dependency's readiness changes ([`Gate::changed`]).
//!
//! What is ordered is the apply of a source's *new* bundle. The resync of the bundle it
//! already applied is not held back (drift correction goes on, as outside apply windows),
//! and a dependency's new bundle does not make its dependents apply again: only a
//! dependent's own new bundle does (and then it waits for the dependency to be ready).

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// What a source tells the sources that depend on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// Not polled yet in this run.
    Unknown,
    /// The bundle its channel names is applied by this agent and Healthy.
    Ready,
    /// Why it is not ready.
    NotReady(String),
}

/// A verified new bundle waiting for the sources it depends on (`/status`, `waiting`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Waiting {
    /// The dependencies that are not ready.
    pub on: Vec<String>,
    /// Why each is not ready (`NAME: why; ...`).
    pub reason: String,
    /// The bundle that waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Its sequence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
}

/// The readiness channels of every source, by name.
#[derive(Default)]
pub struct Board {
    channels: Vec<(String, watch::Sender<Readiness>)>,
}

impl Board {
    /// A channel for each of `names`, all [`Readiness::Unknown`].
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Board {
        Board { channels: names.into_iter().map(|n| (n.to_string(), watch::Sender::new(Readiness::Unknown))).collect() }
    }

    /// The sender of source `name` (its pipeline publishes on it).
    pub fn sender(&self, name: &str) -> Option<watch::Sender<Readiness>> {
        self.channels.iter().find(|(n, _)| n == name).map(|(_, tx)| tx.clone())
    }

    /// The gate of a source depending on `names` (each a configured source: the
    /// configuration was checked).
    pub fn gate(&self, names: &[String]) -> Gate {
        Gate { deps: names.iter().filter_map(|n| self.channels.iter().find(|(c, _)| c == n)).map(|(n, tx)| (n.clone(), tx.subscribe())).collect() }
    }
}

/// What one source depends on.
#[derive(Default)]
pub struct Gate {
    deps: Vec<(String, watch::Receiver<Readiness>)>,
}

impl Gate {
    /// True when the source depends on nothing.
    pub fn is_empty(&self) -> bool {
        self.deps.is_empty()
    }

    /// The dependencies that are not ready and why; empty when every one is. A
    /// dependency not polled yet in this run is waited for (its first poll), so a
    /// start does not record a `Waiting` attempt just because the sources start together.
    pub async fn check(&mut self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (name, rx) in &mut self.deps {
            let first = rx.wait_for(|r| *r != Readiness::Unknown).await.map(|r| r.clone());
            match first {
                Ok(Readiness::Ready) => {}
                Ok(Readiness::NotReady(why)) => out.push((name.clone(), why)),
                Ok(Readiness::Unknown) => unreachable!("waited for a readiness"),
                Err(_) => out.push((name.clone(), "it stopped".into())),
            }
        }
        out
    }

    /// Resolves when the readiness of a dependency changes (never, without dependencies).
    pub async fn changed(&mut self) {
        if self.deps.is_empty() {
            return std::future::pending().await;
        }
        let waits = self.deps.iter_mut().map(|(_, rx)| Box::pin(rx.changed()));
        let _ = futures::future::select_all(waits).await;
    }
}

/// [`Waiting`] for the not-ready dependencies `not_ready` (from [`Gate::check`]).
pub fn waiting(not_ready: Vec<(String, String)>, digest: &str, sequence: u64) -> Waiting {
    let reason = not_ready.iter().map(|(n, why)| format!("{n}: {why}")).collect::<Vec<_>>().join("; ");
    Waiting { on: not_ready.into_iter().map(|(n, _)| n).collect(), reason, digest: Some(digest.to_string()), sequence: Some(sequence) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_dependency_is_waited_for_then_judged() {
        let board = Board::new(["platform", "team-b"]);
        let mut gate = board.gate(&["platform".to_string()]);
        let tx = board.sender("platform").unwrap();
        // Not polled yet: the gate waits for the first readiness.
        {
            let check = gate.check();
            tokio::pin!(check);
            assert!(futures::FutureExt::now_or_never(&mut check).is_none(), "waits while Unknown");
            tx.send_replace(Readiness::NotReady("its source is unreachable".into()));
            assert_eq!(check.await, vec![("platform".to_string(), "its source is unreachable".to_string())]);
        }
        {
            // A change wakes a waiting dependent.
            let changed = gate.changed();
            tokio::pin!(changed);
            assert!(futures::FutureExt::now_or_never(&mut changed).is_none());
            tx.send_replace(Readiness::Ready);
            changed.await;
        }
        assert!(gate.check().await.is_empty());
        let w = waiting(vec![("platform".into(), "held".into())], "sha256:ab", 7);
        assert_eq!((w.on, w.reason.as_str(), w.sequence), (vec!["platform".to_string()], "platform: held", Some(7)));
    }
}
