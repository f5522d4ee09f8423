//! `drover-agent status` and `history`: ask the running agent over HTTP; when none
//! answers, read the state directory directly (sled allows one process per database).

use std::time::Duration;

use anyhow::{bail, Context};

use crate::cli::{Output, QueryArgs};
use crate::record::{Attempt, Store};
use crate::status::Status;

async fn ask(endpoint: &str, path: &str) -> Option<Result<String, String>> {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().ok()?;
    let url = format!("{}{path}", endpoint.trim_end_matches('/'));
    match client.get(&url).send().await {
        Ok(r) if r.status().is_success() => Some(r.text().await.map_err(|e| e.to_string())),
        Ok(r) => Some(Err(format!("{url} answered HTTP {}", r.status()))),
        Err(e) if e.is_connect() || e.is_timeout() => None,
        Err(e) => Some(Err(e.to_string())),
    }
}

fn open_store(args: &QueryArgs) -> anyhow::Result<Store> {
    let Some(dir) = &args.state_dir else {
        bail!("no agent answers at {}; pass --state-dir DIR to read its database directly", args.endpoint);
    };
    if !dir.join("db").exists() {
        bail!("{} holds no agent database (nothing recorded yet)", dir.display());
    }
    Store::open(dir).with_context(|| format!("no agent answers at {} and the database is busy; is an agent listening elsewhere (--endpoint)?", args.endpoint))
}

/// `drover-agent status`.
pub async fn status(args: QueryArgs) -> anyhow::Result<()> {
    let st: Status = match ask(&args.endpoint, "/status").await {
        Some(Ok(body)) => serde_json::from_str(&body).context("the agent's /status is not a status document")?,
        Some(Err(e)) => bail!("asking the agent: {e}"),
        None => {
            let store = open_store(&args)?;
            let mut st = Status { role: "single".into(), ..Default::default() };
            // One agent polls one source; after a reconfiguration show the one attempted
            // last (history ids increase; timestamps tie within a second).
            let latest = store.history(1)?.pop().map(|a| a.source);
            let state = match latest {
                Some(source) => store.source(&source)?,
                None => match store.sources()?.pop() {
                    Some(s) => s,
                    None => bail!("the database records no source yet"),
                },
            };
            st.set_state(&state);
            st.held = crate::hold::offline(args.state_dir.as_deref(), &state);
            st
        }
    };
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&st)?),
        Output::Table => print!("{}", st.to_text()),
    }
    Ok(())
}

/// `drover-agent history`.
pub async fn history(args: QueryArgs) -> anyhow::Result<()> {
    let attempts: Vec<Attempt> = match ask(&args.endpoint, &format!("/history?limit={}", args.limit)).await {
        Some(Ok(body)) => serde_json::from_str(&body).context("the agent's /history is not a history document")?,
        Some(Err(e)) => bail!("asking the agent: {e}"),
        None => open_store(&args)?.history(args.limit)?,
    };
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&attempts)?),
        Output::Table => {
            println!("{:<21} {:<9} {:>8} {:<19} {:>7}  REASON", "AT", "RESULT", "SEQUENCE", "DIGEST", "OBJECTS");
            for a in &attempts {
                let s = &a.summary;
                let digest = s.digest.as_deref().map(|d| d.chars().take(19).collect::<String>()).unwrap_or_else(|| "-".into());
                let seq = s.sequence.map(|x| x.to_string()).unwrap_or_else(|| "-".into());
                println!("{:<21} {:<9} {:>8} {:<19} {:>7}  {}", s.at, s.result, seq, digest, a.objects.len(), s.reason);
            }
        }
    }
    Ok(())
}
