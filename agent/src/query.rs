//! `drover-agent status` and `history`: ask the running agent; when none answers, read
//! the state directory directly (sled allows one process per database). With
//! `--state-dir DIR` the agent is asked through its local channel ([`crate::local`], the
//! socket in DIR that only the agent's user can reach): nothing on a TCP port is taken
//! for DIR's agent, so a process that binds the port a crashed agent used is never shown
//! in its place. `--endpoint URL` asks an agent's HTTP port instead (a remote agent,
//! `kubectl port-forward`); an answer for another state directory than the one given is
//! not shown in its place. Every answer is read to a bound. Both cover every source of
//! the agent, or the one `--source NAME` names.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};

use crate::cli::QueryArgs;
use crate::local::{self, Answer};
use crate::record::{Attempt, SourceState, Store};
use crate::status::{SourceStatus, Status};

/// Largest `/status` answer read.
const MAX_STATUS: usize = 4 << 20;
/// Largest `/history` answer read (100 attempts of many objects each).
const MAX_HISTORY: usize = 32 << 20;

/// Asks the agent at `--endpoint` for `path` (`None`: nothing answers there).
async fn ask_endpoint(endpoint: &str, path: &str, cap: usize) -> Option<Result<String, String>> {
    let Some(hostport) = endpoint.strip_prefix("http://").map(|r| r.split('/').next().unwrap_or(r)) else {
        return Some(Err(format!("{endpoint}: give the agent's port as http://HOST:PORT")));
    };
    let connect = tokio::net::TcpStream::connect(hostport);
    let stream = match tokio::time::timeout(Duration::from_secs(5), connect).await {
        Ok(Ok(s)) => s,
        Ok(Err(_)) | Err(_) => return None,
    };
    let url = format!("{}{path}", endpoint.trim_end_matches('/'));
    match tokio::time::timeout(Duration::from_secs(10), local::get(stream, hostport, path, cap)).await {
        Ok(r) => Some(r.map_err(|e| format!("{url}: {e}"))),
        Err(_) => Some(Err(format!("{url}: no answer within 10s"))),
    }
}

/// How the agent that answered is reached.
enum Via {
    /// Its HTTP port (`--endpoint`).
    Endpoint(String),
    /// Its local channel in the state directory.
    Local(PathBuf),
}

/// Where the answer comes from.
enum Source {
    /// The agent of the state directory (or the one at `--endpoint`) answered.
    Agent { via: Via, status: Box<Status> },
    /// The state directory, read directly; `notice` says why.
    Directory { dir: PathBuf, notice: Option<String> },
}

fn canonical(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}

fn parse_status(body: &str, from: &str) -> anyhow::Result<Status> {
    serde_json::from_str(body).with_context(|| format!("{from} is not a drover-agent status document"))
}

async fn locate(args: &QueryArgs) -> anyhow::Result<Source> {
    if let Some(name) = &args.source {
        if !crate::config::source::valid_name(name) {
            return Err(crate::commands::Usage(format!("--source {name:?} is not a source name (1-63 of a-z, 0-9 and '-')")).into());
        }
    }
    let wanted = args.state_dir.as_deref();
    let Some(endpoint) = &args.endpoint else {
        let Some(dir) = wanted else {
            bail!("give --state-dir DIR (the agent's state directory; DROVER_STATE_DIR), or --endpoint URL (an agent's HTTP port)");
        };
        return match local::ask(dir, "/status", MAX_STATUS).await {
            Answer::Body(body) => {
                let status = parse_status(&body, &dir.join(local::SOCKET).display().to_string())?;
                Ok(Source::Agent { via: Via::Local(dir.to_path_buf()), status: Box::new(status) })
            }
            Answer::NoAgent(why) => {
                let notice = format!("no agent answering for {} ({why}); read from its database", dir.display());
                Ok(Source::Directory { dir: dir.to_path_buf(), notice: Some(notice) })
            }
            Answer::Failed(e) => bail!("asking the agent of {}: {e}", dir.display()),
        };
    };
    match ask_endpoint(endpoint, "/status", MAX_STATUS).await {
        Some(Ok(body)) => {
            let status = parse_status(&body, &format!("{endpoint}/status"))?;
            match wanted {
                Some(dir) if canonical(dir) != Path::new(&status.state_dir) => {
                    let serves = if status.state_dir.is_empty() { "another state directory".to_string() } else { status.state_dir.clone() };
                    let polled: Vec<&str> = status.sources.iter().map(|s| s.source.as_str()).collect();
                    let notice = format!("the agent at {endpoint} serves {serves} (source {}), not this state directory", polled.join(", "));
                    Ok(Source::Directory { dir: dir.to_path_buf(), notice: Some(notice) })
                }
                _ => Ok(Source::Agent { via: Via::Endpoint(endpoint.clone()), status: Box::new(status) }),
            }
        }
        Some(Err(e)) => bail!("asking the agent at {e}"),
        None => match wanted {
            Some(dir) => Ok(Source::Directory { dir: dir.to_path_buf(), notice: None }),
            None => bail!("no agent answers at {endpoint}; pass --state-dir DIR to ask the agent of DIR (or read its database)"),
        },
    }
}

