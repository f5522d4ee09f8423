//! The record stage and the agent's database (sled, in `--state-dir`): current state per
//! source, the cache of verified bundles (offline re-apply), and a capped history of
//! attempts with per-object outcomes. Every write is flushed before it returns, so a
//! kill -9 never loses a recorded apply.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::RwLock;
use std::time::Duration;

use drover_proto::object::ObjectRef;
use serde::{Deserialize, Serialize};

use crate::private;
use crate::targets::{Health, ObjectHealth, ObjectOutcome};

/// Attempts kept in the history of each source.
pub const HISTORY_CAP: usize = 100;
/// sled page cache (its default is 1 GiB; the agent's memory budget is ~20 MiB).
const CACHE_CAPACITY: u64 = 2 << 20;

/// Errors of the database.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// sled failed (or the database is locked by a running agent).
    #[error("state database {path}: {message}")]
    Db {
        /// The directory.
        path: String,
        /// What failed.
        message: String,
    },
    /// A stored value is unreadable.
    #[error(
        "state database {path}: the record of {what} is corrupt ({message}); to recover, stop the agent and move {path} aside: \
         a new database starts over (the kube target takes its floor and inventory from the cluster; \
         the dir target re-applies the channel's current bundle)"
    )]
    Corrupt {
        /// The directory.
        path: String,
        /// Which record.
        what: String,
        /// The parser's message.
        message: String,
    },
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AttemptResult {
    /// The bundle was applied (and, if due, pruned).
    Applied,
    /// Nothing to do: the digest is the applied one and no resync was due.
    Unchanged,
    /// The bundle was refused (signature, expectations, rollback, content, policy).
    Rejected,
    /// Something failed (registry, target); nothing that was applied is lost.
    Failed,
    /// The agent is held ([`crate::hold`]): the verified bundle (or the due resync) was
    /// not applied; nothing changed on the target.
    Held,
    /// The verified new bundle waits for the sources this one depends on (`dependsOn`,
    /// [`crate::depends`]) to be applied and Healthy; nothing changed on the target.
    Waiting,
    /// A Degraded new bundle was replaced by the last bundle Healthy here
    /// (`--on-degraded rollback`, [`crate::rollback`]); on a poll: the channel still names
    /// the refused bundle, nothing was applied.
    RolledBack,
}

impl AttemptResult {
    /// Every result (the label values of `drover_polls_total`).
    pub const ALL: [AttemptResult; 7] = [
        AttemptResult::Applied,
        AttemptResult::Unchanged,
        AttemptResult::Rejected,
        AttemptResult::Failed,
        AttemptResult::Held,
        AttemptResult::Waiting,
        AttemptResult::RolledBack,
    ];
}

impl std::fmt::Display for AttemptResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

/// The short form of an attempt shown in `status` (`lastAttempt`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptSummary {
    /// Bundle digest, when resolved.
    pub digest: Option<String>,
    /// Bundle sequence, when known.
    pub sequence: Option<u64>,
    /// Result.
    pub result: AttemptResult,
    /// Why (empty on plain success).
    pub reason: String,
    /// RFC 3339 time.
    pub at: String,
    /// The writes this attempt sent to the target (Kubernetes: POST, PUT, PATCH, DELETE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<crate::targets::Writes>,
}

/// One recorded attempt.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    /// Increasing id.
    #[serde(default)]
    pub id: u64,
    /// Source reference.
    pub source: String,
    /// The source's name (absent in records of agents before named sources).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Digest, sequence, result, reason, time.
    #[serde(flatten)]
    pub summary: AttemptSummary,
    /// Pipeline stage that decided the result (`resolve`, `verify`, `apply`, ...).
    pub stage: String,
    /// True when this was a resync of the applied bundle.
    #[serde(default)]
    pub resync: bool,
    /// Objects changed on a resync (drift corrections).
    #[serde(default)]
    pub drift: usize,
    /// Objects pruned.
    #[serde(default)]
    pub pruned: usize,
    /// True when the prune safety valve refused to prune.
    #[serde(default)]
    pub prune_refused: bool,
    /// Health after the wait stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<Health>,
    /// Per-object outcomes (apply then prune).
    #[serde(default)]
    pub objects: Vec<ObjectOutcome>,
    /// Objects the wait stage found not healthy (the first few).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unhealthy: Vec<ObjectHealth>,
    /// A rollback: the Degraded bundle (the attempt's digest) and the one put back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<crate::rollback::RolledBack>,
}

