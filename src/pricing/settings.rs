//! The `price_table` settings as the table sources apply them (built from WORKFLOW.md by
//! `config`): which layers are on, where the downloads come from, the operator's own table.

use std::sync::Arc;

use super::table::PriceTable;

/// The shared table's default address.
pub const DEFAULT_FETCH_URL: &str =
    "https://raw.githubusercontent.com/BerriAI/litellm/main/model_prices_and_context_window.json";

/// The environment variable that turns the shared table's download off.
pub const FETCH_ENV: &str = "SORTIE_PRICE_TABLE_FETCH";

/// What turned the shared download off (the API's `off_by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchOffBy {
    Env,
    Setting,
}

impl FetchOffBy {
    pub fn as_str(self) -> &'static str {
        match self {
            FetchOffBy::Env => FETCH_ENV,
            FetchOffBy::Setting => "price_table.fetch",
        }
    }
}

/// `price_table.replace_file`, loaded with the workflow.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplaceFile {
    /// The setting after `$VAR` resolution, before `~` expansion and path joining.
    pub as_written: String,
    /// The parsed table; its `as_of` is set by the sources (when this process first read it).
    pub table: Arc<PriceTable>,
}

/// A model a workflow can run: an agent kind and the model its settings name (`None`: the
/// runtime's default, which no table can be asked about before a run names it).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ModelNeed {
    pub agent_kind: String,
    pub model: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PriceTableSettings {
    /// `None` while the shared download is on.
    pub fetch_off_by: Option<FetchOffBy>,
    pub fetch_url: String,
    pub embedded: bool,
    pub replace_file: Option<ReplaceFile>,
    pub replace_url: Option<String>,
    /// What the workflow can run, filled in by the configuration; `None` (not known): the
    /// shared table is downloaded whatever the other layers price.
    pub needs: Option<Vec<ModelNeed>>,
}

impl Default for PriceTableSettings {
    fn default() -> Self {
        PriceTableSettings {
            fetch_off_by: None,
            fetch_url: DEFAULT_FETCH_URL.to_string(),
            embedded: true,
            replace_file: None,
            replace_url: None,
            needs: None,
        }
    }
}

impl PriceTableSettings {
    pub fn fetch(&self) -> bool {
        self.fetch_off_by.is_none()
    }
}
