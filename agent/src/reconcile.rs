//! "Poll now" (`drover-agent reconcile`, as `flux reconcile`): a request wakes the poll
//! loop at once, whatever the interval, and waits for the result of an attempt that
//! started after it — so the caller sees what the agent did with the bundle the channel
//! names *now*, not the result of a poll that was already under way. Requests that arrive
//! together share one attempt; a request while the loop polls anyway waits for the next.
//! The run loop reports each attempt's start and end ([`Reconcile::started`],
//! [`Reconcile::finished`]) and sleeps on [`Reconcile::requested`] besides its interval;
//! the agent's local channel serves the requests (`crate::serve::local_router`: only the
//! agent's own user can reach it), and [`ask`] is the command's side.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use tokio::sync::{watch, Notify};

use crate::cli::ReconcileArgs;
use crate::record::{AttemptResult, AttemptSummary};

/// Longest a `GET /reconcile` waits for its attempt (within the local channel's deadline
/// for an answer); the command asks again until its `--timeout`.
pub const RECONCILE_WAIT: Duration = Duration::from_secs(8);

/// What one attempt did, as a reconcile request returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reconciled {
    /// The source polled.
    pub source: String,
    /// What the attempt did.
    pub result: AttemptResult,
    /// The source's last recorded attempt (after an `Unchanged` poll: the one that applied
    /// what runs).
    pub last_attempt: Option<AttemptSummary>,
    /// What is applied now.
    pub applied_digest: Option<String>,
    /// Its sequence.
    pub applied_sequence: Option<u64>,
}

impl Reconciled {
    /// True when the attempt left the target as the agent wants it (the exit code of
    /// `drover-agent reconcile`, as of `run --once`): applied, unchanged or held.
    pub fn ok(&self) -> bool {
        matches!(self.result, AttemptResult::Applied | AttemptResult::Unchanged | AttemptResult::Held)
    }

    /// The human-readable line(s).
    pub fn to_text(&self) -> String {
        let applied = match (&self.applied_digest, self.applied_sequence) {
            (Some(d), Some(s)) => format!("{d} sequence {s}"),
            (Some(d), None) => d.clone(),
            _ => "nothing".into(),
        };
        let mut out = format!("{}: {} (applied: {applied})\n", self.source, self.result);
        if let Some(a) = self.last_attempt.as_ref().filter(|_| self.result != AttemptResult::Unchanged) {
            if !a.reason.is_empty() {
                out += &format!("reason: {}\n", a.reason);
            }
        }
        out
    }
}

/// Attempts started and finished by the run loop, and what the last one did.
#[derive(Debug, Clone, Default)]
struct Cycles {
    started: u64,
    finished: u64,
    last: Option<Reconciled>,
}

/// The meeting point of reconcile requests and the run loop.
#[derive(Debug)]
pub struct Reconcile {
    wake: Notify,
    cycles: watch::Sender<Cycles>,
}

impl Default for Reconcile {
    fn default() -> Self {
        Reconcile { wake: Notify::new(), cycles: watch::Sender::new(Cycles::default()) }
    }
}

impl Reconcile {
    /// The run loop: an attempt starts.
    pub fn started(&self) {
        self.cycles.send_modify(|c| c.started += 1);
    }

    /// The run loop: the attempt that started last ended with `what`.
    pub fn finished(&self, what: Reconciled) {
        self.cycles.send_modify(|c| {
            c.finished = c.started;
            c.last = Some(what);
        });
    }

    /// The run loop's wait between polls ends early when this resolves: a request came.
    pub async fn requested(&self) {
        self.wake.notified().await
    }

    /// A request: wakes the run loop and returns the number of the attempt that answers
    /// it (the next to start); [`Reconcile::result`] waits for it.
    pub fn request(&self) -> u64 {
        let wanted = self.cycles.borrow().started + 1;
        self.wake.notify_one();
        wanted
    }

