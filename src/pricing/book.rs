//! A set of rates in force: the `token_rates` entries over the price tables, and which layer
//! supplies each token class of a model.

use std::sync::Arc;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::class::{ClassRates, TokenClass};
use super::entries::{RateEntry, TokenRates};
use super::table::{PriceTable, TableLayer};

/// The layer a rate comes from, highest precedence first (the API's `layer` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RateLayer {
    KindEntry,
    ModelEntry,
    OperatorTable,
    Fetched,
    Embedded,
}

impl From<TableLayer> for RateLayer {
    fn from(l: TableLayer) -> Self {
        match l {
            TableLayer::OperatorTable => RateLayer::OperatorTable,
            TableLayer::Fetched => RateLayer::Fetched,
            TableLayer::Embedded => RateLayer::Embedded,
        }
    }
}

/// One class's rate and where it came from; `per_mtok` and `layer` are `None` together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ClassRate {
    pub per_mtok: Option<f64>,
    pub layer: Option<RateLayer>,
    /// A kind entry's unset cache rate, priced at its input rate.
    pub from_input: bool,
}

/// The rates that price one model of one agent kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resolved {
    /// The layer that prices the model, `None` when none does.
    pub layer: Option<RateLayer>,
    /// The `token_rates` key of the entry that applies.
    pub entry_key: Option<String>,
    /// Input, output, cache read, cache write, in [`TokenClass::ALL`] order.
    pub classes: [ClassRate; 4],
    /// A kind entry without an input or an output rate: the seed prices nothing with it.
    pub incomplete_kind_entry: bool,
}

impl Resolved {
    pub fn class(&self, class: TokenClass) -> ClassRate {
        self.classes[class as usize]
    }
}

/// The `token_rates` entries and the price tables in force, tables in precedence order.
#[derive(Debug, Clone, Default)]
pub struct RateBook {
    pub token_rates: TokenRates,
    pub tables: Vec<Arc<PriceTable>>,
}

impl RateBook {
    pub fn new(token_rates: TokenRates, mut tables: Vec<Arc<PriceTable>>) -> RateBook {
        tables.sort_by_key(|t| t.layer);
        RateBook {
            token_rates,
            tables,
        }
    }

    /// Whether anything can price a run: a table in force or a `token_rates` entry.
    pub fn has_rate_source(&self) -> bool {
        !self.tables.is_empty() || !self.token_rates.is_empty()
    }

    /// `sha256:<hex>` naming the entries and the tables this book prices with, recorded with
    /// each run it prices.
    pub fn version(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.token_rates.version().unwrap_or_default().as_bytes());
        for t in &self.tables {
            h.update([0, t.layer as u8]);
            h.update(t.version.as_bytes());
        }
        format!("sha256:{}", super::entries::hex(&h.finalize()))
    }

    /// The first table listing the model, and its rates.
    pub fn table_rates(&self, model: &str) -> Option<(TableLayer, &ClassRates)> {
        self.tables
            .iter()
            .find_map(|t| t.lookup(model).map(|r| (t.layer, r)))
    }

    /// Which rate prices each class of `model` run by `agent_kind`.
    pub fn resolve(&self, agent_kind: &str, model: &str) -> Resolved {
        let entries = &self.token_rates.entries;
        if let Some(e) = entries.get(agent_kind).filter(|e| e.per_kind) {
            return kind_entry(agent_kind, e);
        }
        let table = self.table_rates(model);
        if let Some(e) = entries.get(model).filter(|e| !e.per_kind) {
            return model_entry(model, e, table);
        }
        match table {
            Some((layer, rates)) => from_table(layer, rates),
            None => Resolved::default(),
        }
    }
}

fn kind_entry(key: &str, e: &RateEntry) -> Resolved {
    let input = e.rates.input_per_mtok;
    let mut out = Resolved {
        layer: Some(RateLayer::KindEntry),
        entry_key: Some(key.to_string()),
        incomplete_kind_entry: !e.complete(),
        ..Resolved::default()
    };
    for class in TokenClass::ALL {
        let own = e.rates.get(class);
        let is_cache = matches!(class, TokenClass::CacheRead | TokenClass::CacheWrite);
        let (per_mtok, from_input) = match own {
            Some(r) => (Some(r), false),
            None if is_cache && input.is_some() => (input, true),
            None => (None, false),
        };
        out.classes[class as usize] = ClassRate {
            per_mtok,
            layer: per_mtok.map(|_| RateLayer::KindEntry),
            from_input,
        };
    }
    out
}

