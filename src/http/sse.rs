//! `GET /api/v1/events`: change signals (coalesced to one per second), heartbeats, and the
//! agent events of up to 16 subscribed runs, on a thread of its own per stream.
//!
//! tiny_http sends nothing for a streaming `Response`, so the stream takes the raw writer
//! (`Request::into_writer`) and writes its own head. Each frame must be written within 2
//! seconds: the listener's `SO_SNDTIMEO` (inherited by accepted sockets) bounds each blocked
//! send and a deadline loop bounds the frame, so a client that stops reading is dropped
//! without delaying anyone else. The heartbeat interval is 15 s, or `SORTIE_SSE_HEARTBEAT_MS`
//! (for tests).
//!
//! The stream's thread is its only one: taking the writer ends the connection's own thread
//! (`vendor/tiny_http/PATCHED.md`), and the thread sleeps on the snapshot's publish condvar
//! between frames.

use std::collections::HashMap;
use std::io::{ErrorKind, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tiny_http::Request;

use crate::orchestrator::snapshot::{self, Snapshot};
use crate::store::ReadConn;

use super::AppState;
use super::event_json;
use super::respond::{ApiError, send_error};
use super::views::event::EventView;
use super::views::stream::{AgentEventFrame, ResetFrame, ResetReason, RunEndedFrame};
use super::views::to_value;

/// Most runs one stream carries.
pub const MAX_RUNS: usize = 16;
/// Per-frame write deadline.
pub const FRAME_DEADLINE: Duration = Duration::from_secs(2);
/// At most one change per this interval.
const CHANGE_INTERVAL: Duration = Duration::from_secs(1);
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(15);

fn heartbeat_interval() -> Duration {
    std::env::var("SORTIE_SSE_HEARTBEAT_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_HEARTBEAT)
}

fn valid_dispatch_id(d: &str) -> bool {
    (1..=64).contains(&d.len())
        && d.bytes()
            .all(|b| b.is_ascii_uppercase() || (b'2'..=b'7').contains(&b))
}

fn parse_seq(s: &str) -> Option<i64> {
    if s.is_empty() || s.len() > 19 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

/// The `run` parameters: `(dispatch_id, cursor)` in order. Every other parameter is ignored.
pub fn parse_runs(url: &str) -> Result<Vec<(String, Option<i64>)>, ApiError> {
    let mut out: Vec<(String, Option<i64>)> = Vec::new();
    for (k, v) in super::query::pairs(url) {
        if k != "run" {
            continue;
        }
        if out.len() == MAX_RUNS {
            return Err(ApiError::invalid_parameter(format!(
                "parameter \"run\" may be given at most {MAX_RUNS} times"
            )));
        }
        if v.is_empty() {
            return Err(ApiError::invalid_parameter(
                "parameter \"run\" must not be empty",
            ));
        }
        let (d, seq) = match v.split_once(':') {
            Some((d, s)) => (d, Some(s)),
            None => (v.as_str(), None),
        };
        if !valid_dispatch_id(d) {
            return Err(ApiError::invalid_parameter(
                "parameter \"run\" must be <dispatch_id> or <dispatch_id>:<seq>, with a dispatch ID of 1 to 64 characters from A to Z and 2 to 7",
            ));
        }
        let cursor = match seq {
            None => None,
            Some(s) => Some(parse_seq(s).ok_or_else(|| {
                ApiError::invalid_parameter(
                    "parameter \"run\": a seq must have 1 to 19 decimal digits and fit a signed 64-bit integer",
                )
            })?),
        };
        if out.iter().any(|(x, _)| x == d) {
            return Err(ApiError::invalid_parameter(format!(
                "parameter \"run\" names dispatch ID \"{d}\" more than once"
            )));
        }
        out.push((d.to_string(), cursor));
    }
    Ok(out)
}

/// `Last-Event-ID`: the revision text and the first cursor given per run.
pub fn parse_last_event_id(h: &str) -> (String, HashMap<String, i64>) {
    let mut parts = h.trim().split(';');
    let rev = parts.next().unwrap_or("").to_string();
    let mut cursors = HashMap::new();
    for p in parts {
        if let Some((d, s)) = p.split_once(':')
            && valid_dispatch_id(d)
            && let Some(seq) = parse_seq(s)
        {
            cursors.entry(d.to_string()).or_insert(seq);
        }
    }
    (rev, cursors)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SubState {
    Active,
    /// `run_ended` was written; the run stays in the id.
    Ended,
    /// `not_retained` was written; the run left the id.
    Gone,
}

struct Sub {
    dispatch_id: String,
    cursor: i64,
    state: SubState,
    /// When to read an ended run's stored events again after a failed read.
    retry_read_at: Option<Instant>,
}

/// Why a stream stopped writing.
#[derive(Debug)]
enum StreamEnd {
    Client(std::io::Error),
    Shutdown,
}

/// The writer side of one stream: frames with a per-frame deadline.
struct Frames {
    w: Box<dyn Write + Send>,
    revision: String,
}

impl Frames {
    fn write_all_by(&mut self, bytes: &[u8], deadline: Instant) -> Result<(), StreamEnd> {
        let mut off = 0;
        while off < bytes.len() {
            match self.w.write(&bytes[off..]) {
                Ok(0) => return Err(StreamEnd::Client(ErrorKind::WriteZero.into())),
                Ok(n) => off += n,
                Err(e) if retryable(&e) && Instant::now() < deadline => {}
                Err(e) => return Err(StreamEnd::Client(e)),
            }
        }
        loop {
            match self.w.flush() {
                Ok(()) => return Ok(()),
                Err(e) if retryable(&e) && Instant::now() < deadline => {}
                Err(e) => return Err(StreamEnd::Client(e)),
            }
        }
    }

    fn frame(&mut self, subs: &[Sub], event: &str, data: &Value) -> Result<(), StreamEnd> {
        let mut id = self.revision.clone();
        for s in subs.iter().filter(|s| s.state != SubState::Gone) {
            id.push_str(&format!(";{}:{}", s.dispatch_id, s.cursor));
        }
        let mut data = data.clone();
        super::respond::mask_value(&mut data);
        let text = format!(
            "id: {id}\nevent: {event}\ndata: {}\n\n",
            serde_json::to_string(&data).unwrap_or_else(|_| "{}".into())
        );
        self.write_all_by(text.as_bytes(), Instant::now() + FRAME_DEADLINE)
    }
}

fn retryable(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

/// Validates the request, then hands the stream to a thread of its own.
pub fn open(app: &Arc<AppState>, req: Request) {
    let runs = match parse_runs(req.url()) {
        Ok(r) => r,
        Err(e) => return send_error(req, e),
    };
    let last_event_id = req
        .headers()
        .iter()
        .find(|h| h.field.equiv("Last-Event-ID"))
        .map(|h| h.value.as_str().to_string());
    let open_now = app.sse_open.fetch_add(1, Ordering::SeqCst);
    if open_now >= app.max_streams {
        app.sse_open.fetch_sub(1, Ordering::SeqCst);
        return send_error(
            req,
            ApiError::new(
                503,
                "too_many_streams",
                format!(
                    "at most {} event streams may be open at once",
                    app.max_streams
                ),
            ),
        );
    }
    let n = app.sse_serial.fetch_add(1, Ordering::Relaxed);
    let app2 = app.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("sse-{n}"))
        .spawn(move || {
            let end = run_stream(&app2, req, runs, last_event_id);
            let reason = match &end {
                Ok(()) => "done".to_string(),
                Err(StreamEnd::Shutdown) => "shutdown".to_string(),
                Err(StreamEnd::Client(e)) => format!("client: {e}"),
            };
            log::debug!(reason:% = reason; "event stream closed");
            app2.sse_open.fetch_sub(1, Ordering::SeqCst);
            snapshot::notify_published();
        });
    if let Err(e) = spawned {
        app.sse_open.fetch_sub(1, Ordering::SeqCst);
        log::warn!(error:% = e; "cannot start event stream thread");
    }
}

const HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n";

fn run_stream(
    app: &Arc<AppState>,
    req: Request,
    runs: Vec<(String, Option<i64>)>,
    last_event_id: Option<String>,
) -> Result<(), StreamEnd> {
    let (header_rev, header_cursors) = last_event_id
        .as_deref()
        .map(parse_last_event_id)
        .unwrap_or_default();
    let mut subs: Vec<Sub> = runs
        .into_iter()
        .map(|(d, c)| Sub {
            cursor: header_cursors.get(&d).copied().or(c).unwrap_or(0),
            dispatch_id: d,
            state: SubState::Active,
            retry_read_at: None,
        })
        .collect();
    let mut seen = snapshot::published_count();
    let snap = app.orch.snapshot();
    let current = snap.revision.to_string();
    let mut frames = Frames {
        w: req.into_writer(),
        revision: if header_rev.is_empty() {
            current.clone()
        } else {
            header_rev.clone()
        },
    };
    let mut conn: Option<ReadConn> = None;
    clamp_cursors(app, &snap, &mut subs, &mut conn);
    frames.write_all_by(HEAD.as_bytes(), Instant::now() + FRAME_DEADLINE)?;
    // A client that already holds the current revision gets no change until the next one.
    let mut last_change_at: Option<Instant> = None;
    if header_rev != current {
        frames.revision = current.clone();
        frames.frame(&subs, "change", &json!({}))?;
        last_change_at = Some(Instant::now());
    }
    let mut sent_rev = Some(snap.revision);
    let heartbeat = heartbeat_interval();
    let mut next_heartbeat = Instant::now() + heartbeat;
    loop {
        if app.stopping.load(Ordering::SeqCst) {
            return Err(StreamEnd::Shutdown);
        }
        let snap = app.orch.snapshot();
        pump_runs(app, &snap, &mut subs, &mut frames, &mut conn)?;
        let now = Instant::now();
        // Change signals: the first at once, then at most one per interval.
        let mut wake_at = next_heartbeat;
        if sent_rev != Some(snap.revision) {
            let due = last_change_at.map(|t| t + CHANGE_INTERVAL).unwrap_or(now);
            if now >= due {
                frames.revision = snap.revision.to_string();
                frames.frame(&subs, "change", &json!({}))?;
                sent_rev = Some(snap.revision);
                last_change_at = Some(now);
            } else {
                wake_at = wake_at.min(due);
            }
        }
        if now >= next_heartbeat {
            frames.frame(&subs, "heartbeat", &json!({}))?;
            next_heartbeat = now + heartbeat;
            wake_at = wake_at.min(next_heartbeat);
        }
        for s in &subs {
            if let Some(t) = s.retry_read_at {
                wake_at = wake_at.min(t);
            }
        }
        if app.stopping.load(Ordering::SeqCst) {
            return Err(StreamEnd::Shutdown);
        }
        let wait = wake_at.saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            seen = snapshot::wait_published(seen, wait);
        }
    }
}

/// A cursor above a run's newest seq reads as the newest, from the stream's first frame on.
/// A run whose stored events cannot be read, or that has none, keeps its cursor here; the
/// pump decides what it gets.
fn clamp_cursors(app: &AppState, snap: &Snapshot, subs: &mut [Sub], conn: &mut Option<ReadConn>) {
    for sub in subs.iter_mut().filter(|s| s.cursor > 0) {
        let newest = match snap
            .running
            .iter()
            .find(|r| r.dispatch_id == sub.dispatch_id)
        {
            Some(row) => Some(i64::try_from(row.events.next_seq).unwrap_or(i64::MAX)),
            None => {
                if conn.is_none() {
                    *conn = app.store.read_conn().ok();
                }
                conn.as_ref()
                    .and_then(|c| c.run_events(&sub.dispatch_id).ok().flatten())
                    .and_then(|stored| stored.events.last().map(|e| e.seq))
            }
        };
        if let Some(newest) = newest {
            sub.cursor = sub.cursor.min(newest);
        }
    }
}

/// Writes what each active subscription has after its cursor.
fn pump_runs(
    app: &AppState,
    snap: &Snapshot,
    subs: &mut [Sub],
    frames: &mut Frames,
    conn: &mut Option<ReadConn>,
) -> Result<(), StreamEnd> {
    for i in 0..subs.len() {
        if subs[i].state != SubState::Active {
            continue;
        }
        let d = subs[i].dispatch_id.clone();
        if let Some(row) = snap.running.iter().find(|r| r.dispatch_id == d) {
            let seqs: Vec<i64> = row.recent_events().map(|(s, _)| s as i64).collect();
            write_events(subs, i, &seqs, frames, |k| {
                row.events
                    .events
                    .get(k)
                    .map(|(seq, ev, _)| event_json::view_live(*seq, ev))
            })?;
            continue;
        }
        if subs[i].retry_read_at.is_some_and(|t| Instant::now() < t) {
            continue;
        }
        if conn.is_none() {
            *conn = app.store.read_conn().ok();
        }
        let read = match conn.as_ref() {
            Some(c) => c.run_events(&d).map_err(|e| e.to_string()),
            None => Err("database unavailable".into()),
        };
        match read {
            Err(e) => {
                log::warn!(dispatch_id:% = d, error:% = e; "run events read failed");
                subs[i].retry_read_at = Some(Instant::now() + heartbeat_interval());
            }
            Ok(stored) => {
                subs[i].retry_read_at = None;
                let events = stored.map(|s| s.events).unwrap_or_default();
                if events.is_empty() {
                    subs[i].state = SubState::Gone;
                    let reset = ResetFrame {
                        dispatch_id: d.clone(),
                        reason: ResetReason::NotRetained,
                        first_seq: None,
                    };
                    frames.frame(subs, "reset", &to_value(&reset))?;
                    continue;
                }
                let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
                write_events(subs, i, &seqs, frames, |k| {
                    events.get(k).map(|e| event_json::view(e.seq, &e.payload))
                })?;
                let last = seqs.last().copied().unwrap_or(0);
                subs[i].cursor = last;
                subs[i].state = SubState::Ended;
                let ended = RunEndedFrame {
                    dispatch_id: d.clone(),
                    last_seq: last,
                };
                frames.frame(subs, "run_ended", &to_value(&ended))?;
            }
        }
    }
    Ok(())
}

/// Writes the events after the subscription's cursor (with a `cursor_expired` reset first when
/// events between the cursor and the oldest retained one are gone). `seqs` are the retained
/// events' numbers, oldest first; `build(k)` renders the k-th only when it is written, so a
/// wake with nothing new costs no serialization.
fn write_events(
    subs: &mut [Sub],
    i: usize,
    seqs: &[i64],
    frames: &mut Frames,
    build: impl Fn(usize) -> Option<EventView>,
) -> Result<(), StreamEnd> {
    let (Some(first), Some(newest)) = (seqs.first().copied(), seqs.last().copied()) else {
        return Ok(());
    };
    if subs[i].cursor > newest {
        subs[i].cursor = newest;
    }
    if subs[i].cursor + 1 < first {
        subs[i].cursor = first - 1;
        let d = subs[i].dispatch_id.clone();
        let reset = ResetFrame {
            dispatch_id: d,
            reason: ResetReason::CursorExpired,
            first_seq: Some(first),
        };
        frames.frame(subs, "reset", &to_value(&reset))?;
    }
    let start = seqs.partition_point(|s| *s <= subs[i].cursor);
    for (k, seq) in seqs.iter().enumerate().skip(start) {
        subs[i].cursor = *seq;
        let data = match build(k) {
            Some(event) => to_value(&AgentEventFrame {
                dispatch_id: subs[i].dispatch_id.clone(),
                event,
            }),
            None => json!({"dispatch_id": subs[i].dispatch_id}),
        };
        frames.frame(subs, "agent_event", &data)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_parameter_rules() {
        assert_eq!(
            parse_runs("/api/v1/events?run=ABC:4&x=1&run=D2").ok(),
            Some(vec![("ABC".into(), Some(4)), ("D2".into(), None)])
        );
        assert!(parse_runs("/api/v1/events?run=").is_err());
        assert!(parse_runs("/api/v1/events?run=abc").is_err());
        assert!(parse_runs("/api/v1/events?run=AB1").is_err());
        assert!(parse_runs("/api/v1/events?run=AB:x").is_err());
        assert!(parse_runs("/api/v1/events?run=AB:99999999999999999999").is_err());
        assert!(parse_runs("/api/v1/events?run=AB&run=AB:3").is_err());
        let many: Vec<String> = (0..17)
            .map(|i| {
                format!(
                    "run=A{}",
                    [
                        "A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K", "L", "M", "N", "O",
                        "P", "Q"
                    ][i]
                )
            })
            .collect();
        assert!(parse_runs(&format!("/e?{}", many.join("&"))).is_err());
        assert!(parse_runs(&format!("/e?{}", many[..16].join("&"))).is_ok());
    }

    #[test]
    fn last_event_id_first_part_per_run_counts() {
        let (rev, c) = parse_last_event_id("17;ABC:4;ABC:9;bad;x:y;D:2");
        assert_eq!(rev, "17");
        assert_eq!(c.get("ABC"), Some(&4));
        assert_eq!(c.get("D"), Some(&2));
        assert_eq!(c.len(), 2);
    }
}
