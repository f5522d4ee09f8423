//! The template environment: how platform templates are compiled (strict undefined,
//! Helm-like whitespace, no auto-escaping, drover's filters) and how template errors are
//! reported. `load` compiles with it, `render` reports with it.

use std::path::Path;

/// A new template environment with drover's settings: undefined values are errors,
/// `trim_blocks` / `lstrip_blocks` / `keep_trailing_newline`, plain text output
/// (`| tojson` quotes a value safely) and the extra filters of [`add_filters`].
pub fn environment() -> Result<minijinja::Environment<'static>, minijinja::Error> {
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    // Errors carry the template source in every build (not only debug builds), so
    // `template_error` can show the offending line.
    env.set_debug(true);
    let syntax = minijinja::syntax::SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .keep_trailing_newline(true)
        .build()?;
    env.set_syntax(syntax);
    // Plain text output (Helm-like); `| tojson` quotes a value safely.
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    add_filters(&mut env);
    Ok(env)
}

/// Registers drover's extra template filters: `toyaml` (a value as block YAML, no
/// trailing newline; combine with `indent`), and `tojson` made strict: both refuse an
/// undefined value (MiniJinja's own `tojson` prints `null` for it, so a misspelt value
/// would render silently).
pub fn add_filters(env: &mut minijinja::Environment<'static>) {
    use minijinja::value::{Kwargs, Value};
    use minijinja::State;
    env.add_filter("toyaml", |state: &State, v: &Value| -> Result<String, minijinja::Error> {
        refuse_undefined(state, v)?;
        let s = serde_yaml_ng::to_string(v)
            .map_err(|e| minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, format!("toyaml: {e}")))?;
        Ok(s.trim_end_matches('\n').to_string())
    });
    env.add_filter("tojson", |state: &State, v: &Value, indent: Option<Value>, kwargs: Kwargs| -> Result<Value, minijinja::Error> {
        refuse_undefined(state, v)?;
        minijinja::filters::tojson(v, indent, kwargs)
    });
}

/// The strict-undefined error for `v` (naming the undefined expression), as MiniJinja
/// raises it when an undefined value is printed.
fn refuse_undefined(state: &minijinja::State, v: &minijinja::Value) -> Result<(), minijinja::Error> {
    if v.is_undefined() {
        minijinja::value::StringInput::new(state, v)?;
    }
    Ok(())
}

/// Describes a MiniJinja error as `FILE:LINE: what` (plus the offending source line).
/// Template names are paths relative to the platform root (stable for `include`);
/// messages show them joined to `root`.
pub fn template_error(e: &minijinja::Error, root: &Path) -> String {
    let mut s = match (e.name(), e.line()) {
        (Some(n), Some(l)) => format!("{}:{l}: {}", root.join(n).display(), e.kind()),
        (Some(n), None) => format!("{}: {}", root.join(n).display(), e.kind()),
        _ => e.kind().to_string(),
    };
    if let Some(d) = e.detail() {
        s.push_str(&format!(": {d}"));
    }
    if let (Some(src), Some(l)) = (e.template_source(), e.line()) {
        if let Some(line) = src.lines().nth(l.saturating_sub(1)) {
            s.push_str(&format!("\n  {l} | {}", line.trim_end()));
        }
    }
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        s.push_str(&format!(": {inner}"));
        source = inner.source();
    }
    s
}
