//! Untrusted text made safe for a terminal, a log line, the record or a page: the ONE rule
//! every printer applies to text that came from a registry or a cluster (a report's
//! fields, a registry's error body, an annotation, a tag name).
//!
//! - **No control characters**: every C0 control (newline, carriage return and tab
//!   included), DEL and C1 control (`U+0080`–`U+009F`: `U+009B` is CSI on some terminals),
//!   and the invisible characters that reorder or hide text (bidi overrides and isolates,
//!   zero-width spaces and joiners, line and paragraph separators, the byte-order mark) is
//!   written as its visible escape (`\u{1b}`, `\n`, `\t`): an ESC cannot move a cursor,
//!   recolour a row or set a window title, and a newline cannot start a line of its own.
//! - **No command at the start of a line**: CI runners read `::error`, `::add-mask::`
//!   (GitHub Actions) and `##vso[`, `##[` (Azure Pipelines) at the start of a line, after
//!   any indentation. A line of drover's output that would begin so has its first
//!   character escaped (`\u{3a}:error`), so it is shown but never obeyed.
//! - **Bounded**: [`bounded`] cuts cleaned text to a number of characters, marking the cut.
//!
//! [`one_line`] is for a value inside a line (a table cell, a field), [`lines`] for whole
//! lines drover writes (its own newlines kept, each line checked), [`json`] for a JSON
//! document (lossless: the same characters as `\uXXXX` escapes).

use std::borrow::Cow;
use std::fmt::Write as _;

/// True for a character that must never reach a terminal, a log or a page as it is.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'            // Arabic letter mark
            | '\u{200B}'..='\u{200F}' // zero-width space/joiners, LRM, RLM
            | '\u{2028}' | '\u{2029}' // line and paragraph separators
            | '\u{202A}'..='\u{202E}' // bidi embeddings and overrides
            | '\u{2060}'..='\u{2064}' // word joiner, invisible operators
            | '\u{2066}'..='\u{2069}' // bidi isolates
            | '\u{FEFF}' // byte-order mark
        )
}

/// `text` as one line: every unsafe character ([`is_unsafe`]) written as its escape
/// (`\u{1b}`, `\n`); borrowed when there is none.
pub fn one_line(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_unsafe(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// True when a line would be read as a CI runner's command (`::` or `##` after any
/// indentation).
fn is_command(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("::") || t.starts_with("##")
}

/// `line` (no newline in it) cleaned, with a command-like start escaped.
fn guard(line: &str, out: &mut String) {
    let cleaned = one_line(line);
    if is_command(&cleaned) {
        let indent = cleaned.len() - cleaned.trim_start().len();
        let (lead, rest) = cleaned.split_at(indent);
        let mut chars = rest.chars();
        let first = chars.next().expect("a command starts with a character");
        out.push_str(lead);
        let _ = write!(out, "\\u{{{:x}}}", first as u32);
        out.push_str(chars.as_str());
    } else {
        out.push_str(&cleaned);
    }
}

/// Whole lines of output: `\n` separates lines and is kept (a `\r\n` too, as `\n`); each
/// line is cleaned ([`one_line`]) and never starts with a CI runner's command.
pub fn lines(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c != '\n' && is_unsafe(c)) && !text.split('\n').any(is_command) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        guard(line.strip_suffix('\r').unwrap_or(line), &mut out);
    }
    Cow::Owned(out)
}

