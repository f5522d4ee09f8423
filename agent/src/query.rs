//! `drover-agent status` and `history`: ask the running agent over HTTP; when none
//! answers, read the state directory directly (sled allows one process per database).
//! With `--state-dir DIR` the answer is about the agent of DIR: its endpoint comes from
//! `DIR/endpoint` (written by a serving agent) unless `--endpoint` is given, and an agent
//! answering there for another state directory is not shown in its place.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};

use crate::cli::QueryArgs;
use crate::record::{Attempt, Store};
use crate::status::Status;

/// The endpoint `status`/`history` ask when neither `--endpoint` nor the state directory
/// names one.
pub const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:9464";
/// The file in the state directory holding the serving agent's endpoint.
const ENDPOINT_FILE: &str = "endpoint";

/// Records where the agent of `state_dir` serves HTTP (best effort: a failure is logged).
pub fn write_endpoint(state_dir: &Path, addr: SocketAddr) {
    let ip = if addr.ip().is_unspecified() {
        if addr.is_ipv4() { "127.0.0.1".parse().expect("loopback") } else { "::1".parse().expect("loopback") }
    } else {
        addr.ip()
    };
    let url = format!("http://{}\n", SocketAddr::new(ip, addr.port()));
    let tmp = state_dir.join(format!(".{ENDPOINT_FILE}.tmp"));
    if let Err(e) = std::fs::write(&tmp, url).and_then(|_| std::fs::rename(&tmp, state_dir.join(ENDPOINT_FILE))) {
        tracing::warn!("cannot record the endpoint in {}: {e}", state_dir.display());
    }
}

/// Removes the endpoint record when the agent stops serving.
pub fn remove_endpoint(state_dir: &Path) {
    let _ = std::fs::remove_file(state_dir.join(ENDPOINT_FILE));
}

pub(crate) async fn ask(endpoint: &str, path: &str) -> Option<Result<String, String>> {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().ok()?;
    let url = format!("{}{path}", endpoint.trim_end_matches('/'));
    match client.get(&url).send().await {
        Ok(r) if r.status().is_success() => Some(r.text().await.map_err(|e| e.to_string())),
        Ok(r) => Some(Err(format!("{url} answered HTTP {}", r.status()))),
        Err(e) if e.is_connect() || e.is_timeout() => None,
        Err(e) => Some(Err(e.to_string())),
    }
}

/// Where the answer comes from.
enum Source {
    /// The agent of the state directory (or the one at `--endpoint`) answered.
    Agent { endpoint: String, status: Box<Status> },
    /// The state directory, read directly; `notice` says why when an agent answered.
    Directory { dir: PathBuf, notice: Option<String> },
}

