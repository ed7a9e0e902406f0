//! A price table: rates per model name, in the shape of LiteLLM's
//! `model_prices_and_context_window.json` (USD per token under `input_cost_per_token`,
//! `output_cost_per_token`, `cache_read_input_token_cost`, `cache_creation_input_token_cost`).
//! The built-in table, the downloaded shared table and an operator's own table all use it, so
//! one parser and one validation serve every layer.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::class::{ClassRates, TokenClass};

/// Where a table comes from, highest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TableLayer {
    OperatorTable,
    Fetched,
    Embedded,
}

/// One parsed, validated table.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    pub layer: TableLayer,
    /// The date of its prices, RFC 3339 (a download's time, the upstream revision's date…).
    pub as_of: String,
    /// `sha256:<hex>` of the body it was parsed from.
    pub version: String,
    pub models: BTreeMap<String, ClassRates>,
}

/// Why a table body was refused.
#[derive(Debug, Clone, PartialEq)]
pub enum TableError {
    NotJson(String),
    NotAnObject,
    /// A cost member that is not a finite, non-negative number.
    BadRate {
        model: String,
        member: String,
    },
    NoPricedModel,
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableError::NotJson(e) => write!(f, "price table is not JSON: {e}"),
            TableError::NotAnObject => write!(f, "price table is not a JSON object of models"),
            TableError::BadRate { model, member } => write!(
                f,
                "price table: {model}.{member} must be a non-negative number"
            ),
            TableError::NoPricedModel => write!(f, "price table prices no model"),
        }
    }
}

impl std::error::Error for TableError {}

/// The per-token members of a table entry, by the class each one rates.
const MEMBERS: [(TokenClass, &str); 4] = [
    (TokenClass::Input, "input_cost_per_token"),
    (TokenClass::Output, "output_cost_per_token"),
    (TokenClass::CacheRead, "cache_read_input_token_cost"),
    (TokenClass::CacheWrite, "cache_creation_input_token_cost"),
];

impl PriceTable {
    /// Parses and validates a body. Entries that are not objects or carry no cost member
    /// (LiteLLM's `sample_spec`, image-only models) are skipped; a malformed cost member
    /// refuses the whole table, since it means the file is not what it claims to be.
    pub fn parse(layer: TableLayer, as_of: &str, body: &[u8]) -> Result<PriceTable, TableError> {
        let doc: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| TableError::NotJson(e.to_string()))?;
        let obj = doc.as_object().ok_or(TableError::NotAnObject)?;
        let mut models = BTreeMap::new();
        for (name, entry) in obj {
            if let Some(rates) = entry_rates(name, entry)? {
                models.insert(name.clone(), rates);
            }
        }
        if models.is_empty() {
            return Err(TableError::NoPricedModel);
        }
        Ok(PriceTable {
            layer,
            as_of: as_of.to_string(),
            version: format!("sha256:{}", super::entries::hex(&Sha256::digest(body))),
            models,
        })
    }

    /// The rates of a model as the runtime named it: the exact name, else the name without a
    /// provider prefix (`anthropic/claude-sonnet-4-5` → `claude-sonnet-4-5`).
    pub fn lookup(&self, model: &str) -> Option<&ClassRates> {
        self.lookup_key(model).map(|(_, r)| r)
    }

    /// [`lookup`](Self::lookup) with the table key the name maps to (the API's `table_key`).
    pub fn lookup_key(&self, model: &str) -> Option<(&str, &ClassRates)> {
        if let Some((k, r)) = self.models.get_key_value(model) {
            return Some((k.as_str(), r));
        }
        let bare = model.rsplit('/').next().unwrap_or(model);
        (bare != model)
            .then(|| self.models.get_key_value(bare))
            .flatten()
            .map(|(k, r)| (k.as_str(), r))
    }
}

fn entry_rates(name: &str, entry: &serde_json::Value) -> Result<Option<ClassRates>, TableError> {
    let Some(obj) = entry.as_object() else {
        return Ok(None);
    };
    let mut rates = ClassRates::default();
    for (class, member) in MEMBERS {
        let Some(v) = obj.get(member) else { continue };
        if v.is_null() {
            continue;
        }
        let per_token = v
            .as_f64()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| TableError::BadRate {
                model: name.to_string(),
                member: member.to_string(),
            })?;
        rates.set(class, Some(per_mtok(per_token)));
    }
    Ok(rates.any().then_some(rates))
}

/// A per-token rate as USD per million tokens, to 10 significant digits, so the binary
/// floating-point error of the per-token figure (3e-6 × 1e6 = 3.0000000000000004) is gone.
fn per_mtok(per_token: f64) -> f64 {
    let x = per_token * 1e6;
    if x == 0.0 {
        return 0.0;
    }
    let digits = 10 - 1 - x.abs().log10().floor() as i32;
    let scale = 10f64.powi(digits);
    (x * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = r#"{
        "sample_spec": {"max_tokens": "LEGACY", "input_cost_per_token": 0},
        "claude-sonnet-4-5": {"input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05,
            "cache_read_input_token_cost": 3e-07, "cache_creation_input_token_cost": 3.75e-06},
        "gpt-5": {"input_cost_per_token": 1.25e-06, "output_cost_per_token": 1e-05,
            "cache_read_input_token_cost": 1.25e-07},
        "dall-e-3": {"mode": "image_generation"}
    }"#;

    #[test]
    fn rates_are_per_million_tokens_without_float_noise() {
        let t = PriceTable::parse(
            TableLayer::Embedded,
            "2026-11-30T00:00:00Z",
            BODY.as_bytes(),
        )
        .unwrap();
        let s = t.lookup("claude-sonnet-4-5").unwrap();
        assert_eq!(s.input_per_mtok, Some(3.0));
        assert_eq!(s.output_per_mtok, Some(15.0));
        assert_eq!(s.cache_read_per_mtok, Some(0.3));
        assert_eq!(s.cache_write_per_mtok, Some(3.75));
        assert_eq!(t.lookup("gpt-5").unwrap().cache_write_per_mtok, None);
        assert!(t.lookup("dall-e-3").is_none());
        assert!(t.version.starts_with("sha256:"));
    }

    #[test]
    fn a_provider_prefix_falls_back_to_the_bare_name() {
        let t = PriceTable::parse(TableLayer::Fetched, "x", BODY.as_bytes()).unwrap();
        assert!(t.lookup("anthropic/claude-sonnet-4-5").is_some());
        assert!(t.lookup("anthropic/claude-opus-9").is_none());
    }

    #[test]
    fn a_malformed_body_is_refused_with_the_reason() {
        let parse = |b: &str| PriceTable::parse(TableLayer::Fetched, "x", b.as_bytes());
        assert!(matches!(parse("{"), Err(TableError::NotJson(_))));
        assert_eq!(parse("[]"), Err(TableError::NotAnObject));
        assert_eq!(parse("{}"), Err(TableError::NoPricedModel));
        assert_eq!(
            parse(r#"{"m": {"input_cost_per_token": -1}}"#)
                .unwrap_err()
                .to_string(),
            "price table: m.input_cost_per_token must be a non-negative number"
        );
    }
}