    /// What attempt `wanted` (or a later one) did, waiting at most `wait` for it to end;
    /// `None` while it has not ended.
    pub async fn result(&self, wanted: u64, wait: Duration) -> Option<Reconciled> {
        let mut rx = self.cycles.subscribe();
        let done = rx.wait_for(|c| c.finished >= wanted);
        let last = match tokio::time::timeout(wait, done).await {
            Ok(Ok(c)) => c.last.clone(),
            _ => None,
        };
        last
    }
}

/// `drover-agent reconcile`: asks the agent of `--state-dir` through its local channel
/// ([`crate::local`], the socket only the agent's user can reach) to poll now (`POST
/// /reconcile`), then waits for that attempt's result (`GET /reconcile`, at most
/// [`RECONCILE_WAIT`] per request) until `--timeout`.
pub async fn ask(args: &ReconcileArgs) -> anyhow::Result<Reconciled> {
    let timeout = humantime::parse_duration(&args.timeout).with_context(|| format!("--timeout {:?} is not a duration like 10m", args.timeout))?;
    let dir = &args.state_dir;
    let source = args.source.as_deref().map(|s| format!("source={}", url_escape(s)));
    let post = match &source {
        Some(q) => format!("/reconcile?{q}"),
        None => "/reconcile".to_string(),
    };
    let body = answered(dir, crate::local::ask_with(dir, hyper::Method::POST, &post, MAX_ANSWER).await)?;
    let attempt = serde_json::from_str::<serde_json::Value>(&body)?["attempt"].as_u64().context("the agent answered no attempt number")?;
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let wait = left.min(RECONCILE_WAIT).as_secs();
        let path = format!("/reconcile?attempt={attempt}&wait={wait}{}", source.as_deref().map(|q| format!("&{q}")).unwrap_or_default());
        let body = answered(dir, crate::local::ask(dir, &path, MAX_ANSWER).await)?;
        let v: serde_json::Value = serde_json::from_str(&body).with_context(|| format!("{path} is not a reconcile answer"))?;
        if v.get("running").is_none() {
            return serde_json::from_value(v).with_context(|| format!("{path} is not a reconcile result"));
        }
        if left.is_zero() {
            bail!("the attempt asked for did not finish within {}; the agent goes on (drover-agent status shows it when it ends)", args.timeout);
        }
    }
}

/// Largest answer of `/reconcile` read.
const MAX_ANSWER: usize = 1 << 20;

/// The body of the agent's answer, or why there is none.
fn answered(dir: &Path, answer: crate::local::Answer) -> anyhow::Result<String> {
    match answer {
        crate::local::Answer::Body(b) => Ok(b),
        crate::local::Answer::NoAgent(why) => {
            bail!("no agent answers for {} ({why}): reconcile asks a running agent (drover-agent run); a stopped one polls when it starts", dir.display())
        }
        crate::local::Answer::Failed(e) => bail!("the agent of {} refused: {e}", dir.display()),
    }
}

/// `s` for a query string (letters, digits and `-._~` as they are, the rest `%XX`).
fn url_escape(s: &str) -> String {
    s.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn what(result: AttemptResult) -> Reconciled {
        Reconciled { source: "s".into(), result, last_attempt: None, applied_digest: None, applied_sequence: None }
    }

    #[tokio::test]
    async fn a_request_is_answered_by_an_attempt_that_starts_after_it() {
        let r = Arc::new(Reconcile::default());
        // An attempt under way when the request comes does not answer it.
        r.started();
        let wanted = r.request();
        r.finished(what(AttemptResult::Unchanged));
        assert_eq!(r.result(wanted, Duration::from_millis(50)).await, None, "the attempt under way started before the request");
        // The loop was woken: the next attempt answers, also a waiter already waiting.
        tokio::time::timeout(Duration::from_secs(1), r.requested()).await.expect("the loop is woken");
        let waiter = tokio::spawn({
            let r = r.clone();
            async move { r.result(wanted, Duration::from_secs(5)).await }
        });
        r.started();
        r.finished(what(AttemptResult::Applied));
        assert_eq!(waiter.await.unwrap().map(|w| w.result), Some(AttemptResult::Applied));
        assert_eq!(r.result(wanted, Duration::ZERO).await.map(|w| w.result), Some(AttemptResult::Applied), "asked again: the same answer");
    }
}
