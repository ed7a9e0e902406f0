//! `GET /api/v1/prices`: the rates in force per agent kind and model, the layer each comes
//! from, and the state of every price source.

use schemars::JsonSchema;
use serde::Serialize;

use crate::pricing::{RateLayer, Resolved, SourceState, SourceStatus, TableLayer, TokenClass};

use super::opt_ts;

/// A rate layer (`layer` values).
#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PriceLayer {
    KindEntry,
    ModelEntry,
    OperatorTable,
    Fetched,
    Embedded,
}

impl From<RateLayer> for PriceLayer {
    fn from(l: RateLayer) -> Self {
        match l {
            RateLayer::KindEntry => PriceLayer::KindEntry,
            RateLayer::ModelEntry => PriceLayer::ModelEntry,
            RateLayer::OperatorTable => PriceLayer::OperatorTable,
            RateLayer::Fetched => PriceLayer::Fetched,
            RateLayer::Embedded => PriceLayer::Embedded,
        }
    }
}

/// A table layer (`table_in_force.layer`).
#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TableLayerName {
    OperatorTable,
    Fetched,
    Embedded,
}

impl From<TableLayer> for TableLayerName {
    fn from(l: TableLayer) -> Self {
        match l {
            TableLayer::OperatorTable => TableLayerName::OperatorTable,
            TableLayer::Fetched => TableLayerName::Fetched,
            TableLayer::Embedded => TableLayerName::Embedded,
        }
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TableInForceView {
    pub layer: TableLayerName,
    pub as_of: String,
    /// Whole days from `as_of` to `generated_at`, never below 0.
    pub age_days: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TokenRatesCountView {
    pub kind_entries: usize,
    pub model_entries: usize,
    pub version: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SourceStatusName {
    Off,
    NotLoaded,
    Loaded,
    Failing,
}

#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
pub enum OffBy {
    #[serde(rename = "SORTIE_PRICE_TABLE_FETCH")]
    Env,
    #[serde(rename = "price_table.fetch")]
    Setting,
}

/// One price source.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PriceSourceView {
    pub status: SourceStatusName,
    pub in_force: bool,
    pub off_by: Option<OffBy>,
    pub file: Option<String>,
    pub address: Option<String>,
    pub version: Option<String>,
    pub as_of: Option<String>,
    pub models: Option<usize>,
    pub next_try_at: Option<String>,
    pub failures: u32,
    pub failed_at: Option<String>,
    pub error: Option<String>,
    /// True on `fetched` while the download is on but not tried because `token_rates` and
    /// the tables in force price every model the workflow names; false otherwise. An addition
    /// of this build.
    pub deferred: bool,
}

impl PriceSourceView {
    /// `mask_error` cuts paths and secrets out of an error text.
    pub fn build(s: &SourceState, mask_error: &dyn Fn(&str) -> String) -> PriceSourceView {
        PriceSourceView {
            status: match s.status {
                SourceStatus::Off => SourceStatusName::Off,
                SourceStatus::NotLoaded => SourceStatusName::NotLoaded,
                SourceStatus::Loaded => SourceStatusName::Loaded,
                SourceStatus::Failing => SourceStatusName::Failing,
            },
            in_force: s.in_force,
            off_by: s.off_by.map(|b| match b {
                crate::pricing::FetchOffBy::Env => OffBy::Env,
                crate::pricing::FetchOffBy::Setting => OffBy::Setting,
            }),
            file: s.file.clone().filter(|f| !f.is_empty()),
            address: s.address.clone(),
            version: s.version.clone(),
            as_of: s.as_of.clone().filter(|a| !a.is_empty()),
            models: s.models,
            next_try_at: opt_ts(s.next_try_at_ms),
            failures: s.failures,
            failed_at: opt_ts(s.failed_at_ms),
            error: s.error.as_deref().map(mask_error).filter(|e| !e.is_empty()),
            deferred: s.deferred,
        }
    }
}

/// One token class's rate.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ClassRateView {
    pub per_mtok: Option<f64>,
    pub layer: Option<PriceLayer>,
    pub from_input: bool,
}

#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ClassName {
    Input,
    Output,
    CacheRead,
    CacheWrite,
}

impl From<TokenClass> for ClassName {
    fn from(c: TokenClass) -> Self {
        match c {
            TokenClass::Input => ClassName::Input,
            TokenClass::Output => ClassName::Output,
            TokenClass::CacheRead => ClassName::CacheRead,
            TokenClass::CacheWrite => ClassName::CacheWrite,
        }
    }
}

/// What a run of the model records under the rates in force.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RowCostStatus {
    Estimated,
    Partial,
    Unpriced,
}

/// One agent kind and model.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PriceModelView {
    pub agent_kind: String,
    pub model: String,
    pub table_key: Option<String>,
    pub layer: Option<PriceLayer>,
    pub entry_key: Option<String>,
    pub input: ClassRateView,
    pub output: ClassRateView,
    pub cache_read: ClassRateView,
    pub cache_write: ClassRateView,
    pub cost_status: RowCostStatus,
    pub unrated_classes: Vec<ClassName>,
    pub last_used_at: Option<String>,
    pub runs: i64,
}

impl PriceModelView {
    pub fn build(
        agent_kind: &str,
        model: &str,
        table_key: Option<String>,
        r: &Resolved,
        last_used_at: Option<String>,
        runs: i64,
    ) -> PriceModelView {
        let class = |c: TokenClass| {
            let cr = r.class(c);
            ClassRateView {
                per_mtok: cr.per_mtok,
                layer: cr.layer.map(PriceLayer::from),
                from_input: cr.from_input,
            }
        };
        let unrated: Vec<ClassName> = TokenClass::ALL
            .into_iter()
            .filter(|c| r.class(*c).per_mtok.is_none())
            .map(ClassName::from)
            .collect();
        let cost_status = if r.incomplete_kind_entry || unrated.len() == TokenClass::ALL.len() {
            RowCostStatus::Unpriced
        } else if unrated.is_empty() {
            RowCostStatus::Estimated
        } else {
            RowCostStatus::Partial
        };
        PriceModelView {
            agent_kind: agent_kind.to_string(),
            model: model.to_string(),
            table_key,
            layer: r.layer.map(PriceLayer::from),
            entry_key: r.entry_key.clone(),
            input: class(TokenClass::Input),
            output: class(TokenClass::Output),
            cache_read: class(TokenClass::CacheRead),
            cache_write: class(TokenClass::CacheWrite),
            cost_status,
            unrated_classes: unrated,
            last_used_at,
            runs,
        }
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "Prices")]
pub struct PricesDoc {
    pub generated_at: String,
    pub table_in_force: Option<TableInForceView>,
    pub token_rates: TokenRatesCountView,
    pub operator: Option<PriceSourceView>,
    pub fetched: PriceSourceView,
    pub embedded: PriceSourceView,
    pub models: Vec<PriceModelView>,
}