impl Attempt {
    /// An attempt without objects, pruning or health.
    pub fn plain(source: &str, summary: AttemptSummary, stage: &str, resync: bool) -> Attempt {
        Attempt {
            id: 0,
            source: source.to_string(),
            name: String::new(),
            summary,
            stage: stage.into(),
            resync,
            drift: 0,
            pruned: 0,
            prune_refused: false,
            health: None,
            objects: Vec::new(),
            unhealthy: Vec::new(),
            rolled_back: None,
        }
    }
}

/// What is applied for one source.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceState {
    /// Source reference.
    pub source: String,
    /// The source's name (absent in records of agents before named sources).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Applied manifest digest.
    pub applied_digest: Option<String>,
    /// Applied sequence (anti-rollback floor).
    pub applied_sequence: Option<u64>,
    /// Fingerprint of the trust policy the applied digest was verified under
    /// (`verify::Trust::fingerprint`); absent in state written by older agents (the applied
    /// digest is then re-verified once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_fingerprint: Option<String>,
    /// When it was applied (RFC 3339).
    pub applied_at: Option<String>,
    /// Health after the last apply.
    pub health: Option<Health>,
    /// Objects on the target that belong to this source.
    pub inventory: Vec<ObjectRef>,
    /// The last attempt that was recorded.
    pub last_attempt: Option<AttemptSummary>,
    /// Objects that differ from the applied bundle, found by the last resync in
    /// `--drift report` mode and left as they are ([`crate::drift`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drifted: Vec<crate::drift::DriftedObject>,
    /// Where the schema of each kind the target compared came from (the kube target,
    /// docs/kubernetes.md "Which schema"), as of the last recorded attempt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schemas: Vec<crate::targets::KindSchema>,
    /// The last bundle that ended an apply Healthy here: what `--on-degraded rollback`
    /// puts back ([`crate::rollback`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_healthy: Option<crate::rollback::LastHealthy>,
    /// A rollback in force: the Degraded bundle refused and the one put back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<crate::rollback::RolledBack>,
    /// The verified new bundle that waits for the sources this one depends on, as of the
    /// last poll ([`crate::depends`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<crate::depends::Waiting>,
}

impl SourceState {
    /// The applied bundle, when one is.
    pub fn applied(&self) -> Option<drover_proto::channel::Position> {
        match (&self.applied_digest, self.applied_sequence) {
            (Some(digest), Some(sequence)) => Some(drover_proto::channel::Position { digest: digest.clone(), sequence }),
            _ => None,
        }
    }

    /// The anti-rollback floor: the applied bundle, raised to one rolled back from.
    pub fn floor(&self) -> Option<drover_proto::channel::Position> {
        crate::rollback::floor(self.applied(), self.rolled_back.as_ref())
    }

    /// True when `digest` is refused after a rollback ([`crate::rollback`]).
    pub fn refuses(&self, digest: &str) -> bool {
        crate::rollback::refuses(self.rolled_back.as_ref(), digest)
    }
}

/// A verified bundle's blobs, for offline re-apply.
#[derive(Debug, Clone)]
pub struct CachedBundle {
    /// Manifest digest.
    pub digest: String,
    /// Manifest bytes.
    pub manifest: Vec<u8>,
    /// Config bytes.
    pub config: Vec<u8>,
    /// Content layer bytes.
    pub layer: Vec<u8>,
}