fn open_store(dir: &Path, notice: Option<&str>) -> anyhow::Result<Store> {
    if matches!(std::fs::symlink_metadata(dir.join(crate::statedir::DB)), Err(e) if e.kind() == std::io::ErrorKind::NotFound) {
        bail!("{} holds no agent database (nothing recorded yet)", dir.display());
    }
    // The rule the agent starts by: another user's database is never read.
    crate::statedir::StateDir::for_reading(dir).context("status and history read no database but the agent's")?;
    Store::open(dir).with_context(|| match notice {
        Some(n) => format!("{n}; the database of {} is busy, so its agent runs elsewhere: pass --endpoint URL (the address of its `drover-agent run --listen`)", dir.display()),
        None => format!("no agent answers and the database of {} is busy; is its agent listening elsewhere (--endpoint)?", dir.display()),
    })
}

/// `drover-agent status`: the status of the agent the user named (with `--source NAME`,
/// of that source only).
pub async fn status(args: &QueryArgs) -> anyhow::Result<Status> {
    let st = match locate(args).await? {
        Source::Agent { via: Via::Endpoint(endpoint), status } => Status { endpoint: Some(endpoint), ..*status },
        Source::Agent { via: Via::Local(_), status } => Status { endpoint: None, ..*status },
        Source::Directory { dir, notice } => {
            let store = open_store(&dir, notice.as_deref())?;
            let sources = offline_sources(&store, &dir)?;
            Status { role: "single".into(), state_dir: canonical(&dir).display().to_string(), notice, sources, ..Default::default() }
        }
    };
    match &args.source {
        Some(name) => st.only(name).map_err(|e| crate::commands::Usage(e).into()),
        None => Ok(st),
    }
}

/// The sources of the database in `dir`, read directly: those the agent recorded it runs
/// with ([`crate::configured`]), in its order; for a database of an agent before named
/// sources, the one attempted last (one agent polled one source; after a reconfiguration
/// the newest: history ids increase, timestamps tie within a second).
fn offline_sources(store: &Store, dir: &Path) -> anyhow::Result<Vec<SourceStatus>> {
    let shown = |name: &str, depends_on: Vec<String>, state: SourceState| {
        let mut st = SourceStatus { name: name.to_string(), depends_on, ..Default::default() };
        st.set_state(&state);
        st.held = crate::hold::offline(Some(dir), name, &state);
        st
    };
    if let Some(list) = crate::configured::read(dir) {
        return list.into_iter().map(|c| Ok(shown(&c.name, c.depends_on, store.source(&c.source)?))).collect();
    }
    let latest = store.history(1)?.pop().map(|a| a.source);
    let state = match latest {
        Some(source) => store.source(&source)?,
        None => match store.sources()?.pop() {
            Some(s) => s,
            None => bail!("the database in {} records no source yet", dir.display()),
        },
    };
    let name = if state.name.is_empty() { crate::config::DEFAULT_NAME.to_string() } else { state.name.clone() };
    Ok(vec![shown(&name, Vec::new(), state)])
}

