//! The price table built into the binary: the chat models of the providers the agent kinds run,
//! taken from a pinned LiteLLM release by `scripts/update-embedded-prices`. It is the lowest
//! table layer, so a fresh install prices runs before any download.

use std::sync::{Arc, OnceLock};

use serde::Deserialize;

use super::table::{PriceTable, TableLayer};

const BODY: &[u8] = include_bytes!("../../assets/prices/embedded.json");
const METADATA: &[u8] = include_bytes!("../../assets/prices/metadata.json");

/// Where the built-in table comes from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct EmbeddedMeta {
    /// The pinned upstream revision (`litellm-<version>`).
    pub revision: String,
    /// The date of the revision's prices, RFC 3339.
    pub as_of: String,
}

/// The built-in table and its metadata, parsed once; `None` when the build carries a table
/// that does not parse (logged once), so pricing falls back to the other layers.
pub fn embedded() -> Option<&'static (EmbeddedMeta, Arc<PriceTable>)> {
    static TABLE: OnceLock<Option<(EmbeddedMeta, Arc<PriceTable>)>> = OnceLock::new();
    TABLE
        .get_or_init(|| match parse() {
            Ok(t) => Some(t),
            Err(e) => {
                log::error!(error:% = e; "built-in price table not loaded");
                None
            }
        })
        .as_ref()
}

/// Why the built-in table did not load (a build defect: both parts are compiled in).
#[derive(Debug)]
enum EmbeddedError {
    Metadata(serde_json::Error),
    Table(super::table::TableError),
}

impl std::fmt::Display for EmbeddedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EmbeddedError::Metadata(e) => write!(f, "{e}"),
            EmbeddedError::Table(e) => write!(f, "{e}"),
        }
    }
}

fn parse() -> Result<(EmbeddedMeta, Arc<PriceTable>), EmbeddedError> {
    let meta: EmbeddedMeta = serde_json::from_slice(METADATA).map_err(EmbeddedError::Metadata)?;
    let table =
        PriceTable::parse(TableLayer::Embedded, &meta.as_of, BODY).map_err(EmbeddedError::Table)?;
    Ok((meta, Arc::new(table)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pricing::TokenClass;

    #[test]
    fn the_built_in_table_parses_and_prices_a_known_model() {
        let (meta, table) = embedded().unwrap();
        assert!(meta.revision.starts_with("litellm-"), "{}", meta.revision);
        assert!(
            meta.as_of.parse::<jiff::Timestamp>().is_ok(),
            "{}",
            meta.as_of
        );
        assert_eq!(table.layer, TableLayer::Embedded);
        let r = table.lookup("claude-sonnet-4-5").unwrap();
        assert_eq!(r.get(TokenClass::Input), Some(3.0));
        assert_eq!(r.get(TokenClass::Output), Some(15.0));
        assert!(table.lookup("gpt-5").is_some());
        assert!(table.models.len() > 100);
    }
}
