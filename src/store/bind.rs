//! Masked binding: the one way a value reaches SQLite. Every write statement of the store binds
//! its parameters through [`execute`] or [`execute_stmt`], which pass each text value through
//! the secret masker ([`crate::mask`], the registry the log and the API use), so no column,
//! present or future, can store a secret in clear. Integers, reals, NULL and blobs pass
//! unchanged; a text value is masked in its plain form and in its JSON-escaped form, so a
//! secret holding a quote or a backslash is caught inside a JSON column too.
//!
//! Keys are masked like any other text, so a stored key and the key a later write names agree;
//! a read that looks a row up by a clear key holding a secret misses it (issue ids and
//! identifiers are the tracker's own and hold none in practice).
//!
//! `bind_rule_holds` (a test below) fails when a store module writes through anything else.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use rusqlite::types::{ToSqlOutput, Value, ValueRef};
use rusqlite::{CachedStatement, Connection, ToSql, params_from_iter};

/// The parameters of one write, as `params![…]` or `named_params!{…}` produce them.
pub(crate) enum Args<'a> {
    Positional(&'a [&'a dyn ToSql]),
    Named(&'a [(&'a str, &'a dyn ToSql)]),
}

impl<'a> From<&'a [&'a dyn ToSql]> for Args<'a> {
    fn from(p: &'a [&'a dyn ToSql]) -> Self {
        Args::Positional(p)
    }
}

impl<'a> From<&'a [(&'a str, &'a dyn ToSql)]> for Args<'a> {
    fn from(p: &'a [(&'a str, &'a dyn ToSql)]) -> Self {
        Args::Named(p)
    }
}

/// Runs one write statement with every text parameter masked; the statement is prepared
/// through the connection's cache.
pub(crate) fn execute<'a>(
    conn: &Connection,
    sql: &str,
    args: impl Into<Args<'a>>,
) -> rusqlite::Result<usize> {
    let mut stmt = conn.prepare_cached(sql)?;
    execute_stmt(&mut stmt, args)
}

/// [`execute`] on a statement the caller prepared (a loop of inserts).
pub(crate) fn execute_stmt<'a>(
    stmt: &mut CachedStatement<'_>,
    args: impl Into<Args<'a>>,
) -> rusqlite::Result<usize> {
    let secrets = patterns();
    match args.into() {
        Args::Positional(p) => {
            let masked: Vec<Masked<'_>> = p.iter().map(|v| Masked::new(*v, &secrets)).collect();
            stmt.execute(params_from_iter(masked.iter()))
        }
        Args::Named(p) => {
            let masked: Vec<(&str, Masked<'_>)> = p
                .iter()
                .map(|(name, v)| (*name, Masked::new(*v, &secrets)))
                .collect();
            stmt.execute(&*masked)
        }
    }
}

/// A write whose `values` are masked and whose `keys`, bound after them, are bound as they are:
/// keys only find stored rows in a `WHERE` clause, and a row whose stored key holds a secret
/// must still be found to be rewritten (the scrub). The statement is not cached.
pub(crate) fn execute_keyed(
    conn: &Connection,
    sql: &str,
    values: &[&dyn ToSql],
    keys: &[&dyn ToSql],
) -> rusqlite::Result<usize> {
    let secrets = patterns();
    let masked: Vec<Masked<'_>> = values.iter().map(|v| Masked::new(*v, &secrets)).collect();
    let mut all: Vec<&dyn ToSql> = masked.iter().map(|m| m as &dyn ToSql).collect();
    all.extend_from_slice(keys);
    conn.prepare(sql)?.execute(&*all)
}

/// A bound value whose text, if any, is masked when SQLite asks for it.
struct Masked<'a> {
    inner: &'a dyn ToSql,
    secrets: &'a [Arc<str>],
}

impl<'a> Masked<'a> {
    fn new(inner: &'a dyn ToSql, secrets: &'a [Arc<str>]) -> Self {
        Masked { inner, secrets }
    }
}

impl ToSql for Masked<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        let out = self.inner.to_sql()?;
        if self.secrets.is_empty() {
            return Ok(out);
        }
        Ok(match out {
            ToSqlOutput::Borrowed(ValueRef::Text(bytes)) => match mask_bytes(bytes, self.secrets) {
                Some(text) => ToSqlOutput::Owned(Value::Text(text)),
                None => ToSqlOutput::Borrowed(ValueRef::Text(bytes)),
            },
            ToSqlOutput::Owned(Value::Text(text)) => {
                let masked = match crate::mask::mask_with_cow(&text, self.secrets) {
                    Cow::Owned(m) => m,
                    Cow::Borrowed(_) => text,
                };
                ToSqlOutput::Owned(Value::Text(masked))
            }
            other => other,
        })
    }
}

/// The masked text of `bytes`, or `None` when nothing in it is a secret.
fn mask_bytes(bytes: &[u8], secrets: &[Arc<str>]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    match crate::mask::mask_with_cow(&text, secrets) {
        Cow::Owned(m) => Some(m),
        Cow::Borrowed(_) => None,
    }
}

