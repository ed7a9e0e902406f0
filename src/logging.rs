//! Log output: `log` + `env_logger` with a formatter that renders either slog-style text
//! (`time=… level=INFO msg="tick completed" candidates=2`) or one JSON object per line.
//!
//! Fields come from two places, both supported: structured `log` key-values
//! (`info!(issue_id = id; "worker exiting")`) and the project's inline convention
//! (`info!("worker exiting issue_id={id}")`), where the message text is everything before the
//! first `key=` token. A quoted value may be written `{:?}`-style (`output={out:?}`): its `\"`,
//! `\\`, `\n`, `\t`, `\r`, `\0` and `\u{…}` escapes are decoded, so quotes and newlines in
//! untrusted text (hook output, error texts) arrive intact; a quote that is not escaped ends
//! the value only at the end of the line or before the next `key=` field. The text format
//! re-escapes values JSON-style inside quotes, so every record stays one line; the JSON format
//! carries them as JSON strings. The message and every value, and then every rendered line,
//! pass through [`crate::mask::mask`], so a secret never reaches the log even when a caller
//! forgets.

use std::io::Write;

use log::kv::{Key, Value, VisitSource};

use crate::config::{LogFormat, LogLevel};

/// The `log` filter for a configured level.
pub fn level_filter(level: LogLevel) -> log::LevelFilter {
    match level {
        LogLevel::Debug => log::LevelFilter::Debug,
        LogLevel::Info => log::LevelFilter::Info,
        LogLevel::Warn => log::LevelFilter::Warn,
        LogLevel::Error => log::LevelFilter::Error,
    }
}

/// Installs the global logger (stderr). Later calls are ignored by `log`, so call once, after
/// the level and format are final.
pub fn init(level: LogLevel, format: LogFormat) {
    let mut builder = env_logger::Builder::new();
    builder
        .filter_level(level_filter(level))
        // Dependencies' chatter stays out unless debugging them explicitly via RUST_LOG.
        .filter_module("ureq", log::LevelFilter::Warn)
        .filter_module("rustls", log::LevelFilter::Warn)
        .filter_module("notify", log::LevelFilter::Warn)
        .target(env_logger::Target::Stderr)
        .format(move |buf, record| {
            let line = render(record, format, crate::clock::now_rfc3339());
            writeln!(buf, "{}", crate::mask::mask(&line))
        });
    if let Ok(spec) = std::env::var("RUST_LOG") {
        builder.parse_filters(&spec);
    }
    let _ = builder.try_init();
}

/// Renders one record (pure; unit-tested).
pub fn render(record: &log::Record<'_>, format: LogFormat, time: String) -> String {
    let text = record.args().to_string();
    let (msg, mut fields) = split_inline_fields(&text);
    let mut kv = KvCollector(Vec::new());
    let _ = record.key_values().visit(&mut kv);
    fields.extend(kv.0);
    // Masked once decoded, too: rendering escapes `"` and `\`, so a secret holding one would
    // no longer match in the finished line.
    let msg = crate::mask::mask(&msg);
    for (_, v) in fields.iter_mut() {
        *v = crate::mask::mask(v);
    }
    let level = record.level().as_str().to_ascii_uppercase();
    match format {
        LogFormat::Text => {
            let mut out = format!("time={time} level={level} msg={}", quote(&msg));
            for (k, v) in fields {
                out.push(' ');
                out.push_str(&k);
                out.push('=');
                out.push_str(&quote(&v));
            }
            out
        }
        LogFormat::Json => {
            let mut map = serde_json::Map::new();
            map.insert("time".into(), time.into());
            map.insert("level".into(), level.into());
            map.insert("msg".into(), msg.into());
            for (k, v) in fields {
                map.insert(k, v.into());
            }
            serde_json::Value::Object(map).to_string()
        }
    }
}

struct KvCollector(Vec<(String, String)>);

impl<'kvs> VisitSource<'kvs> for KvCollector {
    fn visit_pair(&mut self, key: Key<'kvs>, value: Value<'kvs>) -> Result<(), log::kv::Error> {
        self.0.push((key.to_string(), value.to_string()));
        Ok(())
    }
}

