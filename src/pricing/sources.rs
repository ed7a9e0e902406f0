//! The price table sources and which tables they put in force: the operator's own table (a
//! file loaded with the workflow, or a download), the shared table downloaded about daily, and
//! the table built into the binary. Pure state: the download thread ([`super::fetch`]) asks
//! for the next due try and reports its result; every time is an input, so a test drives the
//! schedule without a clock.

use std::collections::BTreeMap;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::address::served_address;
use super::book::RateBook;
use super::class::TokenClass;
use super::embedded::embedded;
use super::entries::TokenRates;
use super::settings::{FetchOffBy, ModelNeed, PriceTableSettings};
use super::table::{PriceTable, TableLayer};

/// An accepted download is tried again after a day.
pub const REFRESH_MS: i64 = 24 * 60 * 60 * 1000;
/// The first retry after a failed try; it doubles per consecutive failure up to [`MAX_BACKOFF_MS`].
pub const FIRST_BACKOFF_MS: i64 = 60 * 1000;
pub const MAX_BACKOFF_MS: i64 = 6 * 60 * 60 * 1000;

/// A downloaded source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Feed {
    /// `price_table.replace_url`.
    Operator,
    /// `price_table.fetch_url`.
    Fetched,
}

impl Feed {
    pub fn layer(self) -> TableLayer {
        match self {
            Feed::Operator => TableLayer::OperatorTable,
            Feed::Fetched => TableLayer::Fetched,
        }
    }

    /// The key a kept copy is stored under.
    pub fn as_str(self) -> &'static str {
        match self {
            Feed::Operator => "operator",
            Feed::Fetched => "fetched",
        }
    }
}

/// `sha256:<hex>` of a download setting: a kept copy returns only for the address it came
/// from, and the address itself (which may carry a credential) is never stored.
pub fn url_digest(url: &str) -> String {
    format!(
        "sha256:{}",
        super::entries::hex(&Sha256::digest(url.trim().as_bytes()))
    )
}

/// The API's source `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceStatus {
    Off,
    NotLoaded,
    Loaded,
    Failing,
}

impl SourceStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceStatus::Off => "off",
            SourceStatus::NotLoaded => "not_loaded",
            SourceStatus::Loaded => "loaded",
            SourceStatus::Failing => "failing",
        }
    }
}

/// Why a download try was refused, as the Prices screen and `GET /api/v1/prices` show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownloadError {
    /// The configured address is not one a download may go to.
    InvalidAddress,
    /// The request failed; the HTTP layer's detail (masked there).
    Transport(String),
    /// An answer other than 200.
    Status(u16),
    /// The body is not a usable price table: why.
    Refused(String),
}

impl std::fmt::Display for DownloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DownloadError::InvalidAddress => f.write_str("invalid address"),
            DownloadError::Transport(detail) | DownloadError::Refused(detail) => {
                f.write_str(detail)
            }
            DownloadError::Status(code) => write!(f, "status {code}"),
        }
    }
}

impl std::error::Error for DownloadError {}

/// One source as the API states it (errors unmasked: the HTTP layer masks them).
#[derive(Debug, Clone, PartialEq)]
pub struct SourceState {
    pub status: SourceStatus,
    pub in_force: bool,
    pub off_by: Option<FetchOffBy>,
    pub file: Option<String>,
    pub address: Option<String>,
    pub version: Option<String>,
    pub as_of: Option<String>,
    pub models: Option<usize>,
    pub next_try_at_ms: Option<i64>,
    pub failures: u32,
    pub failed_at_ms: Option<i64>,
    pub error: Option<String>,
    /// The shared download is on but not tried: `token_rates` and the other tables in force
    /// price every model the workflow names.
    pub deferred: bool,
}

impl SourceState {
    fn empty(status: SourceStatus) -> SourceState {
        SourceState {
            status,
            in_force: false,
            off_by: None,
            file: None,
            address: None,
            version: None,
            as_of: None,
            models: None,
            next_try_at_ms: None,
            failures: 0,
            failed_at_ms: None,
            error: None,
            deferred: false,
        }
    }

