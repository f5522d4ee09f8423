//! The local commands that act on an agent's state directory or plan its sources:
//! `plan`, `hold` and `release` (each with `--source NAME` for one source; `release
//! --rollback` lifts a rollback refusal). They return exit codes and print through
//! [`crate::cli::emit`].

use std::io::Write;
use std::path::Path;

use crate::cli::{self, HoldArgs, PlanArgs, ReleaseArgs};
use crate::config::{ConfigFile, Settings};
use crate::hold::{self, Hold};
use crate::preview::{PlanReport, Planned, Session};

/// A usage error of a command (exit code 2): a source name that is not the agent's.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// Checks that `name` (if given) is a source of the agent of `dir`.
fn check_source(dir: &Path, name: Option<&str>) -> anyhow::Result<()> {
    if let Some(n) = name {
        if !crate::config::source::valid_name(n) {
            return Err(Usage(format!("--source {n:?} is not a source name (1-63 of a-z, 0-9 and '-')")).into());
        }
        crate::configured::check(dir, n).map_err(Usage)?;
    }
    Ok(())
}

/// `drover-agent hold`: holds every source of the agent, or the one `--source` names.
pub fn hold(a: &HoldArgs) -> anyhow::Result<i32> {
    check_source(&a.state_dir, a.source.as_deref())?;
    let h = hold::hold(&a.state_dir, a.source.as_deref(), &a.reason)?;
    cli::emit(a.output, &h, || {
        let dir = a.state_dir.display();
        let (who, flag) = match &a.source {
            Some(n) => (format!("source {n} of the agent on {dir}"), format!(" --source {n}")),
            None => (format!("the agent on {dir}"), String::new()),
        };
        format!(
            "held since {}: {}\n{who} applies nothing from its next poll on (it still polls, verifies and reports); `drover-agent release --state-dir {dir}{flag}` ends the hold\n",
            h.since, h.reason
        )
    })?;
    Ok(0)
}

/// What `release` did.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Released {
    /// The state directory.
    pub state_dir: String,
    /// The source named with `--source`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The hold that was released: the source's own with `--source`, else the agent's.
    pub released: Option<Hold>,
    /// Without `--source`: the holds of single sources also released, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<(String, Hold)>,
    /// With `--source`: the agent-wide hold that still holds the source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub still_held: Option<Hold>,
}

/// What `release --rollback` did: the requests left for the sources of the agent of the
/// state directory.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleasedRollback {
    /// The state directory.
    pub state_dir: String,
    /// The sources asked (the one of `--source`, else every source the agent runs).
    pub sources: Vec<String>,
    /// When the release was asked (a refusal recorded later is not lifted by it).
    pub requested_at: String,
}

/// `drover-agent release --rollback`: leaves a release request for the source `--source`
/// names, else for every source of the agent ([`crate::configured`]; the single unnamed
/// source when none is recorded).
fn release_rollback(a: &ReleaseArgs) -> anyhow::Result<i32> {
    let dir = &a.state_dir;
    let sources: Vec<String> = match &a.source {
        Some(n) => vec![n.clone()],
        None => match crate::configured::read(dir) {
            Some(list) if !list.is_empty() => list.into_iter().map(|c| c.name).collect(),
            _ => vec![crate::config::DEFAULT_NAME.to_string()],
        },
    };
    let mut requested_at = String::new();
    for name in &sources {
        requested_at = hold::request_rollback_release(dir, name)?;
    }
    let r = ReleasedRollback { state_dir: dir.display().to_string(), sources, requested_at };
    cli::emit(a.output, &r, || {
        let who = match &a.source {
            Some(n) => format!("source {n} of the agent on {}", r.state_dir),
            None => format!("the agent on {}", r.state_dir),
        };
        format!(
            "asked {who} to lift its rollback refusal on its next poll: the bundle it rolled back from is applied again if the channel still names it (`drover-agent status` shows rolledBack.released)\n"
        )
    })?;
    Ok(0)
}

