//! The printing layer: every command returns a [`Report`] (a serializable value plus its
//! human rendering) and [`emit`] prints it as a table or JSON (`-o json`). Printing never
//! panics: a closed stdout (`drover inspect REF | head -1`) ends the command quietly with
//! the exit code it would have had (docs/bundle.md "Output"). Everything printed passes
//! through the one cleaning rule for untrusted text (`drover_proto::text::clean`): no
//! control character and no line that a CI runner would read as a command.

use std::io::Write;

use drover_proto::text::clean;

use serde::Serialize;

/// How a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum OutputFormat {
    /// A short human-readable table.
    #[default]
    Table,
    /// One JSON document on stdout (camelCase field names).
    Json,
}

/// Log line format on stderr (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// What a command returns: the `-o json` document (camelCase fields) and its table.
pub trait Report: Serialize {
    /// Writes the human-readable rendering (tables and short lines) into `out`.
    fn write_text(&self, out: &mut Text);

    /// Why the command refused, when the result itself is a refusal (printed on stderr as
    /// `error: ...` after the report; the exit code is then 1).
    fn failure(&self) -> Option<String> {
        None
    }

    /// The exit code: 0, or 1 with a [`Report::failure`].
    fn exit_code(&self) -> u8 {
        u8::from(self.failure().is_some())
    }

    /// The exit code when the command fails with an error (1; `diff` uses 2, as diff(1)).
    const ERROR_EXIT: u8 = 1;
}

/// The exit code of a command line that cannot be run as given (as clap's own errors).
pub const USAGE_EXIT: u8 = 2;

/// A command line that cannot be run as given: flags that need another flag, values that
/// do not parse. [`emit`] exits with [`USAGE_EXIT`] for it, wherever in the chain it is.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Prints the outcome of a command and returns its exit code: the report as a table or
/// JSON on stdout (then its failure, if any, on stderr), or `error: ...` on stderr.
pub fn emit<R: Report>(result: anyhow::Result<R>, format: OutputFormat) -> u8 {
    match result {
        Ok(report) => {
            let text = match format {
                OutputFormat::Json => match serde_json::to_string_pretty(&report) {
                    Ok(s) => clean::json(&s).into_owned() + "\n",
                    Err(e) => {
                        error_line(&format!("cannot write the result as JSON: {e}"));
                        return R::ERROR_EXIT;
                    }
                },
                OutputFormat::Table => {
                    let mut t = Text::default();
                    report.write_text(&mut t);
                    t.0
                }
            };
            if let Err(e) = write_stdout(&text) {
                error_line(&format!("writing the result to stdout: {e}"));
                return R::ERROR_EXIT;
            }
            if let Some(why) = report.failure() {
                error_line(&why);
            }
            report.exit_code()
        }
        Err(e) => {
            error_line(&format!("{e:#}"));
            if e.downcast_ref::<UsageError>().is_some() {
                USAGE_EXIT
            } else {
                R::ERROR_EXIT
            }
        }
    }
}

/// Writes `text` to stdout. A reader that went away (broken pipe) is not an error: the
/// output was not wanted any more.
pub fn write_stdout(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Prints `error: MESSAGE` on stderr (never panics, even when stderr is closed).
pub fn error_line(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "error: {}", clean::lines(message));
}

/// Prints `warning: MESSAGE` on stderr (never panics, even when stderr is closed).
pub fn warn(message: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr().lock(), "warning: {}", clean::lines(&message.to_string()));
}

/// Prints `warnings`; with `strict` any warning is an error (`--strict`).
pub fn warnings<'a>(warnings: impl IntoIterator<Item = &'a String>, strict: bool) -> anyhow::Result<()> {
    let mut n = 0;
    for w in warnings {
        warn(w);
        n += 1;
    }
    anyhow::ensure!(!strict || n == 0, "{n} warning(s) above and --strict: fix them (or drop --strict)");
    Ok(())
}

/// Prints a progress or status line on stderr (never panics, even when stderr is closed).
pub fn note(message: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr().lock(), "{}", clean::lines(&message.to_string()));
}

/// The human rendering of a report, built in memory and printed by [`emit`].
#[derive(Debug, Default)]
pub struct Text(pub String);

impl Text {
    /// One line (or several, separated by `\n`), cleaned ([`clean::lines`]).
    pub fn line(&mut self, s: impl AsRef<str>) {
        self.0.push_str(&clean::lines(s.as_ref()));
        self.0.push('\n');
    }

    /// An aligned table with a header line; every cell is cleaned to one line
    /// ([`clean::one_line`]) before the columns are measured.
    pub fn table(&mut self, header: &[&str], rows: &[Vec<String>]) {
        let rows: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(|c| clean::one_line(c).into_owned()).collect()).collect();
        let rows = rows.as_slice();
        let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
        for row in rows {
            for (i, cell) in row.iter().enumerate() {
                if i < widths.len() {
                    widths[i] = widths[i].max(cell.chars().count());
                }
            }
        }
        let mut line = |cells: Vec<&str>| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i + 1 == cells.len() {
                    s.push_str(c);
                } else {
                    s.push_str(&format!("{:<w$}  ", c, w = widths[i]));
                }
            }
            self.line(s.trim_end());
        };
        line(header.to_vec());
        for row in rows {
            line(row.iter().map(String::as_str).collect());
        }
    }
}

/// `-` for an empty value.
pub fn dash(s: &str) -> String {
    if s.is_empty() {
        "-".to_string()
    } else {
        s.to_string()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns() {
        let mut t = Text::default();
        t.table(&["A", "BB"], &[vec!["long".into(), "x".into()]]);
        assert_eq!(t.0, "A     BB\nlong  x\n");
    }
}
