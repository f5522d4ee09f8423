//! The canonical YAML encoding of one object: keys sorted at every level, block style,
//! two-space indentation, and strings quoted whenever a YAML 1.1 OR 1.2 parser could
//! read them as something else (`on`, `yes`, `0123`, `1_000`, `2001-12-14`, `~`, ...),
//! so kubectl, Flux and Argo CD (YAML 1.1 parsers) read exactly what drover read.
//! Multi-line strings use literal blocks (`|`, `|-`, `|+`) when that is exact.

use serde_json::Value;

/// Canonical YAML of a JSON value (see the module docs).
pub fn canonical_yaml(v: &Value) -> Vec<u8> {
    let mut out = String::new();
    match v {
        Value::Object(m) if !m.is_empty() => map(m, 0, &mut out),
        Value::Array(a) if !a.is_empty() => seq(a, 0, &mut out),
        other => {
            inline(other, 0, &mut out);
            out.push('\n');
        }
    }
    out.into_bytes()
}

fn pad(n: usize, out: &mut String) {
    out.extend(std::iter::repeat_n(' ', n));
}

fn map(m: &serde_json::Map<String, Value>, indent: usize, out: &mut String) {
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    for k in keys {
        pad(indent, out);
        out.push_str(&key(k));
        out.push(':');
        after_indicator(&m[k], indent, out);
    }
}

/// Writes a value that follows `key:` or `-` on the same line.
fn after_indicator(v: &Value, indent: usize, out: &mut String) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            map(m, indent + 2, out);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            seq(a, indent, out);
        }
        other => {
            out.push(' ');
            inline(other, indent + 2, out);
            out.push('\n');
        }
    }
}

fn seq(a: &[Value], indent: usize, out: &mut String) {
    for item in a {
        pad(indent, out);
        out.push('-');
        match item {
            Value::Object(m) if !m.is_empty() => {
                // First key on the dash line, the rest aligned under it.
                let mut sub = String::new();
                map(m, indent + 2, &mut sub);
                out.push(' ');
                out.push_str(&sub[indent + 2..]);
            }
            Value::Array(inner) if !inner.is_empty() => {
                let mut sub = String::new();
                seq(inner, indent + 2, &mut sub);
                out.push(' ');
                out.push_str(&sub[indent + 2..]);
            }
            other => {
                out.push(' ');
                inline(other, indent + 2, out);
                out.push('\n');
            }
        }
    }
}

/// A scalar or empty collection; block strings continue on following lines at `indent`.
fn inline(v: &Value, indent: usize, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => string(s, indent, out),
        Value::Array(_) => out.push_str("[]"),
        Value::Object(_) => out.push_str("{}"),
    }
}

fn key(k: &str) -> String {
    if plain_ok(k) {
        k.to_string()
    } else {
        quoted(k)
    }
}

fn string(s: &str, indent: usize, out: &mut String) {
    if plain_ok(s) {
        out.push_str(s);
    } else if literal_ok(s) {
        let body = s.trim_end_matches('\n');
        let trailing = s.len() - body.len();
        out.push_str(match trailing {
            0 => "|-",
            1 => "|",
            _ => "|+",
        });
        out.push('\n');
        for line in body.split('\n') {
            if !line.is_empty() {
                pad(indent, out);
                out.push_str(line);
            }
            out.push('\n');
        }
        for _ in 1..trailing {
            out.push('\n');
        }
        out.pop(); // the caller ends the line
    } else {
        out.push_str(&quoted(s));
    }
}

/// True when `s` can be written unquoted and every YAML 1.1 and 1.2 parser reads it back
/// as this exact string.
fn plain_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let Some(&first) = b.first() else { return false };
    if !(first.is_ascii_alphanumeric() || first == b'_' || first == b'/') {
        return false;
    }
    if !b.iter().all(|&c| PLAIN_BYTE[c as usize]) {
        return false;
    }
    if s.ends_with(' ') || s.ends_with(':') || s.contains(": ") || s.contains(" #") {
        return false;
    }
    if ["true", "false", "yes", "no", "on", "off", "y", "n", "null"].iter().any(|k| s.eq_ignore_ascii_case(k)) {
        return false;
    }
    // What parses as a float (also `inf`, `NaN`, any case) starts with a digit or is short:
    // long scalars are not copied or parsed (a ConfigMap's data can be megabytes).
    if (first.is_ascii_digit() || b.len() <= 16) && s.to_ascii_lowercase().parse::<f64>().is_ok() {
        return false;
    }
    // Numbers in any base, with '_' or sexagesimal ':', and timestamps (YAML 1.1).
    let numberish = first.is_ascii_digit() && s.bytes().all(|c| c.is_ascii_hexdigit() || b"xXoO_.:+- tTzZ".contains(&c));
    !numberish
}