    fn with_table(mut self, t: &PriceTable) -> SourceState {
        self.version = Some(t.version.clone());
        self.as_of = Some(t.as_of.clone());
        self.models = Some(t.models.len());
        self
    }
}

/// Every source's state.
#[derive(Debug, Clone, PartialEq)]
pub struct SourcesState {
    /// `None` unless `replace_file` or `replace_url` is set.
    pub operator: Option<SourceState>,
    pub fetched: SourceState,
    pub embedded: SourceState,
}

/// A download try the thread is to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub feed: Feed,
    pub url: String,
}

#[derive(Debug, Clone, Default)]
struct Download {
    url: String,
    table: Option<Arc<PriceTable>>,
    failures: u32,
    failed_at_ms: Option<i64>,
    error: Option<String>,
    /// `None` while a try is due or running.
    next_try_at_ms: Option<i64>,
    running: bool,
}

impl Download {
    fn new(url: &str) -> Download {
        Download {
            url: url.to_string(),
            ..Download::default()
        }
    }

    fn state(&self, in_force: bool) -> SourceState {
        let status = match (self.failures, &self.table) {
            (f, _) if f > 0 => SourceStatus::Failing,
            (_, Some(_)) => SourceStatus::Loaded,
            _ => SourceStatus::NotLoaded,
        };
        let failing = status == SourceStatus::Failing;
        let mut s = SourceState {
            in_force,
            address: served_address(&self.url),
            next_try_at_ms: self.next_try_at_ms.filter(|_| !self.running),
            failures: self.failures,
            failed_at_ms: self.failed_at_ms.filter(|_| failing),
            error: self.error.clone().filter(|_| failing),
            ..SourceState::empty(status)
        };
        if let Some(t) = &self.table {
            s = s.with_table(t);
        }
        s
    }

    fn due(&self, now_ms: i64) -> bool {
        !self.running && self.next_try_at_ms.is_none_or(|t| t <= now_ms)
    }
}

/// The sources, their settings and their tables.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    settings: PriceTableSettings,
    fetched: Download,
    operator: Option<Download>,
    /// The `replace_file` table in force, its `as_of` set.
    file_table: Option<Arc<PriceTable>>,
    /// When this process first loaded each `replace_file` content, by version.
    file_seen: BTreeMap<String, String>,
    /// The latest workflow load failed on `replace_file`: (when, error).
    file_failure: Option<(i64, String)>,
    /// The `token_rates` entries in force, which decide with the tables whether the shared
    /// download is needed.
    token_rates: TokenRates,
}

impl Sources {
    pub fn new(settings: PriceTableSettings, now_ms: i64) -> Sources {
        let mut s = Sources {
            fetched: Download::new(&settings.fetch_url),
            ..Sources::default()
        };
        s.apply(settings, now_ms);
        s
    }

    /// Applies the settings of a successful workflow load. A changed address starts its
    /// download afresh (a table from another address is not that address's table).
    pub fn apply(&mut self, settings: PriceTableSettings, now_ms: i64) {
        if self.fetched.url != settings.fetch_url {
            self.fetched = Download::new(&settings.fetch_url);
        }
        self.operator = match (&settings.replace_url, self.operator.take()) {
            (Some(url), Some(d)) if &d.url == url => Some(d),
            (Some(url), _) => Some(Download::new(url)),
            (None, _) => None,
        };
        self.file_table = settings.replace_file.as_ref().map(|f| {
            let as_of = self
                .file_seen
                .entry(f.table.version.clone())
                .or_insert_with(|| crate::clock::rfc3339_ms(now_ms))
                .clone();
            Arc::new(PriceTable {
                as_of,
                ..(*f.table).clone()
            })
        });
        self.file_failure = None;
        self.settings = settings;
    }

