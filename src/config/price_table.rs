//! `price_table`: which price tables are on and where they come from. A bad value is a warning
//! and takes the default; only `replace_file`, the operator's own table, fails the load when it
//! cannot be read or parsed, because pricing every run from the wrong table is worse than
//! keeping the previous configuration.
//!
//! `SORTIE_PRICE_TABLE_FETCH` turns the shared download off: `0`, `false`, `off` or `no`
//! (any case). `1`, `true`, `on`, `yes` and an empty value leave it to `price_table.fetch`;
//! any other value is a warning and ignored.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::coerce::{display_value, type_name};
use super::context::BuildContext;
use super::env::{expand_env, expand_path};
use super::error::{ConfigError, ConfigWarning};
use crate::pricing::settings::FETCH_ENV;
use crate::pricing::{FetchOffBy, PriceTable, PriceTableSettings, ReplaceFile, TableLayer};

/// Largest operator table read.
const MAX_TABLE_BYTES: u64 = 64 * 1024 * 1024;

const FIELD_FILE: &str = "price_table.replace_file";

/// The settings of `raw["price_table"]` and the environment. `secrets` receives every value
/// `$VAR` put into a download address.
pub fn build_price_table(
    raw: &Map<String, Value>,
    ctx: &BuildContext<'_>,
    warnings: &mut Vec<ConfigWarning>,
    secrets: &mut Vec<String>,
) -> Result<PriceTableSettings, ConfigError> {
    let empty = Map::new();
    let m = raw
        .get("price_table")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut s = PriceTableSettings {
        embedded: flag(m, "embedded", warnings),
        ..PriceTableSettings::default()
    };
    if !flag(m, "fetch", warnings) {
        s.fetch_off_by = Some(FetchOffBy::Setting);
    }
    if env_turns_fetch_off(ctx, warnings) {
        s.fetch_off_by = Some(FetchOffBy::Env);
    }
    if let Some(url) = address(m, "fetch_url", ctx, warnings, secrets) {
        s.fetch_url = url;
    }
    s.replace_url = address(m, "replace_url", ctx, warnings, secrets);
    s.replace_file = replace_file(m, ctx, warnings)?;
    if s.replace_file.is_some() && s.replace_url.take().is_some() {
        warnings.push(ConfigWarning::new(
            "conflicting_keys",
            "price_table.replace_url",
            "price_table.replace_file is set and replaces every other table; ignored",
        ));
    }
    Ok(s)
}

fn flag(m: &Map<String, Value>, key: &str, warnings: &mut Vec<ConfigWarning>) -> bool {
    match m.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            warnings.push(ConfigWarning::new(
                "type_mismatch",
                format!("price_table.{key}"),
                format!("expected bool, got {}; using true", type_name(other)),
            ));
            true
        }
    }
}

fn env_turns_fetch_off(ctx: &BuildContext<'_>, warnings: &mut Vec<ConfigWarning>) -> bool {
    let Some(v) = ctx.env.get(FETCH_ENV) else {
        return false;
    };
    match v.trim().to_ascii_lowercase().as_str() {
        "0" | "false" | "off" | "no" => true,
        "" | "1" | "true" | "on" | "yes" => false,
        _ => {
            warnings.push(ConfigWarning::new(
                "invalid_value",
                FETCH_ENV,
                format!(
                    "expected 0, false, off or no (download off) or 1, true, on or yes, got {:?}; ignored",
                    v
                ),
            ));
            false
        }
    }
}

/// A string setting after `$VAR` expansion; `None` (with a warning for a bad value) when unset.
fn string_setting(
    m: &Map<String, Value>,
    key: &str,
    ctx: &BuildContext<'_>,
    warnings: &mut Vec<ConfigWarning>,
    secrets: &mut Vec<String>,
) -> Option<String> {
    let v = m.get(key)?;
    let Value::String(s) = v else {
        if !v.is_null() {
            warnings.push(ConfigWarning::new(
                "type_mismatch",
                format!("price_table.{key}"),
                format!("expected string, got {}; ignored", type_name(v)),
            ));
        }
        return None;
    };
    let e = expand_env(s.trim(), ctx.env);
    secrets.extend(e.substituted.into_iter().filter(|v| !v.is_empty()));
    let text = e.text.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn address(
    m: &Map<String, Value>,
    key: &str,
    ctx: &BuildContext<'_>,
    warnings: &mut Vec<ConfigWarning>,
    secrets: &mut Vec<String>,
) -> Option<String> {
    let url = string_setting(m, key, ctx, warnings, secrets)?;
    if crate::pricing::served_address(&url).is_none() {
        warnings.push(ConfigWarning::new(
            "invalid_value",
            format!("price_table.{key}"),
            format!(
                "not an http or https address ({}); its downloads fail with \"invalid address\"",
                display_value(&Value::String(crate::mask::mask(&url)))
            ),
        ));
    }
    Some(url)
}

/// `replace_file`: read and parsed with the workflow, so a bad file fails this load.
fn replace_file(
    m: &Map<String, Value>,
    ctx: &BuildContext<'_>,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<Option<ReplaceFile>, ConfigError> {
    let mut no_secrets = Vec::new();
    let Some(as_written) = string_setting(m, "replace_file", ctx, warnings, &mut no_secrets) else {
        return Ok(None);
    };
    let expanded = expand_path(&as_written, ctx.home, false, ctx.env)
        .map_err(|e| ConfigError::field(FIELD_FILE, e))?;
    let path = ctx.workflow_dir.join(Path::new(&expanded));
    let fail = |reason: String| ConfigError::field(FIELD_FILE, format!("{as_written}: {reason}"));
    let bytes = super::workflow_file::read_regular_file(&path, MAX_TABLE_BYTES).map_err(|e| {
        fail(match e {
            super::workflow_file::FileReadError::NotFound(r)
            | super::workflow_file::FileReadError::Unreadable(r) => r,
        })
    })?;
    let table = PriceTable::parse(TableLayer::OperatorTable, "", &bytes)
        .map_err(|e| fail(e.to_string()))?;
    Ok(Some(ReplaceFile {
        as_written,
        table: Arc::new(table),
    }))
}

/// Whether a load error, as displayed, is the operator table's (the sources show it on
/// `operator`).
pub fn is_replace_file_error(message: &str) -> bool {
    message.starts_with(&format!("config: {FIELD_FILE}:"))
}

#[cfg(test)]
mod tests;