/// [`one_line`], then cut to at most `max` characters (the last one `…` when cut).
pub fn bounded(text: &str, max: usize) -> String {
    let cleaned = one_line(text);
    if cleaned.chars().count() <= max {
        return cleaned.into_owned();
    }
    let mut out: String = cleaned.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A JSON document made safe to print, losslessly: every unsafe character that a JSON
/// writer leaves as it is (DEL, C1 controls, the invisible ones; C0 controls are already
/// escaped by every writer) becomes its `\uXXXX` escape, which a JSON reader turns back
/// into the same character. Outside strings a JSON document holds none.
pub fn json(doc: &str) -> Cow<'_, str> {
    if !doc.chars().any(|c| c != '\n' && is_unsafe(c)) {
        return Cow::Borrowed(doc);
    }
    let mut out = String::with_capacity(doc.len() + 8);
    for c in doc.chars() {
        if c != '\n' && is_unsafe(c) {
            let mut buf = [0u16; 2];
            for unit in c.encode_utf16(&mut buf) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A log writer that cleans what passes through it: each write (a log event, as the
/// `tracing` formatters write them) is cleaned as [`lines`], or as [`json`] for JSON logs.
/// Colours are off where it is used: their escapes would be cleaned too.
pub struct Writer<W: std::io::Write> {
    inner: W,
    json: bool,
}

impl<W: std::io::Write> Writer<W> {
    /// Cleans what is written to `inner`; `json`: the events are JSON documents.
    pub fn new(inner: W, json: bool) -> Self {
        Writer { inner, json }
    }
}

impl<W: std::io::Write> std::io::Write for Writer<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let cleaned = if self.json { json(&text) } else { lines(&text) };
        self.inner.write_all(cleaned.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_become_visible_escapes() {
        assert_eq!(one_line("plain text, ünïcödé ✓"), "plain text, ünïcödé ✓");
        assert!(matches!(one_line("plain"), Cow::Borrowed(_)));
        assert_eq!(one_line("\x1b[2J\x1b]0;owned\x07Healthy"), "\\u{1b}[2J\\u{1b}]0;owned\\u{7}Healthy");
        assert_eq!(one_line("a\nb\r\tc"), "a\\nb\\r\\tc");
        assert_eq!(one_line("\u{9b}31m \u{7f}"), "\\u{9b}31m \\u{7f}");
        assert_eq!(one_line("evil\u{202E}txt.exe\u{200B}"), "evil\\u{202e}txt.exe\\u{200b}");
        let s = one_line("x\n::error::pwned");
        assert!(!s.contains('\n') && s.starts_with('x'));
    }

    #[test]
    fn no_line_starts_with_a_runner_command() {
        let out = lines("ok\n::add-mask::secret\n  ##vso[task.setvariable variable=x]1\n##[error]x\nfine :: here");
        for line in out.split('\n') {
            let t = line.trim_start();
            assert!(!t.starts_with("::") && !t.starts_with("##"), "{line:?}");
        }
        assert_eq!(out, "ok\n\\u{3a}:add-mask::secret\n  \\u{23}#vso[task.setvariable variable=x]1\n\\u{23}#[error]x\nfine :: here");
        assert_eq!(lines("a\r\nb\x1b"), "a\nb\\u{1b}");
        assert!(matches!(lines("table\nrows\n"), Cow::Borrowed(_)));
    }

    #[test]
    fn bounded_cuts_after_cleaning() {
        assert_eq!(bounded("abc", 3), "abc");
        assert_eq!(bounded("abcd", 3), "ab…");
        assert_eq!(bounded(&"\x1b".repeat(100), 20).chars().count(), 20);
    }

    #[test]
    fn log_writer_cleans_each_event() {
        use std::io::Write as _;
        let mut w = Writer::new(Vec::new(), false);
        w.write_all(b"WARN skipped tag \x1b[31mx\n::error::y\n").unwrap();
        assert_eq!(String::from_utf8(w.inner).unwrap(), "WARN skipped tag \\u{1b}[31mx\n\\u{3a}:error::y\n");
    }

    #[test]
    fn json_stays_json_and_loses_nothing() {
        let value = serde_json::json!({"m": "a\u{9b}b\u{202e}c\u{1b}\u{1F600}"});
        let doc = serde_json::to_string_pretty(&value).unwrap();
        let safe = json(&doc);
        assert!(!safe.chars().any(|c| c != '\n' && is_unsafe(c)), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, value);
    }
}