    /// The `token_rates` entries in force changed.
    pub fn set_token_rates(&mut self, rates: TokenRates) {
        self.token_rates = rates;
    }

    /// Whether the shared table is needed: some model the workflow names (or a kind's default
    /// model) is priced neither by `token_rates` nor by the other tables in force. Sortie does
    /// not try the download while it is not needed, so an offline start with the built-in
    /// table covering its models tries nothing and logs no failure.
    pub fn download_needed(&self) -> bool {
        let Some(needs) = &self.settings.needs else {
            return true;
        };
        let others: Vec<Arc<PriceTable>> = match self.operator_table() {
            Some(t) => vec![Arc::clone(t)],
            None => self.embedded_table().into_iter().collect(),
        };
        let book = RateBook::new(self.token_rates.clone(), others);
        needs.iter().any(|n| !priced(&book, n))
    }

    /// A workflow load failed on `price_table.replace_file`; the settings in effect stay.
    pub fn file_load_failed(&mut self, now_ms: i64, error: String) {
        self.file_failure = Some((now_ms, error));
    }

    fn operator_table(&self) -> Option<&Arc<PriceTable>> {
        self.file_table
            .as_ref()
            .or_else(|| self.operator.as_ref().and_then(|d| d.table.as_ref()))
    }

    fn embedded_table(&self) -> Option<Arc<PriceTable>> {
        self.settings
            .embedded
            .then(|| embedded().map(|(_, t)| Arc::clone(t)))
            .flatten()
    }

    /// The tables that price runs, highest precedence first: the operator's table alone once
    /// it holds one, else the shared download (while on) over the built-in table (while on).
    pub fn tables(&self) -> Vec<Arc<PriceTable>> {
        if let Some(t) = self.operator_table() {
            return vec![Arc::clone(t)];
        }
        let fetched = self.fetched.table.clone().filter(|_| self.settings.fetch());
        fetched.into_iter().chain(self.embedded_table()).collect()
    }

    /// The feeds that download under the settings in effect.
    fn feeds(&self) -> Vec<Feed> {
        let mut out = Vec::new();
        if self.operator.is_some() {
            out.push(Feed::Operator);
        }
        if self.settings.fetch() && self.download_needed() {
            out.push(Feed::Fetched);
        }
        out
    }

    fn download_mut(&mut self, feed: Feed) -> Option<&mut Download> {
        match feed {
            Feed::Operator => self.operator.as_mut(),
            Feed::Fetched => Some(&mut self.fetched),
        }
    }

    fn download(&self, feed: Feed) -> Option<&Download> {
        match feed {
            Feed::Operator => self.operator.as_ref(),
            Feed::Fetched => Some(&self.fetched),
        }
    }

    /// The next try that is due, marked running.
    pub fn next_job(&mut self, now_ms: i64) -> Option<Job> {
        for feed in self.feeds() {
            let d = self.download_mut(feed)?;
            if d.due(now_ms) {
                d.running = true;
                d.next_try_at_ms = None;
                return Some(Job {
                    feed,
                    url: d.url.clone(),
                });
            }
        }
        None
    }

    /// When the next try falls due; `None` when no feed downloads.
    pub fn next_due_ms(&self) -> Option<i64> {
        self.feeds()
            .into_iter()
            .filter_map(|f| self.download(f))
            .filter(|d| !d.running)
            .map(|d| d.next_try_at_ms.unwrap_or(i64::MIN))
            .min()
    }

    /// Records a try's result; `false` when the settings moved to another address meanwhile
    /// (the result is dropped).
    pub fn finish(
        &mut self,
        job: &Job,
        result: Result<Arc<PriceTable>, DownloadError>,
        now_ms: i64,
    ) -> bool {
        let Some(d) = self.download_mut(job.feed).filter(|d| d.url == job.url) else {
            return false;
        };
        d.running = false;
        match result {
            Ok(t) => {
                d.table = Some(t);
                d.failures = 0;
                d.failed_at_ms = None;
                d.error = None;
                d.next_try_at_ms = Some(now_ms.saturating_add(REFRESH_MS));
            }
            Err(e) => {
                d.failures = d.failures.saturating_add(1);
                d.failed_at_ms = Some(now_ms);
                d.error = Some(e.to_string());
                d.next_try_at_ms = Some(now_ms.saturating_add(backoff_ms(d.failures)));
            }
        }
        true
    }