/// Quotes a value when it is empty or contains spaces, quotes, `=` or control characters.
fn quote(v: &str) -> String {
    let needs = v.is_empty()
        || v.chars()
            .any(|c| c == ' ' || c == '"' || c == '=' || c.is_control());
    if needs {
        serde_json::Value::String(v.to_string()).to_string()
    } else {
        v.to_string()
    }
}

/// Whether a quote followed by `after` ends a quoted value: only at the end of the line or
/// before the next `key=` field. Callers write `error="{e}"` without escaping, and an error
/// text may itself quote a name (`tracker kind "x" is not supported`); such a quote is content.
fn closes_value(after: &str) -> bool {
    let rest = after.trim_start_matches(' ');
    rest.is_empty()
        || (rest.len() < after.len() && rest.split(' ').next().is_some_and(is_key_token))
}

fn is_key_token(tok: &str) -> bool {
    match tok.split_once('=') {
        Some((k, _)) => {
            !k.is_empty()
                && k.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
                && k.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.')
        }
        None => false,
    }
}

/// Decodes the body of a `\u` escape at the start of `s`: Rust's `{XXXX}` or JSON's four hex
/// digits (a surrogate half is not decoded). Returns the char and the bytes consumed.
fn unicode_escape(s: &str) -> Option<(char, usize)> {
    if let Some(body) = s.strip_prefix('{') {
        let end = body.find('}')?;
        let hex = &body[..end];
        if hex.is_empty() || hex.len() > 6 {
            return None;
        }
        let ch = char::from_u32(u32::from_str_radix(hex, 16).ok()?)?;
        return Some((ch, end + 2));
    }
    let hex = s.get(..4)?;
    let ch = char::from_u32(u32::from_str_radix(hex, 16).ok()?)?;
    Some((ch, 4))
}