pub(crate) fn canonical(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// The endpoint to ask: `--endpoint`, else the one the state directory records, else the default.
fn endpoint(args: &QueryArgs) -> String {
    endpoint_of(args.endpoint.as_ref(), args.state_dir.as_deref())
}

/// The endpoint to ask: `given`, else the one `state_dir` records, else the default.
pub(crate) fn endpoint_of(given: Option<&String>, state_dir: Option<&Path>) -> String {
    if let Some(e) = given {
        return e.clone();
    }
    state_dir
        .and_then(|d| std::fs::read_to_string(d.join(ENDPOINT_FILE)).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string())
}

async fn locate(args: &QueryArgs) -> anyhow::Result<Source> {
    let endpoint = endpoint(args);
    let wanted = args.state_dir.as_deref();
    match ask(&endpoint, "/status").await {
        Some(Ok(body)) => {
            let status: Status = serde_json::from_str(&body).with_context(|| format!("{endpoint}/status is not a drover-agent status document"))?;
            match wanted {
                Some(dir) if canonical(dir) != Path::new(&status.state_dir) => {
                    let serves = if status.state_dir.is_empty() { "another state directory".to_string() } else { status.state_dir.clone() };
                    let notice = format!("the agent at {endpoint} serves {serves} (source {}), not this state directory", status.source);
                    Ok(Source::Directory { dir: dir.to_path_buf(), notice: Some(notice) })
                }
                _ => Ok(Source::Agent { endpoint, status: Box::new(status) }),
            }
        }
        Some(Err(e)) => bail!("asking the agent at {endpoint}: {e}"),
        None => match wanted {
            Some(dir) => Ok(Source::Directory { dir: dir.to_path_buf(), notice: None }),
            None => bail!("no agent answers at {endpoint}; pass --state-dir DIR to read its database directly, or --endpoint URL"),
        },
    }
}

fn open_store(dir: &Path, notice: Option<&str>) -> anyhow::Result<Store> {
    if !dir.join("db").exists() {
        bail!("{} holds no agent database (nothing recorded yet)", dir.display());
    }
    Store::open(dir).with_context(|| match notice {
        Some(n) => format!("{n}; the database of {} is busy, so its agent runs elsewhere: pass --endpoint URL (the address of its `drover-agent run --listen`)", dir.display()),
        None => format!("no agent answers and the database of {} is busy; is its agent listening elsewhere (--endpoint)?", dir.display()),
    })
}

/// `drover-agent status`: the status of the agent the user named.
pub async fn status(args: &QueryArgs) -> anyhow::Result<Status> {
    match locate(args).await? {
        Source::Agent { endpoint, status } => Ok(Status { endpoint: Some(endpoint), ..*status }),
        Source::Directory { dir, notice } => {
            let store = open_store(&dir, notice.as_deref())?;
            let mut st = Status { role: "single".into(), state_dir: canonical(&dir).display().to_string(), notice, ..Default::default() };
            // One agent polls one source; after a reconfiguration show the one attempted
            // last (history ids increase; timestamps tie within a second).
            let latest = store.history(1)?.pop().map(|a| a.source);
            let state = match latest {
                Some(source) => store.source(&source)?,
                None => match store.sources()?.pop() {
                    Some(s) => s,
                    None => bail!("the database in {} records no source yet", dir.display()),
                },
            };
            st.set_state(&state);
            st.held = crate::hold::offline(Some(&dir), &state);
            Ok(st)
        }
    }
}

/// What `history` found: the attempts, and why they were read from the state directory
/// although an agent answered (printed on stderr).
pub struct History {
    /// The attempts, newest first.
    pub attempts: Vec<Attempt>,
    /// See [`Status::notice`].
    pub notice: Option<String>,
}

/// `drover-agent history`: the last attempts of the agent the user named (newest first).
pub async fn history(args: &QueryArgs) -> anyhow::Result<History> {
    match locate(args).await? {
        Source::Agent { endpoint, .. } => {
            let attempts = match ask(&endpoint, &format!("/history?limit={}", args.limit)).await {
                Some(Ok(body)) => serde_json::from_str(&body).with_context(|| format!("{endpoint}/history is not a history document"))?,
                Some(Err(e)) => bail!("asking the agent at {endpoint}: {e}"),
                None => bail!("the agent at {endpoint} stopped answering"),
            };
            Ok(History { attempts, notice: None })
        }
        Source::Directory { dir, notice } => {
            let attempts = open_store(&dir, notice.as_deref())?.history(args.limit)?;
            Ok(History { attempts, notice: notice.map(|n| format!("{n}; read {}", dir.display())) })
        }
    }
}

/// The history as a table, newest first: when, result, sequence, digest (short), objects
/// reached, drift (objects a resync found drifted: corrected, or reported with `--drift
/// report`), and why.
pub fn history_text(attempts: &[Attempt]) -> String {
    let dash = |s: Option<String>| s.unwrap_or_else(|| "-".into());
    let rows: Vec<Vec<String>> = attempts
        .iter()
        .map(|a| {
            let s = &a.summary;
            vec![
                s.at.clone(),
                s.result.to_string(),
                dash(s.sequence.map(|x| x.to_string())),
                dash(s.digest.as_deref().map(|d| d.chars().take(19).collect())),
                a.objects.len().to_string(),
                if a.drift > 0 { a.drift.to_string() } else { "-".into() },
                s.reason.clone(),
            ]
        })
        .collect();
    crate::cli::table(&["AT", "RESULT", "SEQUENCE", "DIGEST", "OBJECTS", "DRIFT", "REASON"], &rows)
}