/// Masks one text as the binding does (the scrub uses it on stored values).
pub(crate) fn mask_text<'t>(text: &'t str, secrets: &[Arc<str>]) -> Cow<'t, str> {
    crate::mask::mask_with_cow(text, secrets)
}

thread_local! {
    /// The patterns of the registry generation last seen on this thread.
    static PATTERNS: RefCell<(u64, Arc<Vec<Arc<str>>>)> = RefCell::new((0, Arc::new(Vec::new())));
}

/// Every registered secret in its plain and its JSON-escaped form, longest first; rebuilt only
/// when the registry has grown since this thread last asked.
pub(crate) fn patterns() -> Arc<Vec<Arc<str>>> {
    let generation = crate::mask::generation();
    PATTERNS.with(|cell| {
        let mut cached = cell.borrow_mut();
        if cached.0 != generation {
            *cached = (
                generation,
                Arc::new(build_patterns(&crate::mask::secrets())),
            );
        }
        cached.1.clone()
    })
}

fn build_patterns(secrets: &[Arc<str>]) -> Vec<Arc<str>> {
    let mut out: Vec<Arc<str>> = secrets.to_vec();
    for s in secrets {
        let escaped = json_escaped(s);
        if escaped != **s && !out.iter().any(|o| **o == *escaped) {
            out.push(Arc::from(escaped.as_str()));
        }
    }
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out
}

/// `s` as it appears inside a JSON string literal, without the quotes.
fn json_escaped(s: &str) -> String {
    let quoted = serde_json::to_string(s).unwrap_or_default();
    quoted
        .strip_prefix('"')
        .and_then(|q| q.strip_suffix('"'))
        .unwrap_or(&quoted)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::{named_params, params};

    fn conn() -> Connection {
        let c = Connection::open_in_memory().expect("open");
        c.execute_batch("CREATE TABLE t (a TEXT, b INTEGER, c BLOB, d TEXT)")
            .expect("table");
        c
    }

    #[test]
    fn text_parameters_are_masked_in_both_spellings() {
        crate::mask::register_secret("bind-probe-s3cret");
        crate::mask::register_secret("bind\"probe\\quoted");
        let c = conn();
        let owned = String::from("owned bind-probe-s3cret");
        execute(
            &c,
            "INSERT INTO t (a, b, c, d) VALUES (?1, ?2, ?3, ?4)",
            params![
                "x bind-probe-s3cret y",
                7,
                b"bind-probe-s3cret".to_vec(),
                owned
            ],
        )
        .expect("insert");
        let json = serde_json::json!({"m": "bind\"probe\\quoted"}).to_string();
        execute(
            &c,
            "INSERT INTO t (a, b) VALUES (:a, :b)",
            named_params! {":a": json, ":b": 1},
        )
        .expect("insert named");
        type Row = (Option<String>, Option<Vec<u8>>, Option<String>);
        let rows: Vec<Row> = c
            .prepare("SELECT a, c, d FROM t ORDER BY rowid")
            .expect("prepare")
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .expect("query")
            .map(|r| r.expect("row"))
            .collect();
        assert_eq!(rows[0].0.as_deref(), Some("x [redacted] y"));
        // Blobs are bytes, not text: they pass as they are.
        assert_eq!(rows[0].1.as_deref(), Some(&b"bind-probe-s3cret"[..]));
        assert_eq!(rows[0].2.as_deref(), Some("owned [redacted]"));
        let stored = rows[1].0.clone().expect("json text");
        assert_eq!(stored, r#"{"m":"[redacted]"}"#);
        let v: serde_json::Value = serde_json::from_str(&stored).expect("still JSON");
        assert_eq!(v["m"], "[redacted]");
    }

    /// Every write in `src/store` binds through this module: no other `.execute(` call, and
    /// no `rusqlite` use outside the store. Test modules (after `#[cfg(test)]`) may build rows
    /// as they like.
    #[test]
    fn bind_rule_holds() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut offenders = Vec::new();
        visit(&root, &mut |path, text| {
            let rel = path.strip_prefix(&root).unwrap_or(path).to_string_lossy();
            let in_store = rel.starts_with("store/");
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            for (n, line) in code.lines().enumerate() {
                let t = line.trim_start();
                if t.starts_with("//") {
                    continue;
                }
                let raw_write = line.contains(".execute(") || line.contains("RETURNING");
                if in_store && raw_write && rel != "store/bind.rs" {
                    offenders.push(format!("{rel}:{}: {t}", n + 1));
                }
                if !in_store && line.contains("rusqlite") && !rel.starts_with("bin/") {
                    offenders.push(format!("{rel}:{}: {t}", n + 1));
                }
            }
        });
        assert!(
            offenders.is_empty(),
            "writes that bypass store::bind:\n{}",
            offenders.join("\n")
        );
    }

    fn visit(dir: &std::path::Path, f: &mut dyn FnMut(&std::path::Path, &str)) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                visit(&p, f);
            } else if p.extension().is_some_and(|x| x == "rs")
                && let Ok(text) = std::fs::read_to_string(&p)
            {
                f(&p, &text);
            }
        }
    }
}
