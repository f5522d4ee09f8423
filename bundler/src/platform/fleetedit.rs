//! The edit `drover fleet enroll --fleet FILE` makes to a Fleet file: a narrow, line-based
//! change of the `spec.clusters` block and nothing else, so the diff a reviewer approves is
//! exactly the clusters added, removed or re-keyed — every other byte (comments, order,
//! blank lines, quoting, the other keys) stays as it was.
//!
//! Why not a YAML editor: a lossless YAML library would do, but the edit is small and the
//! rule easy to state: the block is found by its indentation; each entry (one line in flow
//! style, or several in block style) is identified by parsing its own lines; an entry is
//! removed with its lines (comments around it are kept), re-keyed by replacing its
//! 64-hex fingerprint in place, and new entries are appended after the last one, one line
//! each: `- {name: TYPE.NAME, environment: ENV, channel: CHANNEL, reportKey: FP}`.
//! A file whose `spec` or `clusters` is written in flow style on one line is refused (edit
//! it by hand once). The caller re-reads the result and checks it declares exactly what
//! was intended before writing it ([`super::membership::from_text`]).

use super::membership::DeclaredCluster;
use super::model::ClusterEntry;

/// One change to the declared clusters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// Declare a cluster (appended after the last entry).
    Add(DeclaredCluster),
    /// Remove the entry named `TYPE.NAME`.
    Remove(String),
    /// Replace the report key of the entry named (the cluster's key changed).
    Rekey {
        /// `TYPE.NAME`.
        name: String,
        /// The key declared now.
        old: String,
        /// The key to declare.
        new: String,
    },
}