/// Splits `"worker exiting issue_id=1 error=\"boom now\""` into the message and its fields.
pub fn split_inline_fields(text: &str) -> (String, Vec<(String, String)>) {
    // Find the first whitespace-delimited token that looks like `key=`.
    let mut start = None;
    let mut pos = 0;
    for tok in text.split(' ') {
        if is_key_token(tok) {
            start = Some(pos);
            break;
        }
        pos += tok.len() + 1;
    }
    let Some(start) = start else {
        return (text.to_string(), Vec::new());
    };
    let msg = text[..start].trim_end().to_string();
    let mut fields = Vec::new();
    let rest = &text[start..];
    let mut chars = rest.char_indices().peekable();
    let mut key = String::new();
    while let Some((_, c)) = chars.next() {
        if c == '=' {
            let mut val = String::new();
            if chars.peek().map(|&(_, c)| c) == Some('"') {
                chars.next();
                while let Some((i, c)) = chars.next() {
                    if c == '\\' {
                        // `{:?}` / JSON escapes: decoded, so newlines and quotes survive.
                        match chars.next() {
                            Some((_, 'n')) => val.push('\n'),
                            Some((_, 'r')) => val.push('\r'),
                            Some((_, 't')) => val.push('\t'),
                            Some((_, '0')) => val.push('\0'),
                            Some((j, 'u')) => match unicode_escape(&rest[j + 1..]) {
                                Some((ch, len)) => {
                                    val.push(ch);
                                    for _ in 0..len {
                                        chars.next();
                                    }
                                }
                                None => {
                                    val.push('\\');
                                    val.push('u');
                                }
                            },
                            Some((_, e @ ('"' | '\\' | '\'' | '/'))) => val.push(e),
                            Some((_, other)) => {
                                val.push('\\');
                                val.push(other);
                            }
                            None => val.push('\\'),
                        }
                    } else if c == '"' && closes_value(&rest[i + 1..]) {
                        break;
                    } else {
                        val.push(c);
                    }
                }
            } else {
                while let Some(&(_, c)) = chars.peek() {
                    if c == ' ' {
                        break;
                    }
                    val.push(c);
                    chars.next();
                }
            }
            fields.push((std::mem::take(&mut key), val));
            // Skip the separating spaces.
            while chars.peek().map(|&(_, c)| c) == Some(' ') {
                chars.next();
            }
        } else {
            key.push(c);
        }
    }
    if !key.trim().is_empty() {
        // Trailing text without `=`: keep it visible rather than dropping it.
        fields.push(("extra".into(), key.trim().to_string()));
    }
    (msg, fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(args: std::fmt::Arguments<'_>, f: LogFormat) -> String {
        let record = log::Record::builder()
            .args(args)
            .level(log::Level::Info)
            .build();
        render(&record, f, "T".into())
    }

    #[test]
    fn inline_fields_split_from_message() {
        let (m, f) = split_inline_fields("worker exiting issue_id=1 error=\"boom now\" n=3");
        assert_eq!(m, "worker exiting");
        assert_eq!(
            f,
            vec![
                ("issue_id".into(), "1".into()),
                ("error".into(), "boom now".into()),
                ("n".into(), "3".into())
            ]
        );
    }

    #[test]
    fn text_format_quotes_message_and_values() {
        let line = rec(
            format_args!("tick completed candidates=2 note=\"a b\""),
            LogFormat::Text,
        );
        assert_eq!(
            line,
            "time=T level=INFO msg=\"tick completed\" candidates=2 note=\"a b\""
        );
    }

    #[test]
    fn json_format_is_one_object_with_flat_fields() {
        let line = rec(format_args!("tick completed candidates=2"), LogFormat::Json);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["msg"], "tick completed");
        assert_eq!(v["level"], "INFO");
        assert_eq!(v["candidates"], "2");
    }

    #[test]
    fn message_without_fields_is_kept_whole() {
        let (m, f) = split_inline_fields("sortie started");
        assert_eq!(m, "sortie started");
        assert!(f.is_empty());
    }

    #[test]
    fn levels_and_formats_parse_case_insensitively() {
        let filter = |s: &str| LogLevel::parse(s).map(level_filter);
        assert_eq!(filter("DEBUG"), Some(log::LevelFilter::Debug));
        assert_eq!(filter("warning"), Some(log::LevelFilter::Warn));
        assert_eq!(filter("verbose"), None);
        assert_eq!(LogFormat::parse("Json"), Some(LogFormat::Json));
        assert_eq!(LogFormat::parse("xml"), None);
    }

    #[test]
    fn quotes_inside_an_unescaped_quoted_value_are_content() {
        let (m, f) = split_inline_fields(
            r#"dispatch preflight failed error="tracker kind "github" is not supported" tick=3"#,
        );
        assert_eq!(m, "dispatch preflight failed");
        assert_eq!(
            f,
            vec![
                (
                    "error".to_string(),
                    r#"tracker kind "github" is not supported"#.to_string()
                ),
                ("tick".to_string(), "3".to_string()),
            ]
        );
    }

    #[test]
    fn debug_quoted_values_keep_quotes_backslashes_and_newlines() {
        let output = "a \"quoted\" line\nsecond line key=v \\ end \u{1b}";
        let text = format!("hook failed hook=before_run output={output:?} n=1");
        let (m, f) = split_inline_fields(&text);
        assert_eq!(m, "hook failed");
        assert_eq!(
            f,
            vec![
                ("hook".to_string(), "before_run".to_string()),
                ("output".to_string(), output.to_string()),
                ("n".to_string(), "1".to_string()),
            ]
        );
        // Text: one line, escaped, and parsing it back yields the same value.
        let line = rec(format_args!("{text}"), LogFormat::Text);
        assert!(!line.contains('\n'), "{line}");
        let (_, back) = split_inline_fields(&line);
        assert!(
            back.contains(&("output".to_string(), output.to_string())),
            "{line}"
        );
        assert!(!back.iter().any(|(k, _)| k == "extra"), "{line}");
        // JSON: carried exactly.
        let line = rec(format_args!("{text}"), LogFormat::Json);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["output"], output);
        assert!(v.get("extra").is_none(), "{line}");
    }

    #[test]
    fn a_secret_holding_a_quote_or_backslash_is_masked_in_both_formats() {
        let secret = "q\"uo\\ted-secret-314";
        crate::mask::register_secret(secret);
        for f in [LogFormat::Text, LogFormat::Json] {
            let line = crate::mask::mask(&rec(format_args!("hook failed output={secret:?}"), f));
            assert!(line.contains(crate::mask::REDACTED), "{line}");
            assert!(!line.contains("ted-secret-314"), "{line}");
        }
    }
}