/// The open database and its trees.
struct Db {
    db: sled::Db,
    sources: sled::Tree,
    cache: sled::Tree,
    /// Attempts keyed `SOURCE \0 ID` (big-endian): each source's history in order, capped
    /// per source, so one source's attempts never push out another's.
    attempts: sled::Tree,
}

/// The key of attempt `id` of `source` (and, without the id, the prefix of its history).
fn attempt_key(source: &str, id: Option<u64>) -> Vec<u8> {
    let mut k = Vec::with_capacity(source.len() + 9);
    k.extend_from_slice(source.as_bytes());
    k.push(0);
    if let Some(id) = id {
        k.extend_from_slice(&id.to_be_bytes());
    }
    k
}

/// The id at the end of an attempt key.
fn attempt_id(key: &[u8]) -> u64 {
    key.len().checked_sub(8).and_then(|i| key[i..].try_into().ok()).map(u64::from_be_bytes).unwrap_or(0)
}

impl Db {
    fn open(path: &Path) -> Result<Db, sled::Error> {
        let db = sled::Config::new().path(path).cache_capacity(CACHE_CAPACITY).mode(sled::Mode::LowSpace).open()?;
        let sources = db.open_tree("sources")?;
        let cache = db.open_tree("cache")?;
        let attempts = db.open_tree("attempts")?;
        let d = Db { db, sources, cache, attempts };
        d.migrate_history()?;
        Ok(d)
    }

    /// Moves the one history of agents before per-source histories (tree `history`, keyed
    /// by id) into `attempts`; an entry that does not parse is dropped.
    fn migrate_history(&self) -> Result<(), sled::Error> {
        if !self.db.tree_names().iter().any(|n| n.as_ref() == b"history") {
            return Ok(());
        }
        let old = self.db.open_tree("history")?;
        for kv in old.iter() {
            let (k, v) = kv?;
            let Ok(a) = serde_json::from_slice::<Attempt>(&v) else { continue };
            self.attempts.insert(attempt_key(&a.source, Some(attempt_id(&k))), v)?;
        }
        self.db.drop_tree("history")?;
        self.db.flush()?;
        Ok(())
    }
}

/// The agent's database.
///
/// A failed write (a full disk, a read-only volume: sled sees an I/O error) leaves sled
/// refusing every later write until it is opened again, so the store remembers the
/// failure and, before the next write, opens the database again once a probe file can
/// be written in its directory. Until then reads go to the database as it was.
pub struct Store {
    db: RwLock<Option<Db>>,
    path: PathBuf,
    failed: AtomicBool,
}

const PARTS: [&str; 3] = ["manifest", "config", "layer"];
/// Written and removed in the database directory to learn whether it is writable again.
const PROBE: &str = "write-probe";

fn io_message(e: &sled::Error) -> String {
    match e {
        sled::Error::Io(io) => format!("I/O error: {io}"),
        other => other.to_string(),
    }
}

/// The database directory inside a state directory.
pub const DB_DIR: &str = "db";

/// True when `dir` holds an agent's state: a database an agent created (`DIR/db/conf`).
pub fn holds_state(dir: &Path) -> bool {
    dir.join(DB_DIR).join("conf").is_file()
}

impl Store {
    /// Opens (creating) the database in `dir`. Fails when another process holds it.
    /// The database directory and its files are private (0700/0600, see
    /// [`crate::private`]); `dir` itself too when the agent may change it (a volume's
    /// mount point may belong to root: then a warning).
    pub fn open(dir: &Path) -> Result<Self, RecordError> {
        Store::open_waiting(dir, Duration::ZERO)
    }