/// The edited text and the changed lines (`-` removed, `+` added), for the reviewer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edited {
    /// The whole new text.
    pub text: String,
    /// The changed lines, `-old` / `+new`, in file order.
    pub diff: Vec<String>,
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// Blank or a comment only: it neither opens nor closes a block.
fn is_filler(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// `KEY:` followed by nothing but a comment: the block value of `KEY` follows.
fn opens_block(line: &str, key: &str) -> bool {
    line.trim_start().strip_prefix(key).and_then(|r| r.strip_prefix(':')).is_some_and(is_filler)
}

/// `KEY: []` (and a comment): an empty flow sequence.
fn empty_flow(line: &str, key: &str) -> bool {
    line.trim_start()
        .strip_prefix(key)
        .and_then(|r| r.strip_prefix(':'))
        .map(str::trim_start)
        .and_then(|r| r.strip_prefix("[]"))
        .is_some_and(is_filler)
}

fn has_key(line: &str, key: &str) -> bool {
    line.trim_start().strip_prefix(key).is_some_and(|r| r.starts_with(':'))
}

/// A YAML plain scalar for `v`, quoted when YAML would read it as something else.
fn scalar(v: &str) -> String {
    match serde_yaml_ng::from_str::<serde_yaml_ng::Value>(v) {
        Ok(serde_yaml_ng::Value::String(s)) if s == v => v.to_string(),
        _ => format!("\"{v}\""),
    }
}

/// The one-line entry for `c`.
pub fn entry_line(c: &DeclaredCluster) -> String {
    format!(
        "- {{name: {}, environment: {}, channel: {}, reportKey: {}}}",
        scalar(&c.name),
        scalar(&c.environment),
        scalar(&c.channel),
        scalar(&c.report_key)
    )
}

/// Where the entries are: line indexes into the file.
struct Block {
    /// The `clusters:` line, if there is one.
    key: Option<usize>,
    /// The child indentation of `spec`.
    child: usize,
    /// Each entry: (first line, one past its last content line, its name).
    entries: Vec<(usize, usize, String)>,
    /// The indentation of the entries' `-`.
    item: Option<usize>,
    /// Where a new entry (or the `clusters:` key) goes.
    end: usize,
}

/// Finds `spec.clusters` in `lines`.
fn locate(lines: &[&str]) -> Result<Block, String> {
    let spec = lines.iter().position(|l| indent(l) == 0 && has_key(l, "spec")).ok_or("no top-level `spec:` in the file")?;
    if !opens_block(lines[spec], "spec") {
        return Err("`spec` is written in flow style on one line; write it as a block to let enroll edit it".into());
    }
    let spec_end = (spec + 1..lines.len()).find(|&i| !is_filler(lines[i]) && indent(lines[i]) == 0).unwrap_or(lines.len());
    let child = (spec + 1..spec_end).find(|&i| !is_filler(lines[i])).map(|i| indent(lines[i])).ok_or("`spec` is empty")?;
    let last_content = |from: usize, to: usize| (from..to).rev().find(|&i| !is_filler(lines[i])).map_or(from, |i| i + 1);
    let Some(key) = (spec + 1..spec_end).find(|&i| indent(lines[i]) == child && has_key(lines[i], "clusters")) else {
        return Ok(Block { key: None, child, entries: Vec::new(), item: None, end: last_content(spec + 1, spec_end) });
    };
    if empty_flow(lines[key], "clusters") {
        return Ok(Block { key: Some(key), child, entries: Vec::new(), item: None, end: key + 1 });
    }
    if !opens_block(lines[key], "clusters") {
        return Err("`spec.clusters` is written in flow style; write it as a block list (`clusters:` then one `- {…}` per line) to let enroll edit it".into());
    }
    let first = (key + 1..spec_end).find(|&i| !is_filler(lines[i]));
    let item = first.filter(|&i| indent(lines[i]) >= child && lines[i].trim_start().starts_with('-')).map(|i| indent(lines[i]));
    let Some(item) = item else {
        return Ok(Block { key: Some(key), child, entries: Vec::new(), item: None, end: key + 1 });
    };
    let block_end = (key + 1..spec_end)
        .find(|&i| !is_filler(lines[i]) && (indent(lines[i]) < item || (indent(lines[i]) == item && !lines[i].trim_start().starts_with('-'))))
        .unwrap_or(spec_end);
    let starts: Vec<usize> = (key + 1..block_end).filter(|&i| indent(lines[i]) == item && lines[i].trim_start().starts_with('-')).collect();
    let mut entries = Vec::new();
    for (n, &start) in starts.iter().enumerate() {
        let stop = last_content(start, starts.get(n + 1).copied().unwrap_or(block_end));
        let text: String = lines[start..stop].iter().map(|l| format!("{}\n", l.get(item..).unwrap_or(""))).collect();
        let parsed: Vec<ClusterEntry> = serde_yaml_ng::from_str(&text).map_err(|e| format!("spec.clusters entry at line {}: {e}", start + 1))?;
        let name = parsed.into_iter().next().map(|e| e.name).ok_or_else(|| format!("spec.clusters entry at line {} is empty", start + 1))?;
        entries.push((start, stop, name));
    }
    let end = entries.last().map_or(key + 1, |e| e.1);
    Ok(Block { key: Some(key), child, entries, item: Some(item), end })
}

/// Applies `edits` to the Fleet file `text`. Refused (naming why) when an entry to remove
/// or re-key is not there exactly once, or the block cannot be found.
pub fn apply(text: &str, edits: &[Edit]) -> Result<Edited, String> {
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let lines: Vec<&str> = text.lines().collect();
    let block = locate(&lines)?;
    let find = |name: &str| {
        let hits: Vec<&(usize, usize, String)> = block.entries.iter().filter(|e| e.2 == name).collect();
        match hits.as_slice() {
            [one] => Ok((one.0, one.1)),
            [] => Err(format!("{name} is not declared in spec.clusters")),
            _ => Err(format!("{name} is declared more than once in spec.clusters")),
        }
    };
    // Per line: None = removed, Some(replacement); plus lines inserted after `block.end`.
    let mut out: Vec<Option<String>> = lines.iter().map(|l| Some(l.to_string())).collect();
    let mut diff: Vec<(usize, String)> = Vec::new();
    let mut added = Vec::new();
    for e in edits {
        match e {
            Edit::Remove(name) => {
                let (start, stop) = find(name)?;
                for (i, slot) in out.iter_mut().enumerate().take(stop).skip(start) {
                    *slot = None;
                    diff.push((i, format!("-{}", lines[i])));
                }
            }
            Edit::Rekey { name, old, new } => {
                let (start, stop) = find(name)?;
                let hits: Vec<usize> = (start..stop).filter(|&i| lines[i].to_ascii_lowercase().contains(old.as_str())).collect();
                let [i] = hits.as_slice() else { return Err(format!("the reportKey of {name} is not found once in its entry; edit it by hand")) };
                let at = lines[*i].to_ascii_lowercase().find(old.as_str()).expect("found above");
                let changed = format!("{}{new}{}", &lines[*i][..at], &lines[*i][at + old.len()..]);
                diff.push((*i, format!("-{}", lines[*i])));
                diff.push((*i, format!("+{changed}")));
                out[*i] = Some(changed);
            }
            Edit::Add(c) => added.push(c),
        }
    }
    let mut tail = Vec::new();
    if !added.is_empty() {
        let item = block.item.unwrap_or(block.child + 2);
        match block.key {
            None => tail.push(format!("{}clusters:", " ".repeat(block.child))),
            Some(k) if empty_flow(lines[k], "clusters") => {
                let comment = lines[k].find('#').map(|c| format!(" {}", &lines[k][c..])).unwrap_or_default();
                let changed = format!("{}clusters:{comment}", " ".repeat(block.child));
                diff.push((k, format!("-{}", lines[k])));
                diff.push((k, format!("+{changed}")));
                out[k] = Some(changed);
            }
            Some(_) => {}
        }
        tail.extend(added.iter().map(|c| format!("{}{}", " ".repeat(item), entry_line(c))));
        diff.extend(tail.iter().map(|l| (block.end, format!("+{l}"))));
    }
    let mut text_out = String::with_capacity(text.len() + tail.iter().map(|l| l.len() + 2).sum::<usize>());
    for (i, line) in out.iter().enumerate() {
        if i == block.end {
            for t in &tail {
                text_out.push_str(t);
                text_out.push_str(newline);
            }
        }
        if let Some(l) = line {
            text_out.push_str(l);
            text_out.push_str(newline);
        }
    }
    if block.end >= out.len() {
        for t in &tail {
            text_out.push_str(t);
            text_out.push_str(newline);
        }
    }
    if !text.ends_with('\n') && !text.is_empty() && text_out.ends_with(newline) && tail.is_empty() {
        text_out.truncate(text_out.len() - newline.len());
    }
    diff.sort_by_key(|(i, _)| *i);
    Ok(Edited { text: text_out, diff: diff.into_iter().map(|(_, l)| l).collect() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(name: &str, key: char) -> DeclaredCluster {
        let (t, n) = name.split_once('.').unwrap();
        DeclaredCluster {
            name: name.into(),
            cluster_type: t.into(),
            cluster_name: n.into(),
            environment: "prod".into(),
            channel: "prod-ring0".into(),
            report_key: key.to_string().repeat(64),
        }
    }

    const FILE: &str = "# The fleet.\napiVersion: drover.dev/v1\nkind: Fleet\nspec:\n  environments: [dev, prod]   # promotion order\n  clusters:\n    # Lyon, reviewed by ops.\n    - {name: edge.lyon, environment: prod, channel: prod-ring0, reportKey: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}\n    - name: edge.oslo   # block style\n      environment: prod\n      channel: prod-ring0\n      reportKey: bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\n\n  # Kinds from CRDs.\n  clusterScopedKinds: []\n";

    #[test]
    fn adds_after_the_last_entry_keeping_every_other_byte() {
        let e = apply(FILE, &[Edit::Add(cluster("edge.rome", 'c'))]).unwrap();
        let want = FILE.replace(
            "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\n",
            &format!("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\n    {}\n", entry_line(&cluster("edge.rome", 'c'))),
        );
        assert_eq!(e.text, want);
        assert_eq!(e.diff, vec![format!("+    {}", entry_line(&cluster("edge.rome", 'c')))]);
    }

    #[test]
    fn removes_and_rekeys_one_entry_in_either_style() {
        let e = apply(FILE, &[Edit::Remove("edge.oslo".into())]).unwrap();
        assert!(!e.text.contains("oslo") && !e.text.contains("# block style") && e.text.contains("# Kinds from CRDs."), "{}", e.text);
        assert_eq!(e.diff.len(), 4);
        let e = apply(FILE, &[Edit::Remove("edge.lyon".into())]).unwrap();
        assert!(e.text.contains("# Lyon, reviewed by ops.\n    - name: edge.oslo"), "comments are kept: {}", e.text);
        let e = apply(FILE, &[Edit::Rekey { name: "edge.oslo".into(), old: "b".repeat(64), new: "d".repeat(64) }]).unwrap();
        assert_eq!(e.text, FILE.replace(&"b".repeat(64), &"d".repeat(64)));
        assert!(apply(FILE, &[Edit::Remove("edge.none".into())]).unwrap_err().contains("not declared"));
    }

    #[test]
    fn a_file_without_clusters_gets_the_block() {
        let f = "apiVersion: drover.dev/v1\nkind: Fleet\nspec:\n  environments: [prod]\n  clusterScopedKinds: []\n# end\n";
        let e = apply(f, &[Edit::Add(cluster("edge.a", 'a'))]).unwrap();
        assert_eq!(e.text, format!("apiVersion: drover.dev/v1\nkind: Fleet\nspec:\n  environments: [prod]\n  clusterScopedKinds: []\n  clusters:\n    {}\n# end\n", entry_line(&cluster("edge.a", 'a'))));
        let f = "apiVersion: drover.dev/v1\nkind: Fleet\nspec:\n  environments: [prod]\n  clusters: []  # none yet\n";
        let e = apply(f, &[Edit::Add(cluster("edge.a", 'a'))]).unwrap();
        assert_eq!(e.text, format!("apiVersion: drover.dev/v1\nkind: Fleet\nspec:\n  environments: [prod]\n  clusters: # none yet\n    {}\n", entry_line(&cluster("edge.a", 'a'))));
        let f = "apiVersion: drover.dev/v1\nkind: Fleet\nspec:\n  environments: [prod]\n  clusters: [{name: edge.a}]\n";
        assert!(apply(f, &[Edit::Add(cluster("edge.b", 'b'))]).unwrap_err().contains("flow style"));
    }

    #[test]
    fn values_yaml_would_misread_are_quoted() {
        assert_eq!(scalar("prod"), "prod");
        assert_eq!(scalar("true"), "\"true\"");
        assert_eq!(scalar(&"1".repeat(64)), format!("\"{}\"", "1".repeat(64)));
    }
}
