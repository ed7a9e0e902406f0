//! Token classes and a set of per-class rates.

use serde::Serialize;

/// A class of tokens a provider bills at its own rate, in the order the API lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenClass {
    Input,
    Output,
    CacheRead,
    CacheWrite,
}

impl TokenClass {
    pub const ALL: [TokenClass; 4] = [
        TokenClass::Input,
        TokenClass::Output,
        TokenClass::CacheRead,
        TokenClass::CacheWrite,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TokenClass::Input => "input",
            TokenClass::Output => "output",
            TokenClass::CacheRead => "cache_read",
            TokenClass::CacheWrite => "cache_write",
        }
    }
}

/// Rates in USD per million tokens, one per class; `None` is "not rated", never zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ClassRates {
    pub input_per_mtok: Option<f64>,
    pub output_per_mtok: Option<f64>,
    pub cache_read_per_mtok: Option<f64>,
    pub cache_write_per_mtok: Option<f64>,
}

impl ClassRates {
    pub fn get(&self, class: TokenClass) -> Option<f64> {
        match class {
            TokenClass::Input => self.input_per_mtok,
            TokenClass::Output => self.output_per_mtok,
            TokenClass::CacheRead => self.cache_read_per_mtok,
            TokenClass::CacheWrite => self.cache_write_per_mtok,
        }
    }

    pub fn set(&mut self, class: TokenClass, rate: Option<f64>) {
        let slot = match class {
            TokenClass::Input => &mut self.input_per_mtok,
            TokenClass::Output => &mut self.output_per_mtok,
            TokenClass::CacheRead => &mut self.cache_read_per_mtok,
            TokenClass::CacheWrite => &mut self.cache_write_per_mtok,
        };
        *slot = rate;
    }

    /// Whether any class has a rate.
    pub fn any(&self) -> bool {
        TokenClass::ALL.iter().any(|c| self.get(*c).is_some())
    }
}