/// What `history` found: the attempts, and why they were read from the state directory
/// although an agent answered (printed on stderr).
pub struct History {
    /// The attempts, newest first.
    pub attempts: Vec<Attempt>,
    /// See [`Status::notice`].
    pub notice: Option<String>,
}

/// `drover-agent history`: the last attempts of the agent the user named (newest first;
/// with `--source NAME`, of that source only).
pub async fn history(args: &QueryArgs) -> anyhow::Result<History> {
    match locate(args).await? {
        Source::Agent { via, status } => {
            let mut path = format!("/history?limit={}", args.limit);
            if let Some(name) = &args.source {
                status.only(name).map_err(crate::commands::Usage)?;
                path += &format!("&source={name}");
            }
            let (body, from) = match via {
                Via::Endpoint(endpoint) => match ask_endpoint(&endpoint, &path, MAX_HISTORY).await {
                    Some(Ok(body)) => (body, format!("{endpoint}/history")),
                    Some(Err(e)) => bail!("asking the agent at {e}"),
                    None => bail!("the agent at {endpoint} stopped answering"),
                },
                Via::Local(dir) => match local::ask(&dir, &path, MAX_HISTORY).await {
                    Answer::Body(body) => (body, dir.join(local::SOCKET).display().to_string()),
                    Answer::NoAgent(why) => bail!("the agent of {} stopped answering ({why})", dir.display()),
                    Answer::Failed(e) => bail!("asking the agent of {}: {e}", dir.display()),
                },
            };
            let attempts = serde_json::from_str(&body).with_context(|| format!("{from} is not a history document"))?;
            Ok(History { attempts, notice: None })
        }
        Source::Directory { dir, notice } => {
            let store = open_store(&dir, notice.as_deref())?;
            let attempts = match &args.source {
                Some(name) => {
                    let sources = offline_sources(&store, &dir)?;
                    let Some(s) = sources.iter().find(|s| &s.name == name) else {
                        let names: Vec<&str> = sources.iter().map(|s| s.name.as_str()).collect();
                        return Err(crate::commands::Usage(format!("no source is named {name:?}; the sources of {} are: {}", dir.display(), names.join(", "))).into());
                    };
                    store.history_of(std::slice::from_ref(&s.source), args.limit)?
                }
                None => store.history(args.limit)?,
            };
            Ok(History { attempts, notice: notice.map(|n| format!("{n}; read {}", dir.display())) })
        }
    }
}

/// The history as a table, newest first: when, result, sequence, digest (short), objects
/// reached, drift (objects a resync found drifted: corrected, or reported with `--drift
/// report`), and why; with attempts of several sources, a SOURCE column names each one's.
pub fn history_text(attempts: &[Attempt]) -> String {
    let several = attempts.iter().any(|a| a.source != attempts[0].source);
    let dash = |s: Option<String>| s.unwrap_or_else(|| "-".into());
    let rows: Vec<Vec<String>> = attempts
        .iter()
        .map(|a| {
            let s = &a.summary;
            let name = if a.name.is_empty() { crate::config::DEFAULT_NAME } else { a.name.as_str() };
            let mut row = if several { vec![name.to_string()] } else { Vec::new() };
            row.extend([
                s.at.clone(),
                s.result.to_string(),
                dash(s.sequence.map(|x| x.to_string())),
                dash(s.digest.as_deref().map(|d| d.chars().take(19).collect())),
                a.objects.len().to_string(),
                if a.drift > 0 { a.drift.to_string() } else { "-".into() },
                s.reason.clone(),
            ]);
            row
        })
        .collect();
    let mut header = if several { vec!["SOURCE"] } else { Vec::new() };
    header.extend(["AT", "RESULT", "SEQUENCE", "DIGEST", "OBJECTS", "DRIFT", "REASON"]);
    crate::cli::table(&header, &rows)
}
