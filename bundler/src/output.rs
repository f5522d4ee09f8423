//! Output formats shared by every command: a short human table or JSON (`-o json`).

use serde::Serialize;

/// How a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum OutputFormat {
    /// A short human-readable table.
    #[default]
    Table,
    /// One JSON document on stdout.
    Json,
}

/// Prints `value` as pretty JSON on stdout.
pub fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Prints rows as an aligned table with a header line.
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{:<w$}  ", c, w = widths[i]));
            }
        }
        println!("{}", s.trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

/// Writes a directory all at once: `fill` writes into a temporary sibling of `dest`, which
/// then replaces `dest` (an existing `dest` is moved aside and removed). On any error the
/// temporary directory is removed and `dest` is left as it was.
pub fn write_dir_atomically(
    dest: &std::path::Path,
    fill: impl FnOnce(&std::path::Path) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    use anyhow::Context;
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).with_context(|| format!("creating {}", parent.display()))?;
    let tmp = tempfile::Builder::new()
        .prefix(".drover-staging-")
        .tempdir_in(&parent)
        .with_context(|| format!("creating a temporary directory in {}", parent.display()))?;
    fill(tmp.path())?;
    let staged = tmp.keep();
    let result = (|| -> anyhow::Result<()> {
        if dest.is_dir() {
            let old = parent.join(format!(".drover-old-{}", std::process::id()));
            std::fs::rename(dest, &old).with_context(|| format!("moving the old {} aside", dest.display()))?;
            std::fs::rename(&staged, dest).with_context(|| format!("renaming into {}", dest.display()))?;
            std::fs::remove_dir_all(&old).with_context(|| format!("removing the old {}", old.display()))?;
        } else {
            std::fs::rename(&staged, dest).with_context(|| format!("renaming into {}", dest.display()))?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&staged);
    }
    result
}

/// A progress bar on stderr when it is a terminal and there is more than one step;
/// hidden otherwise (CI logs, pipes, `-o json` consumers see nothing).
pub fn progress_bar(len: usize) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() || len < 2 {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {wide_msg}") {
        bar.set_style(style);
    }
    bar
}
