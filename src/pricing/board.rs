//! The rates in force, shared between the threads that change them (the workflow loader
//! replaces the `token_rates` entries, the table sources replace the tables) and the threads
//! that price with them (the orchestrator at a run's end and for live estimates, the HTTP
//! server). A reader takes an `Arc<RateBook>` snapshot and prices without holding a lock.

use std::sync::{Arc, RwLock};

use super::book::RateBook;
use super::entries::TokenRates;
use super::table::PriceTable;

#[derive(Debug, Clone, Default)]
pub struct PriceBoard {
    inner: Arc<RwLock<Arc<RateBook>>>,
}

impl PriceBoard {
    pub fn new(book: RateBook) -> PriceBoard {
        PriceBoard {
            inner: Arc::new(RwLock::new(Arc::new(book))),
        }
    }

    /// The book in force now.
    pub fn current(&self) -> Arc<RateBook> {
        match self.inner.read() {
            Ok(g) => Arc::clone(&g),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Replaces the `token_rates` entries, keeping the tables.
    pub fn set_token_rates(&self, token_rates: TokenRates) {
        self.update(|b| RateBook::new(token_rates, b.tables.clone()));
    }

    /// Replaces the tables in force, keeping the entries.
    pub fn set_tables(&self, tables: Vec<Arc<PriceTable>>) {
        self.update(|b| RateBook::new(b.token_rates.clone(), tables));
    }

    fn update(&self, f: impl FnOnce(&RateBook) -> RateBook) {
        let mut g = match self.inner.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let next = f(&g);
        *g = Arc::new(next);
    }
}
