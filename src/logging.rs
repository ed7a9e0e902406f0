//! Log output: `log` + `env_logger` with a formatter that renders either slog-style text
//! (`time=… level=INFO msg="tick completed" candidates=2`) or one JSON object per line.
//!
//! Fields are the `log` crate's structured key-values (`info!(issue_id:% = id; "worker
//! exiting")`); the message is never parsed for fields, so text from outside (an issue
//! identifier, an error, an agent's stderr) can only ever be the value it was passed as. The
//! text format quotes a value holding a space, `"`, `=` or a control character as a JSON string,
//! so every record is one line and `level=ERROR` inside a value stays inside its quotes; the
//! JSON format carries values as JSON strings. A field named `time`, `level` or `msg` is
//! written as `field.time` (and so on), so it cannot stand in for the record's own. The
//! message and every value, and then every rendered line, pass through
//! [`crate::mask::mask`], so a secret never reaches the log even when a caller forgets.

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
            let workflow = crate::log_field::thread_workflow();
            let line = render_in(
                record,
                format,
                crate::clock::now_rfc3339(),
                workflow.as_deref(),
            );
            writeln!(buf, "{}", crate::mask::mask(&line))
        });
    if let Ok(spec) = std::env::var("RUST_LOG") {
        builder.parse_filters(&spec);
    }
    let _ = builder.try_init();
}

/// The keys every record carries itself.
const RESERVED: [&str; 3] = ["time", "level", "msg"];

/// Renders one record (pure; unit-tested).
pub fn render(record: &log::Record<'_>, format: LogFormat, time: String) -> String {
    render_in(record, format, time, None)
}