    /// Puts back the copy kept from an earlier process, when it came from the address in
    /// effect and no newer table is held.
    pub fn restore(&mut self, feed: Feed, digest: &str, table: Arc<PriceTable>) -> bool {
        match self.download_mut(feed) {
            Some(d) if d.table.is_none() && url_digest(&d.url) == digest => {
                d.table = Some(table);
                true
            }
            _ => false,
        }
    }

    /// Every source's state.
    pub fn state(&self) -> SourcesState {
        let operator_in_force = self.operator_table().is_some();
        SourcesState {
            operator: self.operator_state(),
            fetched: self.fetched_state(operator_in_force),
            embedded: self.embedded_state(operator_in_force),
        }
    }

    fn operator_state(&self) -> Option<SourceState> {
        if let Some(f) = &self.settings.replace_file {
            let mut s = match (&self.file_failure, &self.file_table) {
                (Some((at, e)), _) => SourceState {
                    failed_at_ms: Some(*at),
                    error: Some(e.clone()),
                    ..SourceState::empty(SourceStatus::Failing)
                },
                (None, Some(_)) => SourceState::empty(SourceStatus::Loaded),
                (None, None) => SourceState::empty(SourceStatus::NotLoaded),
            };
            if let Some(t) = &self.file_table {
                s = s.with_table(t);
                s.in_force = true;
            }
            s.file = Some(f.as_written.clone());
            return Some(s);
        }
        self.operator.as_ref().map(|d| d.state(d.table.is_some()))
    }

    fn fetched_state(&self, operator_in_force: bool) -> SourceState {
        match self.settings.fetch_off_by {
            Some(by) => SourceState {
                off_by: Some(by),
                address: served_address(&self.fetched.url),
                ..SourceState::empty(SourceStatus::Off)
            },
            None => SourceState {
                deferred: !self.download_needed(),
                ..self
                    .fetched
                    .state(!operator_in_force && self.fetched.table.is_some())
            },
        }
    }

    fn embedded_state(&self, operator_in_force: bool) -> SourceState {
        let Some((meta, table)) = embedded() else {
            let status = if self.settings.embedded {
                SourceStatus::NotLoaded
            } else {
                SourceStatus::Off
            };
            return SourceState::empty(status);
        };
        let status = if self.settings.embedded {
            SourceStatus::Loaded
        } else {
            SourceStatus::Off
        };
        SourceState {
            in_force: self.settings.embedded && !operator_in_force,
            version: Some(meta.revision.clone()),
            as_of: Some(meta.as_of.clone()),
            models: Some(table.models.len()),
            ..SourceState::empty(status)
        }
    }
}

/// Whether `book` prices the input and the output of `need` (a kind's default model only
/// through a kind entry: no table can be asked about a model before a run names it).
fn priced(book: &RateBook, need: &ModelNeed) -> bool {
    let r = book.resolve(&need.agent_kind, need.model.as_deref().unwrap_or(""));
    let has = |c: TokenClass| r.class(c).per_mtok.is_some();
    let named_or_kind = need.model.is_some() || r.layer == Some(super::book::RateLayer::KindEntry);
    named_or_kind && has(TokenClass::Input) && has(TokenClass::Output)
}

/// The wait before the next try after `failures` consecutive failed ones.
pub fn backoff_ms(failures: u32) -> i64 {
    let shift = failures.saturating_sub(1).min(20);
    FIRST_BACKOFF_MS
        .saturating_mul(1i64 << shift)
        .min(MAX_BACKOFF_MS)
}

#[cfg(test)]
mod tests;