    /// [`Store::open`], waiting up to `wait` while another process holds the database's
    /// lock: `drover-agent status`/`history`/`plan --state-dir` read it directly for a moment
    /// when no agent answers, and an agent starting then should wait for them, not exit.
    pub fn open_waiting(dir: &Path, wait: Duration) -> Result<Self, RecordError> {
        let path = dir.join(DB_DIR);
        let err = |e: sled::Error| RecordError::Db { path: path.display().to_string(), message: io_message(&e) };
        private::create_dir_all(&path).map_err(|e| err(e.into()))?;
        if let Err(e) = private::tighten_dir(dir) {
            tracing::warn!("cannot make the state directory {} private (mode 0700): {e}; its database directory is", dir.display());
        }
        let started = std::time::Instant::now();
        let db = loop {
            match Db::open(&path) {
                // sled's message for a lock another process holds (fs2's try_lock_exclusive).
                Err(sled::Error::Io(e)) if e.to_string().contains("could not acquire lock") && started.elapsed() < wait => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                other => break other.map_err(err)?,
            }
        };
        private::tighten(&path).map_err(|e| err(e.into()))?;
        Ok(Store { db: RwLock::new(Some(db)), path, failed: AtomicBool::new(false) })
    }

    fn err(&self, e: sled::Error) -> RecordError {
        RecordError::Db { path: self.path.display().to_string(), message: io_message(&e) }
    }

    fn corrupt(&self, what: String, message: impl std::fmt::Display) -> RecordError {
        RecordError::Corrupt { path: self.path.display().to_string(), what, message: message.to_string() }
    }