/// Renders one record written on a thread of `workflow` (one of several the daemon serves):
/// the record gains a `workflow` field unless it carries one itself.
pub fn render_in(
    record: &log::Record<'_>,
    format: LogFormat,
    time: String,
    workflow: Option<&str>,
) -> String {
    let msg = crate::mask::mask(&record.args().to_string());
    let mut kv = KvCollector(Vec::new());
    let _ = record.key_values().visit(&mut kv);
    if let Some(name) = workflow
        && !kv.0.iter().any(|(k, _)| k == "workflow")
    {
        kv.0.push(("workflow".into(), name.into()));
    }
    // Masked before rendering, too: escaping `"` and `\` would keep a secret holding one from
    // matching in the finished line.
    let fields = kv.0.into_iter().map(|(k, v)| {
        let k = if RESERVED.contains(&k.as_str()) {
            format!("field.{k}")
        } else {
            k
        };
        (k, crate::mask::mask(&v))
    });
    let level = record.level().as_str().to_ascii_uppercase();
    match format {
        LogFormat::Text => {
            let mut out = format!("time={time} level={level} msg={}", quote(&msg));
            for (k, v) in fields {
                out.push(' ');
                out.push_str(&quote(&k));
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

/// The fields of one text-format line, `time`, `level` and `msg` included, in order; `None`
/// when the line is not one [`render`] wrote. Reads exactly what the renderer writes: bare
/// tokens up to a space, or JSON strings.
pub fn parse_text_line(line: &str) -> Option<Vec<(String, String)>> {
    let mut rest = line.trim_end_matches(['\n', '\r']);
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (key, after) = token(rest)?;
        let after = after.strip_prefix('=')?;
        let (value, after) = token(after)?;
        out.push((key, value));
        rest = match after.strip_prefix(' ') {
            Some(r) => r,
            None if after.is_empty() => after,
            None => return None,
        };
    }
    Some(out)
}

/// One bare or JSON-quoted token at the start of `s`, and what follows it.
fn token(s: &str) -> Option<(String, &str)> {
    if s.starts_with('"') {
        let mut de = serde_json::Deserializer::from_str(s).into_iter::<String>();
        let v = de.next()?.ok()?;
        let used = de.byte_offset();
        return Some((v, &s[used..]));
    }
    let end = s.find([' ', '=']).unwrap_or(s.len());
    Some((s[..end].to_string(), &s[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Renders a record built the way `log::info!` builds it, with `kvs` as its fields.
    fn rec(msg: std::fmt::Arguments<'_>, kvs: &[(&str, &str)], f: LogFormat) -> String {
        let pairs: Vec<(&str, log::kv::Value<'_>)> = kvs
            .iter()
            .map(|(k, v)| (*k, log::kv::Value::from_display(v)))
            .collect();
        let record = log::Record::builder()
            .args(msg)
            .level(log::Level::Info)
            .key_values(&pairs)
            .build();
        render(&record, f, "T".into())
    }

    #[test]
    fn a_workflow_thread_s_records_name_the_workflow_once() {
        let one = |kvs: &[(&str, &str)]| {
            let kvs: Vec<(&str, log::kv::Value<'_>)> = kvs
                .iter()
                .map(|(k, v)| (*k, log::kv::Value::from(*v)))
                .collect();
            let r = log::Record::builder()
                .args(format_args!("tick"))
                .level(log::Level::Info)
                .key_values(&kvs)
                .build();
            render_in(&r, LogFormat::Text, "t".into(), Some("web app"))
        };
        assert_eq!(
            one(&[("issue_id", "1")]),
            "time=t level=INFO msg=tick issue_id=1 workflow=\"web app\""
        );
        assert_eq!(
            one(&[("workflow", "other")]),
            "time=t level=INFO msg=tick workflow=other"
        );
    }

    #[test]
    fn text_format_quotes_message_and_values() {
        let line = rec(
            format_args!("tick completed"),
            &[("candidates", "2"), ("note", "a b")],
            LogFormat::Text,
        );
        assert_eq!(
            line,
            "time=T level=INFO msg=\"tick completed\" candidates=2 note=\"a b\""
        );
    }

    #[test]
    fn json_format_is_one_object_with_flat_fields() {
        let line = rec(
            format_args!("tick completed"),
            &[("candidates", "2")],
            LogFormat::Json,
        );
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["msg"], "tick completed");
        assert_eq!(v["level"], "INFO");
        assert_eq!(v["candidates"], "2");
    }

    #[test]
    fn field_text_in_the_message_is_not_a_field() {
        let line = rec(
            format_args!("sortie started level=ERROR issue_id=9"),
            &[],
            LogFormat::Text,
        );
        let f = parse_text_line(&line).unwrap();
        assert_eq!(f.len(), 3, "{line}");
        assert_eq!(f[1], ("level".into(), "INFO".into()));
        assert_eq!(f[2].1, "sortie started level=ERROR issue_id=9");
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
    fn hostile_values_stay_inside_their_field_in_both_formats() {
        let hostile = "X\nlevel=ERROR msg=FORGED time=1999 \"q\" \\ \u{1b}[31mred";
        let kvs = [
            ("issue_identifier", hostile),
            ("level", "ERROR"),
            ("n", "1"),
        ];
        let line = rec(format_args!("hook failed"), &kvs, LogFormat::Text);
        assert!(!line.contains('\n') && !line.contains('\u{1b}'), "{line}");
        let f = parse_text_line(&line).unwrap();
        let keys: Vec<&str> = f.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "time",
                "level",
                "msg",
                "issue_identifier",
                "field.level",
                "n"
            ]
        );
        assert_eq!(f[1].1, "INFO");
        assert_eq!(f[3].1, hostile);
        let line = rec(format_args!("hook failed"), &kvs, LogFormat::Json);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["level"], "INFO");
        assert_eq!(v["time"], "T");
        assert_eq!(v["msg"], "hook failed");
        assert_eq!(v["issue_identifier"], hostile);
        assert_eq!(v["field.level"], "ERROR");
    }

    #[test]
    fn lines_the_renderer_did_not_write_do_not_parse() {
        assert!(parse_text_line("time=T level=INFO msg=\"open").is_none());
        assert!(parse_text_line("time=T level").is_none());
    }

    #[test]
    fn a_secret_holding_a_quote_or_backslash_is_masked_in_both_formats() {
        let secret = "q\"uo\\ted-secret-314";
        crate::mask::register_secret(secret);
        for f in [LogFormat::Text, LogFormat::Json] {
            let line = crate::mask::mask(&rec(
                format_args!("hook failed {secret}"),
                &[("output", secret)],
                f,
            ));
            assert!(line.contains(crate::mask::REDACTED), "{line}");
            assert!(!line.contains("ted-secret-314"), "{line}");
        }
    }
}
