//! The rates in force, shared between the threads that change them (the workflow loader
//! replaces the `token_rates` entries and the `price_table` settings, the download thread
//! lands tables) and the threads that price with them (the orchestrator at a run's end and for
//! live estimates, the HTTP server). A reader takes an `Arc<RateBook>` snapshot and prices
//! without holding a lock. The table sources live here too, so the tables in force always
//! follow the sources' state.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use super::book::RateBook;
use super::entries::TokenRates;
use super::settings::PriceTableSettings;
use super::sources::{DownloadError, Feed, Job, Sources, SourcesState};
use super::table::PriceTable;

#[derive(Debug, Clone)]
pub struct PriceBoard {
    inner: Arc<RwLock<Arc<RateBook>>>,
    sources: Arc<(Mutex<Sources>, Condvar)>,
}

impl Default for PriceBoard {
    fn default() -> Self {
        PriceBoard::new(RateBook::default())
    }
}

impl PriceBoard {
    /// A board with `book` in force; its sources hold the default settings until the first
    /// [`apply_settings`](Self::apply_settings).
    pub fn new(book: RateBook) -> PriceBoard {
        PriceBoard {
            inner: Arc::new(RwLock::new(Arc::new(book))),
            sources: Arc::new((
                Mutex::new(Sources::new(PriceTableSettings::default(), 0)),
                Condvar::new(),
            )),
        }
    }

    /// The book in force now.
    pub fn current(&self) -> Arc<RateBook> {
        match self.inner.read() {
            Ok(g) => Arc::clone(&g),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Replaces the `token_rates` entries, keeping the tables; the sources learn them too,
    /// since they decide whether the shared download is needed.
    pub fn set_token_rates(&self, token_rates: TokenRates) {
        self.with_sources(|s| s.set_token_rates(token_rates.clone()));
        self.update(|b| RateBook::new(token_rates, b.tables.clone()));
    }

    /// Whether the shared table's download is needed (see [`Sources::download_needed`]).
    pub fn download_needed(&self) -> bool {
        self.lock_sources().download_needed()
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

    fn lock_sources(&self) -> MutexGuard<'_, Sources> {
        self.sources.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes the sources, then puts their tables in force and wakes the download thread.
    fn with_sources<T>(&self, f: impl FnOnce(&mut Sources) -> T) -> T {
        let mut s = self.lock_sources();
        let out = f(&mut s);
        self.set_tables(s.tables());
        drop(s);
        self.sources.1.notify_all();
        out
    }

    /// Applies the `price_table` settings of a successful workflow load.
    pub fn apply_settings(&self, settings: PriceTableSettings, now_ms: i64) {
        self.with_sources(|s| s.apply(settings, now_ms));
    }

    /// A workflow load failed on `price_table.replace_file`.
    pub fn file_load_failed(&self, now_ms: i64, error: String) {
        self.with_sources(|s| s.file_load_failed(now_ms, error));
    }

    /// Puts back a copy kept across a restart (see [`Sources::restore`]).
    pub fn restore(&self, feed: Feed, url_digest: &str, table: Arc<PriceTable>) -> bool {
        self.with_sources(|s| s.restore(feed, url_digest, table))
    }

    /// The next due download try, marked running.
    pub fn next_job(&self, now_ms: i64) -> Option<Job> {
        self.lock_sources().next_job(now_ms)
    }

    /// Records a try's result; `false` when it was dropped.
    pub fn finish(
        &self,
        job: &Job,
        result: Result<Arc<PriceTable>, DownloadError>,
        now_ms: i64,
    ) -> bool {
        self.with_sources(|s| s.finish(job, result, now_ms))
    }

    /// When the next try falls due.
    pub fn next_due_ms(&self) -> Option<i64> {
        self.lock_sources().next_due_ms()
    }

    /// Waits at most `timeout` for a change of the sources (a reload, a landed table).
    pub fn wait_for_change(&self, timeout: Duration) {
        let g = self.lock_sources();
        let _ = self.sources.1.wait_timeout(g, timeout);
    }

    /// Every source's state now.
    pub fn sources_state(&self) -> SourcesState {
        self.lock_sources().state()
    }
}