fn model_entry(key: &str, e: &RateEntry, table: Option<(TableLayer, &ClassRates)>) -> Resolved {
    let mut out = Resolved {
        layer: Some(RateLayer::ModelEntry),
        entry_key: Some(key.to_string()),
        ..Resolved::default()
    };
    for class in TokenClass::ALL {
        out.classes[class as usize] = match e.rates.get(class) {
            Some(r) => ClassRate {
                per_mtok: Some(r),
                layer: Some(RateLayer::ModelEntry),
                from_input: false,
            },
            None => table
                .and_then(|(layer, rates)| table_class(layer, rates, class))
                .unwrap_or_default(),
        };
    }
    out
}

fn from_table(layer: TableLayer, rates: &ClassRates) -> Resolved {
    let mut out = Resolved {
        layer: Some(layer.into()),
        ..Resolved::default()
    };
    for class in TokenClass::ALL {
        out.classes[class as usize] = table_class(layer, rates, class).unwrap_or_default();
    }
    out
}

fn table_class(layer: TableLayer, rates: &ClassRates, class: TokenClass) -> Option<ClassRate> {
    rates.get(class).map(|r| ClassRate {
        per_mtok: Some(r),
        layer: Some(layer.into()),
        from_input: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn table(layer: TableLayer, body: &str) -> Arc<PriceTable> {
        Arc::new(PriceTable::parse(layer, "2026-11-30T00:00:00Z", body.as_bytes()).unwrap())
    }

    fn rates(i: Option<f64>, o: Option<f64>, cr: Option<f64>, cw: Option<f64>) -> ClassRates {
        ClassRates {
            input_per_mtok: i,
            output_per_mtok: o,
            cache_read_per_mtok: cr,
            cache_write_per_mtok: cw,
        }
    }

    fn book(entries: &[(&str, bool, ClassRates)]) -> RateBook {
        let mut tr = TokenRates::default();
        for (k, per_kind, r) in entries {
            tr.entries.insert(
                k.to_string(),
                RateEntry {
                    rates: *r,
                    per_kind: *per_kind,
                },
            );
        }
        let emb = table(
            TableLayer::Embedded,
            r#"{"m1": {"input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06,
                "cache_read_input_token_cost": 1e-07}}"#,
        );
        let fetched = table(
            TableLayer::Fetched,
            r#"{"m1": {"input_cost_per_token": 5e-06, "output_cost_per_token": 6e-06}}"#,
        );
        RateBook::new(tr, vec![emb, fetched])
    }

    #[test]
    fn the_first_table_listing_a_model_prices_it_and_its_gaps_stay_unrated() {
        let r = book(&[]).resolve("claude-code", "m1");
        assert_eq!(r.layer, Some(RateLayer::Fetched));
        assert_eq!(r.class(TokenClass::Input).per_mtok, Some(5.0));
        assert_eq!(r.class(TokenClass::CacheRead).per_mtok, None);
        assert_eq!(r.class(TokenClass::CacheRead).layer, None);
        assert_eq!(book(&[]).resolve("x", "unknown"), Resolved::default());
    }

    #[test]
    fn a_kind_entry_prices_every_model_and_its_unset_cache_rates_take_the_input_rate() {
        let b = book(&[(
            "claude-code",
            true,
            rates(Some(3.0), Some(15.0), None, None),
        )]);
        let r = b.resolve("claude-code", "m1");
        assert_eq!(r.layer, Some(RateLayer::KindEntry));
        assert_eq!(r.entry_key.as_deref(), Some("claude-code"));
        let cw = r.class(TokenClass::CacheWrite);
        assert_eq!((cw.per_mtok, cw.from_input), (Some(3.0), true));
        assert!(!r.incomplete_kind_entry);
        let other = b.resolve("codex", "m1");
        assert_eq!(other.layer, Some(RateLayer::Fetched));
    }

    #[test]
    fn a_model_entry_takes_each_unset_class_from_the_table_listing_the_model() {
        let b = book(&[("m1", false, rates(None, Some(9.0), None, None))]);
        let r = b.resolve("claude-code", "m1");
        assert_eq!(r.layer, Some(RateLayer::ModelEntry));
        assert_eq!(
            r.class(TokenClass::Output).layer,
            Some(RateLayer::ModelEntry)
        );
        assert_eq!(r.class(TokenClass::Input).per_mtok, Some(5.0));
        assert_eq!(r.class(TokenClass::Input).layer, Some(RateLayer::Fetched));
        assert_eq!(r.class(TokenClass::CacheWrite).per_mtok, None);
    }

    #[test]
    fn the_version_changes_with_the_tables_and_entries() {
        let a = book(&[]).version();
        let b = book(&[("m1", false, rates(Some(1.0), None, None, None))]).version();
        assert_ne!(a, b);
        assert_eq!(a, book(&[]).version());
    }
}
