//! The download thread: at start and about daily it downloads the shared table (and the
//! operator's `replace_url` table), validates each body with [`PriceTable::parse`], lands the
//! accepted ones on the [`PriceBoard`] and keeps them through a [`TableCache`], so a restart
//! prices with the last validated copy before its first download.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::board::PriceBoard;
use super::sources::{DownloadError, Feed, Job, url_digest};
use super::table::PriceTable;
use crate::clock::{Clock, rfc3339_ms};
use crate::http_client::{ClientOptions, HttpClient, Request, RetryPolicy, ThreadSleeper};

/// Whole-download timeout: the shared table is a few megabytes.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest wait between two looks at the clock, so a wall-clock jump is noticed.
const MAX_WAIT: Duration = Duration::from_secs(30);

/// One kept copy: the body as downloaded, when, and from which address (its digest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptTable {
    pub feed: Feed,
    pub url_digest: String,
    pub as_of_ms: i64,
    pub body: Vec<u8>,
}

/// Why the kept copies could not be read or written: the keeping layer's own error.
pub type CacheError = Box<dyn std::error::Error + Send + Sync>;

/// Where accepted downloads are kept across restarts (the database). A failure is logged and
/// the thread goes on: the copies only save the first download after a restart.
pub trait TableCache: Send + Sync {
    fn load(&self) -> Result<Vec<KeptTable>, CacheError>;
    fn save(&self, kept: KeptTable) -> Result<(), CacheError>;
}

/// Stops the thread at its next look.
#[derive(Debug, Clone, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    pub fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    fn stopped(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Puts the kept copies back on `board` (whose settings must be applied, so a copy returns
/// only for the address in effect), then starts the `price-fetch` thread.
pub fn spawn(
    board: PriceBoard,
    clock: Arc<dyn Clock>,
    cache: Arc<dyn TableCache>,
    stop: StopFlag,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    restore(&board, cache.as_ref());
    std::thread::Builder::new()
        .name("price-fetch".into())
        .spawn(move || run(&board, clock, cache.as_ref(), &stop))
}

fn run(board: &PriceBoard, clock: Arc<dyn Clock>, cache: &dyn TableCache, stop: &StopFlag) {
    let client = HttpClient::new(
        ClientOptions {
            timeout: DOWNLOAD_TIMEOUT,
            retry: RetryPolicy {
                max_retries: 0,
                ..RetryPolicy::default()
            },
            ..ClientOptions::new("")
        },
        clock.clone(),
        Arc::new(ThreadSleeper),
    );
    let mut deferred = None;
    while !stop.stopped() {
        log_need(board, &mut deferred);
        let now = clock.now_ms();
        if let Some(job) = board.next_job(now) {
            try_download(board, &client, clock.as_ref(), cache, &job);
            continue;
        }
        let wait = match board.next_due_ms() {
            Some(due) => Duration::from_millis((due - now).clamp(1, i64::MAX) as u64),
            None => MAX_WAIT,
        };
        board.wait_for_change(wait.min(MAX_WAIT));
    }
}

/// Logs, once per change, whether the shared download waits because nothing needs it: a
/// start whose models the other layers price says so in one line and tries nothing.
fn log_need(board: &PriceBoard, last: &mut Option<bool>) {
    let fetched = board.sources_state().fetched;
    let now = (fetched.status != super::sources::SourceStatus::Off).then_some(fetched.deferred);
    if now == *last {
        return;
    }
    match (now, *last) {
        (Some(true), _) => log::info!(
            "price table download not needed: token_rates and the tables in force price every configured model"
        ),
        (Some(false), Some(true)) => log::info!(
            "price table download needed: a configured model is priced by no table in force"
        ),
        _ => {}
    }
    *last = now;
}

/// Puts the kept copies back on the board.
fn restore(board: &PriceBoard, cache: &dyn TableCache) {
    let kept = match cache.load() {
        Ok(k) => k,
        Err(e) => {
            log::warn!(error:% = e; "kept price tables not read");
            return;
        }
    };
    for k in kept {
        match PriceTable::parse(k.feed.layer(), &rfc3339_ms(k.as_of_ms), &k.body) {
            Ok(t) => {
                if board.restore(k.feed, &k.url_digest, Arc::new(t)) {
                    log::info!(source:% = k.feed.as_str(); "kept price table restored");
                }
            }
            Err(e) => log::warn!(
                source:% = k.feed.as_str(),
                error:% = e.to_string();
                "kept price table refused"
            ),
        }
    }
}

