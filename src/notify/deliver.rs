//! A destination's thread: takes notices from its queue in order, waits for the rate limit,
//! posts each with a deadline and retries a failed post with backoff. A notice that still
//! fails marks the destination failing ([`super::status::failed`]); the next one is tried all
//! the same, and its success clears the mark.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::payload::{self, Payload};
use super::queue::Queue;
use super::rate::Bucket;
use super::status;
use crate::clock::{Clock, SystemClock};
use crate::config::notifications::Destination;

/// One request's deadline, connection included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Retries after the first attempt.
pub const RETRIES: u32 = 3;
/// The first backoff, doubled per retry.
const BACKOFF_BASE: Duration = Duration::from_millis(500);
/// The longest wait a destination's `Retry-After` can ask for before a retry.
const RETRY_AFTER_CAP: Duration = Duration::from_secs(30);
/// How often a waiting thread looks at its stop flag.
const STOP_CHECK: Duration = Duration::from_millis(500);
/// Bytes of an answer kept for an error message.
const ERROR_BODY_CHARS: usize = 200;

/// Why one attempt failed, and whether another may succeed.
#[derive(Debug)]
struct Failure {
    /// What went wrong, secrets masked.
    error: String,
    retry: bool,
    retry_after: Option<Duration>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.error)
    }
}

impl std::error::Error for Failure {}

/// Waits until the rate limit lets one delivery through, the notice counted as queued
/// meanwhile; `false` when the destination stops first.
fn wait_for_token(bucket: &mut Bucket, queue: &Queue, stop: &AtomicBool) -> bool {
    let mut held = false;
    while let Err(wait) = bucket.take(Instant::now()) {
        if stop.load(Ordering::SeqCst) {
            queue.hold(false);
            return false;
        }
        if !held {
            queue.hold(true);
            held = true;
        }
        std::thread::sleep(wait.min(STOP_CHECK));
    }
    if held {
        queue.hold(false);
    }
    true
}

pub fn run(dest: Destination, queue: Arc<Queue>, stop: Arc<AtomicBool>) {
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(REQUEST_TIMEOUT))
        .max_redirects(0)
        .user_agent(format!("sortie/{}", crate::build_info::VERSION))
        .build();
    let agent = ureq::Agent::new_with_config(config);
    let clock = SystemClock;
    let mut bucket = Bucket::new(dest.rate_limit_per_minute, Instant::now());
    let started = clock.now_ms();
    let mut serial = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let Some(notice) = queue.pop(STOP_CHECK) else {
            continue;
        };
        if !wait_for_token(&mut bucket, &queue, &stop) {
            status::count(&dest.name, notice.event, status::DROPPED);
            return;
        }
        serial += 1;
        let id = format!("{}-{started}-{serial}", dest.name);
        let p = payload::build(&dest, &notice, &id);
        match post_with_retries(&agent, &dest, &p, &stop) {
            Ok(()) => {
                log::debug!(destination:% = dest.name, event:% = notice.event.as_str(); "notification delivered");
                status::delivered(&dest.name, notice.event, clock.now_ms());
            }
            Err(e) => {
                log::warn!(
                    destination:% = dest.name,
                    event:% = notice.event.as_str(),
                    issue_identifier:% = notice.issue_identifier.as_deref().unwrap_or(""),
                    error:% = e;
                    "notification not delivered after retries"
                );
                status::failed(&dest.name, notice.event, &e.error, clock.now_ms());
            }
        }
    }
}

/// Posts until it succeeds, a failure says retrying is pointless, the retries are spent or
/// the thread is asked to stop; the error is the last attempt's failure (masked).
fn post_with_retries(
    agent: &ureq::Agent,
    dest: &Destination,
    p: &Payload,
    stop: &AtomicBool,
) -> Result<(), Failure> {
    let mut attempt = 0;
    loop {
        let f = match post(agent, dest, p) {
            Ok(()) => return Ok(()),
            Err(f) => f,
        };
        if !f.retry || attempt >= RETRIES || stop.load(Ordering::SeqCst) {
            return Err(f);
        }
        let backoff = BACKOFF_BASE.saturating_mul(1 << attempt);
        let wait = f
            .retry_after
            .map_or(backoff, |r| r.min(RETRY_AFTER_CAP).max(backoff));
        log::debug!(
            destination:% = dest.name,
            attempt:% = attempt + 1,
            wait_ms:% = wait.as_millis(),
            error:% = f.error;
            "notification post failed; retrying"
        );
        let until = Instant::now() + wait;
        while Instant::now() < until {
            if stop.load(Ordering::SeqCst) {
                return Err(f);
            }
            std::thread::sleep(
                until
                    .saturating_duration_since(Instant::now())
                    .min(STOP_CHECK),
            );
        }
        attempt += 1;
    }
}

fn post(agent: &ureq::Agent, dest: &Destination, p: &Payload) -> Result<(), Failure> {
    let mut req = agent
        .post(&dest.url)
        .header("Content-Type", "application/json");
    for (k, v) in &p.headers {
        req = req.header(*k, v.as_str());
    }
    let resp = req.send(&p.body[..]).map_err(|e| Failure {
        error: crate::mask::mask(&match e {
            ureq::Error::Timeout(_) => {
                format!("timed out after {} ms", REQUEST_TIMEOUT.as_millis())
            }
            other => other.to_string(),
        }),
        retry: true,
        retry_after: None,
    })?;
    let code = resp.status().as_u16();
    if (200..300).contains(&code) {
        return Ok(());
    }
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let text = resp
        .into_body()
        .with_config()
        .limit(4096)
        .read_to_string()
        .unwrap_or_default();
    let text: String = text.trim().chars().take(ERROR_BODY_CHARS).collect();
    Err(Failure {
        error: crate::mask::mask(&format!("HTTP {code}: {text}")),
        retry: code == 408 || code == 429 || code >= 500,
        retry_after,
    })
}