/// `drover-agent release`: removes every hold file, or the source's own with `--source`;
/// with `--rollback` releases a rollback refusal instead.
pub fn release(a: &ReleaseArgs) -> anyhow::Result<i32> {
    check_source(&a.state_dir, a.source.as_deref())?;
    if a.rollback {
        return release_rollback(a);
    }
    let dir = &a.state_dir;
    let released = hold::release(dir, a.source.as_deref())?;
    let mut sources = Vec::new();
    if a.source.is_none() {
        for name in hold::held_sources(dir) {
            if let Some(h) = hold::release(dir, Some(&name))? {
                sources.push((name, h));
            }
        }
    }
    let still_held = match &a.source {
        Some(_) => hold::read_file(dir, None).ok().flatten(),
        None => None,
    };
    let r = Released { state_dir: dir.display().to_string(), source: a.source.clone(), released, sources, still_held };
    cli::emit(a.output, &r, || {
        let mut out = String::new();
        let what = match &r.source {
            Some(n) => format!("source {n} of the agent on {}", r.state_dir),
            None => format!("the agent on {}", r.state_dir),
        };
        match (&r.released, r.sources.is_empty()) {
            (None, true) => {
                out += &format!("{} was not held by a hold file (a drover.dev/hold annotation is removed with kubectl)\n", r.state_dir);
            }
            _ => out += &format!("released: {what} applies the newest verified bundle on its next poll\n"),
        }
        for (name, _) in &r.sources {
            out += &format!("released the hold of source {name}\n");
        }
        if let Some(h) = &r.still_held {
            out += &format!("note: the agent-wide hold ({}) still holds every source; `drover-agent release --state-dir {}` ends it\n", h.reason, r.state_dir);
        }
        out
    })?;
    Ok(0)
}

/// `drover-agent plan`: prints the plan of every source (or the one `--source` names
/// when the configuration lists sources), or why it was refused; exit 0 nothing would
/// change, 3 something would, 1 refused or would fail.
pub async fn plan(args: PlanArgs) -> anyhow::Result<i32> {
    let PlanArgs { config, mut settings, output } = args;
    let file = match &config {
        Some(p) => ConfigFile::load(p)?,
        None => ConfigFile::default(),
    };
    // With a `sources:` list, `--source` names one of them (a reference would be an error).
    let only = match file.entries.is_some() {
        true => settings.source.take(),
        false => None,
    };
    let settings = Settings::merge(settings, file)?;
    crate::init_logs(settings.log_format);
    let selected: Vec<_> = match &only {
        Some(name) => vec![settings.source(name).map_err(|e| Usage(e.to_string()))?.clone()],
        None => settings.sources.clone(),
    };
    // Interrupted: the plan (and with it the private copy of the state database) is
    // dropped, which removes the copy.
    let stop = crate::run::terminated();
    let work = async {
        let mut session = Session::open(&settings).await?;
        let mut out = Vec::with_capacity(selected.len());
        for s in &selected {
            out.push((s.name.clone(), session.plan(&settings, s).await?));
        }
        anyhow::Ok(out)
    };
    let planned = tokio::select! {
        p = work => p?,
        _ = stop => {
            let _ = writeln!(std::io::stderr(), "interrupted: nothing was changed; the private copy of the state database was removed");
            return Ok(130);
        }
    };
    if let [(_, one)] = planned.as_slice() {
        return emit_one(output, one);
    }
    let mut code = 0;
    let mut docs = Vec::new();
    let mut text = String::new();
    for (name, p) in &planned {
        text += &format!("== source {name} ==\n");
        match p {
            Planned::Refused { stage, message } => {
                code = 1;
                text += &format!("refused at {stage}: {}\n", drover_proto::text::clean::lines(message));
                docs.push(serde_json::json!({"name": name, "refused": {"stage": stage, "message": message}}));
            }
            Planned::Plan(r) => {
                code = worse(code, exit_of(r));
                text += &r.to_text();
                docs.push(serde_json::json!({"name": name, "plan": r}));
            }
        }
    }
    cli::emit(output, &docs, || text)?;
    Ok(code)
}

/// The exit code of one plan.
fn exit_of(p: &PlanReport) -> i32 {
    if p.fails() {
        1
    } else if p.changes {
        3
    } else {
        0
    }
}

/// Of two exit codes of `plan`, the one that says more: 1 over 3 over 0.
fn worse(a: i32, b: i32) -> i32 {
    let rank = |c: i32| match c {
        1 => 2,
        3 => 1,
        _ => 0,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

fn emit_one(output: cli::Output, planned: &Planned) -> anyhow::Result<i32> {
    Ok(match planned {
        Planned::Refused { stage, message } => {
            let _ = writeln!(std::io::stderr(), "error: {stage}: {}", drover_proto::text::clean::lines(message));
            1
        }
        Planned::Plan(p) => {
            cli::emit(output, p, || p.to_text())?;
            exit_of(p)
        }
    })
}
