//! The cost model: which rate prices each token class of a model, and what a model's part of
//! a session's spend, and a whole run, cost under those rates.
//!
//! Rates come in layers, highest first (the seed's `token_rates` and `price_table`):
//! a `token_rates` entry keyed by agent kind ([`RateLayer::KindEntry`]), one keyed by model
//! ([`RateLayer::ModelEntry`], whose unset classes fall through to the table that lists the
//! model), then the price tables in force, first listing wins: an operator's own table, the
//! downloaded shared table, the table built into the binary. A [`RateBook`] holds one such
//! set; pricing with it is pure, so a run priced when it ends keeps that figure for good.
//!
//! All rates are US dollars per million tokens. Token figures follow
//! [`TokenUsage`](crate::agent::TokenUsage): cache reads and cache writes are disjoint parts
//! of `input_tokens`.

mod address;
mod board;
mod book;
mod class;
mod cost;
mod embedded;
mod entries;
pub mod fetch;
mod issue;
pub mod settings;
pub mod sources;
mod table;

pub use address::served_address;
pub use board::PriceBoard;
pub use book::{ClassRate, RateBook, RateLayer, Resolved};
pub use class::{ClassRates, TokenClass};
pub use cost::{AgentAmount, CostStatus, PartPrice, PriceSource, RunPrice, UsageCompleteness};
pub use embedded::{EmbeddedMeta, embedded};
pub use entries::{RateEntry, TokenRates};
pub use issue::IssueCostParts;
pub use settings::{FetchOffBy, ModelNeed, PriceTableSettings, ReplaceFile};
pub use sources::{Feed, SourceState, SourceStatus, SourcesState};
pub use table::{PriceTable, TableError, TableLayer};