/// The bytes a plain scalar may hold: ASCII letters, digits and ` -_./:@+=,%`.
const PLAIN_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = b.is_ascii_alphanumeric() || matches!(b, b' ' | b'-' | b'_' | b'.' | b'/' | b':' | b'@' | b'+' | b'=' | b',' | b'%');
        c += 1;
    }
    t
};

/// True when a literal block scalar reproduces `s` exactly.
fn literal_ok(s: &str) -> bool {
    if !s.contains('\n') || s.chars().any(|c| (c.is_control() && c != '\n' && c != '\t') || is_special(c)) {
        return false;
    }
    // Indentation is detected from the first non-blank line: it must start with a
    // non-space, and no whitespace-only line may come before it.
    for line in s.split('\n') {
        if line.is_empty() {
            continue;
        }
        return !line.starts_with([' ', '\t']);
    }
    false
}

fn is_special(c: char) -> bool {
    matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}')
}

/// A double-quoted YAML scalar (JSON-compatible escapes).
fn quoted(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\t' => q.push_str("\\t"),
            '\r' => q.push_str("\\r"),
            c if c.is_control() || is_special(c) => q.push_str(&format!("\\u{:04x}", c as u32)),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    fn roundtrip(v: &Value) {
        let y = String::from_utf8(canonical_yaml(v)).unwrap();
        let back = serde_json::Value::deserialize(serde_yaml_ng::Deserializer::from_str(&y)).unwrap_or_else(|e| panic!("{e}\n{y}"));
        assert_eq!(&back, v, "\n{y}");
    }

    #[test]
    fn tricky_strings_roundtrip() {
        let strings = [
            "on",
            "yes",
            "Y",
            "NO",
            "off",
            "null",
            "~",
            "",
            " ",
            "0123",
            "1_000",
            "0x1F",
            "1e3",
            ".5",
            ".inf",
            "-.Inf",
            "nan",
            "2001-12-14",
            "1:30",
            "12:30:00",
            "a: b",
            "a #b",
            "a:",
            "-a",
            "- a",
            "? x",
            "*x",
            "&x",
            "!x",
            "%x",
            "@x",
            "`x",
            "{x}",
            "[x]",
            "'x'",
            "\"x\"",
            "x\ny",
            "x\n",
            "x\n\n",
            "\nx",
            "  x\ny",
            "\n  x\n",
            "x \ny ",
            "tab\tin",
            "cr\r\nlf",
            "\u{7f}",
            "\u{85}",
            "\u{2028}",
            "ünï",
            "nginx:1.25",
            "10m",
            "a b c",
            "http://x.y/z?q=1",
            "=",
            "<<",
            "x\n\n\ny\n",
            "#x",
            "|",
            ">",
            "x\u{feff}",
        ];
        for s in strings {
            let v = serde_json::json!({ s: s, "list": [s, {s: [s]}], "nested": {"k": s} });
            roundtrip(&v);
        }
        roundtrip(&serde_json::json!({"a": [], "b": {}, "c": [[1, [2]], [], {}], "d": null, "e": 1.5, "f": -3, "g": true}));
        roundtrip(&serde_json::json!({"a": [{"b": {"c": "x\ny"}, "d": ["e\n"]}]}));
    }

    #[test]
    fn yaml11_ambiguous_are_quoted() {
        let y = String::from_utf8(canonical_yaml(&serde_json::json!({"a": "on", "b": "nginx:1.25", "c": "0123"}))).unwrap();
        assert_eq!(y, "a: \"on\"\nb: nginx:1.25\nc: \"0123\"\n");
    }
}