    /// The database directory (`STATE_DIR/db`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the open database.
    fn read<T>(&self, f: impl FnOnce(&Db) -> Result<T, RecordError>) -> Result<T, RecordError> {
        let guard = self.db.read().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(db) => f(db),
            None => Err(RecordError::Db {
                path: self.path.display().to_string(),
                message: "not open: a write failed and opening it again failed too; the agent opens it again before its next write".into(),
            }),
        }
    }

    /// Runs the write `f` (then flushes), opening the database again first when an earlier
    /// write failed; a failure is remembered for the next write.
    fn write(&self, f: impl FnOnce(&Db) -> Result<(), RecordError>) -> Result<(), RecordError> {
        self.reopen_if_failed()?;
        let out = self.read(|db| {
            f(db)?;
            db.db.flush().map(|_| ()).map_err(|e| self.err(e))
        });
        if matches!(out, Err(RecordError::Db { .. })) {
            self.failed.store(true, Ordering::SeqCst);
        }
        out
    }

    /// After a failed write: when a probe file can be written in the database directory,
    /// opens the database again (what sled wrote before the failure is recovered by its
    /// log; a torn write at the end is dropped). Else the error of the probe.
    fn reopen_if_failed(&self) -> Result<(), RecordError> {
        if !self.failed.load(Ordering::SeqCst) {
            return Ok(());
        }
        let probe = self.path.join(PROBE);
        let written = std::fs::write(&probe, [0u8; 4096]).and_then(|_| std::fs::remove_file(&probe));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&probe);
            return Err(self.err(e.into()));
        }
        let mut guard = self.db.write().unwrap_or_else(|p| p.into_inner());
        // The old handle holds the directory's lock: closed before opening again.
        drop(guard.take());
        let db = Db::open(&self.path).map_err(|e| self.err(e))?;
        *guard = Some(db);
        self.failed.store(false, Ordering::SeqCst);
        tracing::info!("state database {}: writable again, opened it again", self.path.display());
        Ok(())
    }

    /// Writes everything to disk.
    pub fn flush(&self) -> Result<(), RecordError> {
        self.write(|_| Ok(()))
    }

    /// The state of `source` (default when never seen).
    pub fn source(&self, source: &str) -> Result<SourceState, RecordError> {
        self.read(|db| match db.sources.get(source).map_err(|e| self.err(e))? {
            Some(v) => {
                let mut s: SourceState = serde_json::from_slice(&v).map_err(|e| self.corrupt(format!("source {source}"), e))?;
                // Parsed into a list grown by doubling; 10,000 objects leave MiBs unused.
                s.inventory.shrink_to_fit();
                Ok(s)
            }
            None => Ok(SourceState { source: source.to_string(), ..Default::default() }),
        })
    }

    /// All recorded sources.
    pub fn sources(&self) -> Result<Vec<SourceState>, RecordError> {
        self.read(|db| {
            let mut out = Vec::new();
            for kv in db.sources.iter() {
                let (k, v) = kv.map_err(|e| self.err(e))?;
                out.push(serde_json::from_slice(&v).map_err(|e| self.corrupt(format!("source {}", String::from_utf8_lossy(&k)), e))?);
            }
            Ok(out)
        })
    }

    /// Records the state of a source and attempts (oldest first) in one flush.
    pub fn record(&self, state: &SourceState, attempts: &[Attempt]) -> Result<(), RecordError> {
        self.write(|db| {
            let v = serde_json::to_vec(state).expect("state serializes");
            db.sources.insert(state.source.as_bytes(), v).map_err(|e| self.err(e))?;
            for a in attempts {
                let a = Attempt { id: db.db.generate_id().map_err(|e| self.err(e))?, ..a.clone() };
                let v = serde_json::to_vec(&a).expect("attempt serializes");
                db.attempts.insert(attempt_key(&a.source, Some(a.id)), v).map_err(|e| self.err(e))?;
            }
            let prefix = attempt_key(&state.source, None);
            let kept = db.attempts.scan_prefix(&prefix).keys().count();
            for k in db.attempts.scan_prefix(&prefix).keys().take(kept.saturating_sub(HISTORY_CAP)) {
                db.attempts.remove(k.map_err(|e| self.err(e))?).map_err(|e| self.err(e))?;
            }
            Ok(())
        })
    }

    /// The newest `limit` attempts of every source, newest first.
    pub fn history(&self, limit: usize) -> Result<Vec<Attempt>, RecordError> {
        let sources: Vec<String> = self.read(|db| {
            db.sources.iter().keys().map(|k| k.map(|k| String::from_utf8_lossy(&k).into_owned()).map_err(|e| self.err(e))).collect()
        })?;
        self.history_of(&sources, limit)
    }

    /// The newest `limit` attempts of `sources` (references), newest first.
    pub fn history_of(&self, sources: &[String], limit: usize) -> Result<Vec<Attempt>, RecordError> {
        self.read(|db| {
            // Each source's newest `limit` entries (not parsed yet), merged by id.
            let mut found: Vec<(u64, sled::IVec)> = Vec::new();
            for source in sources {
                for kv in db.attempts.scan_prefix(attempt_key(source, None)).rev().take(limit) {
                    let (k, v) = kv.map_err(|e| self.err(e))?;
                    found.push((attempt_id(&k), v));
                }
            }
            found.sort_by_key(|f| std::cmp::Reverse(f.0));
            found
                .into_iter()
                .take(limit)
                .map(|(_, v)| serde_json::from_slice(&v).map_err(|e| self.corrupt("a history entry".into(), e)))
                .collect()
        })
    }

    fn cache_key(source: &str, digest: &str, part: &str) -> Vec<u8> {
        format!("{source}\0{digest}\0{part}").into_bytes()
    }

    /// Stores a verified bundle's blobs (flushed).
    pub fn cache_put(&self, source: &str, b: &CachedBundle) -> Result<(), RecordError> {
        self.write(|db| {
            for (part, data) in PARTS.iter().zip([&b.manifest, &b.config, &b.layer]) {
                db.cache.insert(Self::cache_key(source, &b.digest, part), data.as_slice()).map_err(|e| self.err(e))?;
            }
            Ok(())
        })
    }

    /// A cached bundle, with every blob re-checked against its digest.
    pub fn cache_get(&self, source: &str, digest: &str) -> Result<Option<CachedBundle>, RecordError> {
        let mut parts = Vec::new();
        for part in PARTS {
            match self.read(|db| db.cache.get(Self::cache_key(source, digest, part)).map_err(|e| self.err(e)))? {
                Some(v) => parts.push(v.to_vec()),
                None => return Ok(None),
            }
        }
        let layer = parts.pop().expect("3 parts");
        let config = parts.pop().expect("3 parts");
        let manifest = parts.pop().expect("3 parts");
        if drover_proto::digest::sha256_digest(&manifest) != digest {
            return Err(self.corrupt(format!("the cached manifest {digest}"), "its digest does not match"));
        }
        Ok(Some(CachedBundle { digest: digest.to_string(), manifest, config, layer }))
    }

    /// Drops cached bundles of `source` other than `keep`.
    pub fn cache_retain(&self, source: &str, keep: &[&str]) -> Result<(), RecordError> {
        let prefix = format!("{source}\0");
        self.write(|db| {
            let mut drop = Vec::new();
            for kv in db.cache.scan_prefix(prefix.as_bytes()) {
                let (k, _) = kv.map_err(|e| self.err(e))?;
                let text = String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
                let digest = text.split('\0').next().unwrap_or("");
                if !keep.contains(&digest) {
                    drop.push(k);
                }
            }
            for k in drop {
                db.cache.remove(k).map_err(|e| self.err(e))?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(source: &str, reason: &str) -> Attempt {
        let summary = AttemptSummary { digest: None, sequence: None, result: AttemptResult::Failed, reason: reason.into(), at: String::new(), writes: None };
        Attempt::plain(source, summary, "resolve", false)
    }

    #[test]
    fn each_source_keeps_its_own_hundred_attempts() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let state = |s: &str| SourceState { source: s.into(), ..Default::default() };
        store.record(&state("quiet"), &[attempt("quiet", "q0")]).unwrap();
        let noisy: Vec<Attempt> = (0..250).map(|i| attempt("noisy", &format!("n{i}"))).collect();
        store.record(&state("noisy"), &noisy).unwrap();
        assert_eq!(store.history_of(&["quiet".into()], 10).unwrap()[0].summary.reason, "q0", "not pushed out by another source");
        let n = store.history_of(&["noisy".into()], 1000).unwrap();
        assert_eq!((n.len(), n[0].summary.reason.as_str()), (HISTORY_CAP, "n249"));
        let all = store.history(3).unwrap();
        assert_eq!(all.iter().map(|a| a.summary.reason.as_str()).collect::<Vec<_>>(), ["n249", "n248", "n247"], "newest first across sources");
    }

    #[test]
    fn the_history_of_an_older_agent_is_moved_per_source() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = sled::Config::new().path(dir.path().join(DB_DIR)).open().unwrap();
            let old = db.open_tree("history").unwrap();
            for (id, src) in [(1u64, "a"), (2, "b"), (3, "a")] {
                let a = Attempt { id, ..attempt(src, &format!("{src}{id}")) };
                old.insert(id.to_be_bytes(), serde_json::to_vec(&a).unwrap()).unwrap();
            }
            db.flush().unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        let a = store.history_of(&["a".into()], 10).unwrap();
        assert_eq!(a.iter().map(|x| x.id).collect::<Vec<_>>(), [3, 1]);
        assert_eq!(store.history_of(&["b".into()], 10).unwrap().len(), 1);
    }

    #[test]
    fn a_corrupt_record_keeps_the_parser_message_and_says_how_to_recover() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.read(|db| Ok(db.sources.insert(b"reg/fleet/edge:prod", &b"{\"source\": 7"[..]).unwrap())).unwrap();
        let e = store.source("reg/fleet/edge:prod").unwrap_err().to_string();
        assert!(e.contains("source reg/fleet/edge:prod"), "{e}");
        assert!(e.contains("expected a string at line 1 column 12"), "the parser's message is kept: {e}");
        assert!(e.contains("move") && e.contains(&dir.path().join("db").display().to_string()), "says how to recover: {e}");
        let e = store.sources().unwrap_err().to_string();
        assert!(e.contains("expected a string"), "{e}");
    }
}
