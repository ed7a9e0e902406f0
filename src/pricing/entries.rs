//! The operator's `token_rates` entries: rates keyed by agent kind or by model name.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::class::{ClassRates, TokenClass};

/// One `token_rates` entry, as validated by the configuration (an invalid rate is `None`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RateEntry {
    pub rates: ClassRates,
    /// The key names a registered agent kind: the entry prices every model of that kind.
    pub per_kind: bool,
}

impl RateEntry {
    /// Whether the entry prices on its own: input and output for a kind entry (its unset cache
    /// rates take the input rate), all four rates for a model entry.
    pub fn complete(&self) -> bool {
        let r = &self.rates;
        if self.per_kind {
            r.input_per_mtok.is_some() && r.output_per_mtok.is_some()
        } else {
            TokenClass::ALL.iter().all(|c| r.get(*c).is_some())
        }
    }
}

/// Every `token_rates` entry in force, by key as written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TokenRates {
    pub entries: BTreeMap<String, RateEntry>,
}

impl TokenRates {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn kind_entries(&self) -> usize {
        self.entries.values().filter(|e| e.per_kind).count()
    }

    pub fn model_entries(&self) -> usize {
        self.entries.values().filter(|e| !e.per_kind).count()
    }

    /// `sha256:<hex>` of the entries (key, scope and each rate), `None` when there are none.
    /// Equal entries give an equal digest whatever order they were written in.
    pub fn version(&self) -> Option<String> {
        if self.entries.is_empty() {
            return None;
        }
        let mut h = Sha256::new();
        for (key, e) in &self.entries {
            h.update(key.as_bytes());
            h.update([0, u8::from(e.per_kind)]);
            for class in TokenClass::ALL {
                match e.rates.get(class) {
                    Some(r) => h.update(r.to_bits().to_be_bytes()),
                    None => h.update(b"-"),
                }
            }
        }
        Some(format!("sha256:{}", hex(&h.finalize())))
    }
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(per_kind: bool, i: Option<f64>, o: Option<f64>) -> RateEntry {
        RateEntry {
            rates: ClassRates {
                input_per_mtok: i,
                output_per_mtok: o,
                ..ClassRates::default()
            },
            per_kind,
        }
    }

    #[test]
    fn a_kind_entry_is_complete_with_input_and_output_a_model_entry_needs_all_four() {
        assert!(entry(true, Some(3.0), Some(15.0)).complete());
        assert!(!entry(true, Some(3.0), None).complete());
        assert!(!entry(false, Some(3.0), Some(15.0)).complete());
    }

    #[test]
    fn the_version_follows_the_entries_and_is_absent_without_any() {
        let mut t = TokenRates::default();
        assert_eq!(t.version(), None);
        t.entries
            .insert("claude-code".into(), entry(true, Some(3.0), Some(15.0)));
        let v1 = t.version().unwrap();
        assert!(v1.starts_with("sha256:") && v1.len() == 7 + 64, "{v1}");
        t.entries
            .insert("claude-code".into(), entry(true, Some(3.0), Some(16.0)));
        assert_ne!(t.version().unwrap(), v1);
    }
}