fn try_download(
    board: &PriceBoard,
    client: &HttpClient,
    clock: &dyn Clock,
    cache: &dyn TableCache,
    job: &Job,
) {
    let started = clock.now_ms();
    let result = download(client, job, started);
    let now = clock.now_ms();
    let accepted = match &result {
        Ok((table, body)) => {
            log::info!(
                source:% = job.feed.as_str(),
                models:% = table.models.len(),
                version:% = table.version;
                "price table downloaded"
            );
            let kept = KeptTable {
                feed: job.feed,
                url_digest: url_digest(&job.url),
                as_of_ms: started,
                body: body.clone(),
            };
            if let Err(e) = cache.save(kept) {
                log::warn!(source:% = job.feed.as_str(), error:% = e; "price table not kept");
            }
            Ok(Arc::clone(table))
        }
        Err(e) => Err(e.clone()),
    };
    let failed = accepted
        .as_ref()
        .err()
        .map(|e| crate::mask::mask(&e.to_string()));
    board.finish(job, accepted, now);
    if let Some(error) = failed {
        log_failure(board, job.feed, &error);
    }
}

/// A failed try is logged once per streak of failures (an offline machine does not log a
/// line a minute): at INFO while other rates keep pricing, WARN when nothing else prices; the
/// tries after it at DEBUG. The Prices screen and `GET /api/v1/prices` show every failure.
fn log_failure(board: &PriceBoard, feed: Feed, error: &str) {
    let st = board.sources_state();
    let failures = match feed {
        Feed::Fetched => st.fetched.failures,
        Feed::Operator => st.operator.map_or(0, |o| o.failures),
    };
    let level = match (failures, board.current().has_rate_source()) {
        (1, true) => log::Level::Info,
        (1, false) => log::Level::Warn,
        _ => log::Level::Debug,
    };
    log::log!(
        level,
        source:% = feed.as_str(),
        failures:% = failures,
        error:% = error,
        retry:% = "with backoff up to 6 h; the previous rates keep pricing";
        "price table download failed"
    );
}

/// Downloads and validates one table; the error says why it was refused.
fn download(
    client: &HttpClient,
    job: &Job,
    now_ms: i64,
) -> Result<(Arc<PriceTable>, Vec<u8>), DownloadError> {
    if super::address::served_address(&job.url).is_none() {
        return Err(DownloadError::InvalidAddress);
    }
    let resp = client
        .send(Request::get(job.url.trim()))
        .map_err(|e| DownloadError::Transport(e.detail))?;
    if resp.status != 200 {
        return Err(DownloadError::Status(resp.status));
    }
    let table = PriceTable::parse(job.feed.layer(), &rfc3339_ms(now_ms), &resp.body)
        .map_err(|e| DownloadError::Refused(e.to_string()))?;
    Ok((Arc::new(table), resp.body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn client() -> HttpClient {
        HttpClient::new(
            ClientOptions {
                timeout: Duration::from_secs(10),
                retry: RetryPolicy {
                    max_retries: 0,
                    ..RetryPolicy::default()
                },
                ..ClientOptions::new("")
            },
            Arc::new(ManualClock::new(0)),
            Arc::new(ThreadSleeper),
        )
    }

    /// Serves `replies` (status, body) in order on 127.0.0.1, one per request.
    fn serve(replies: Vec<(u16, &'static str)>) -> String {
        let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
        let url = format!("http://{}/t.json", server.server_addr());
        std::thread::spawn(move || {
            for (status, body) in replies {
                let Ok(req) = server.recv() else { return };
                let _ =
                    req.respond(tiny_http::Response::from_string(body).with_status_code(status));
            }
        });
        url
    }

    fn job(url: &str) -> Job {
        Job {
            feed: Feed::Fetched,
            url: url.to_string(),
        }
    }

    #[test]
    fn a_valid_body_is_a_table_dated_at_the_download() {
        let url = serve(vec![(200, r#"{"m": {"input_cost_per_token": 1e-06}}"#)]);
        let (t, body) = download(&client(), &job(&url), 1_790_000_000_000).unwrap();
        assert_eq!(t.layer, crate::pricing::TableLayer::Fetched);
        assert_eq!(t.as_of, "2026-09-21T14:13:20.000Z");
        assert!(t.lookup("m").is_some());
        assert!(!body.is_empty());
    }

    #[test]
    fn a_refused_download_says_why() {
        let url = serve(vec![(500, "down"), (200, "[]")]);
        let e = download(&client(), &job(&url), 0).unwrap_err().to_string();
        assert!(e.starts_with("status 500"), "{e}");
        let e = download(&client(), &job(&url), 0).unwrap_err().to_string();
        assert_eq!(e, "price table is not a JSON object of models");
        assert_eq!(
            download(&client(), &job("ftp://h/x"), 0)
                .unwrap_err()
                .to_string(),
            "invalid address"
        );
    }
}
