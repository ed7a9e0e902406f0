//! `GET /api/v1/state`: the document built from the published snapshot, plus one run-history
//! read for the running issues' completed-session figures.
//!
//! The document is a function of the snapshot alone: every "now"-relative member (status
//! sentences, `seconds_running`, stall times) is computed against the snapshot's own
//! `generated_at`, never the request's clock, and the run-history figures it reads change
//! only when a run is recorded, which the orchestrator follows with a publish. So the
//! serialized, masked bytes are built once per published snapshot ([`StateCache`]) and shared
//! by every request until the next publish, with a strong `ETag` over those bytes.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use flate2::Compression;
use flate2::write::GzEncoder;
use sha2::{Digest, Sha256};
use tiny_http::Request;

use crate::orchestrator::snapshot::Snapshot;
use crate::store::IssueSpend;
use crate::ui::etag;

use super::AppState;
use super::attention;
use super::respond::{TaggedHead, accepts_gzip, if_none_match, masked_json, send_tagged};
use super::views::state::StateDoc;

/// Completed-session figures of every running issue (`None` per issue when unreadable), and
/// whether the read succeeded.
pub fn running_spend(
    state: &AppState,
    snap: &Snapshot,
) -> (BTreeMap<String, Option<IssueSpend>>, bool) {
    let mut out = BTreeMap::new();
    if snap.running.is_empty() {
        return (out, true);
    }
    let ids: Vec<&str> = snap.running.iter().map(|r| r.issue.id.as_str()).collect();
    let all = match state.store.read_pool().with(|c| c.issue_spend_many(&ids)) {
        Ok(m) => Some(m),
        Err(e) => {
            log::warn!(error:% = e; "issue spend read failed");
            None
        }
    };
    for id in &ids {
        out.insert(
            id.to_string(),
            all.as_ref().and_then(|m| m.get(*id).copied()),
        );
    }
    (out, all.is_some())
}

/// The typed document, and whether every figure in it could be read.
pub fn view(state: &AppState, snap: &Snapshot) -> (StateDoc, bool) {
    let (spend, complete) = running_spend(state, snap);
    let items = attention::items(snap);
    let unacked = items
        .iter()
        .filter(|i| i.view.acknowledged_at.is_none())
        .count();
    let items = items.into_iter().map(|i| i.view).collect();
    let mut doc = StateDoc::build(snap, state.version, &spend, items, unacked);
    let pr_loop = super::pr_loop::for_state(state, snap);
    doc.set_pr_loop(pr_loop.as_ref());
    (doc, complete && pr_loop.is_some())
}

/// The served document: masked JSON bytes with their strong entity tag, and the gzip
/// encoding of the same bytes, compressed on first demand (a browser always asks for it).
/// The default level: compression runs once per published snapshot, while every request
/// pays for the bytes it sends (500 queued retries shrink about 30-fold, against 21-fold at
/// the fastest level).
#[derive(Debug)]
pub struct StateBody {
    pub json: Vec<u8>,
    /// Quoted, derived from the bytes, so equal documents share a tag across publishes.
    pub etag: String,
    /// The gzip encoding's own strong tag, as RFC 9110 asks of a different encoding.
    pub gzip_etag: String,
    gzip: OnceLock<Vec<u8>>,
    /// Each encoding's headers, rendered once for every answer that sends it.
    identity_head: TaggedHead,
    gzip_head: TaggedHead,
}

impl StateBody {
    fn new(json: Vec<u8>) -> StateBody {
        let hash = data_encoding::HEXLOWER.encode(&Sha256::digest(&json)[..12]);
        let (etag, gzip_etag) = (format!("\"{hash}\""), format!("\"{hash}-gzip\""));
        StateBody {
            identity_head: TaggedHead::new(&etag, false),
            gzip_head: TaggedHead::new(&gzip_etag, true),
            etag,
            gzip_etag,
            json,
            gzip: OnceLock::new(),
        }
    }

    /// The gzip encoding (empty if compression failed), compressed by the first request that
    /// asks; requests arriving meanwhile wait for it.
    pub fn gzip(&self) -> &[u8] {
        self.gzip.get_or_init(|| gzip(&self.json))
    }

    /// Whether an `If-None-Match` value names either encoding of this document.
    pub fn matches(&self, if_none_match: &str) -> bool {
        etag::matches(if_none_match, &self.etag) || etag::matches(if_none_match, &self.gzip_etag)
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::with_capacity(bytes.len() / 16), Compression::default());
    // Writing to a Vec cannot fail; the fallback is never reached.
    match enc.write_all(bytes).and_then(|()| enc.finish()) {
        Ok(out) => out,
        Err(e) => {
            log::warn!(error:% = e; "state document compression failed");
            Vec::new()
        }
    }
}

/// Answers `GET`/`HEAD /api/v1/state` from the cached document: gzip when the client accepts
/// it, 304 when its `If-None-Match` names the current document.
pub fn serve(state: &AppState, req: Request) {
    let wants_gzip = accepts_gzip(&req);
    let body = state.state_cache.current_for(state, wants_gzip);
    let fresh = if_none_match(&req).is_some_and(|h| body.matches(h));
    let gzipped = if wants_gzip { body.gzip() } else { &[] };
    if gzipped.is_empty() {
        send_tagged(req, &body.identity_head, &body.json, fresh);
    } else {
        send_tagged(req, &body.gzip_head, gzipped, fresh);
    }
}

/// What a cached body was built from: the secret registry's generation it was masked
/// against, the notification destinations' state (health rows and attention items read it)
/// and the reaction activity committed (`pr_loop` reads it).
type Generation = (u64, u64, u64);

fn generation_now() -> Generation {
    (
        crate::mask::generation(),
        crate::notify::status::generation(),
        crate::store::pr_loop::generation(),
    )
}

/// What the cached body was built from: the published snapshot (by identity) and the
/// [`Generation`].
struct Cached {
    snap: Arc<Snapshot>,
    generation: Generation,
    body: Arc<StateBody>,
}

impl Cached {
    fn serves(&self, snap: &Arc<Snapshot>, generation: Generation) -> bool {
        Arc::ptr_eq(&self.snap, snap) && self.generation == generation
    }
}

/// The state document of the latest published snapshot, built at most once per publish.
///
/// At a thousand running sessions agent events publish a snapshot every 50 ms and a build
/// takes milliseconds, so readers must not queue behind builds of those: while one is built
/// (by [`spawn_builder`]'s thread, or a request), a reader is served the previous document
/// when only agent events separate the two ([`Snapshot::same_schedule`]) and it was built
/// under the same generations (secrets, notifications, reactions), as if the reader had come
/// a build's time earlier. After a scheduling change (a dispatch, an exit, a tick, an
/// acknowledgement) readers wait for the new document.
#[derive(Default)]
pub struct StateCache {
    slot: Mutex<Option<Cached>>,
    /// Held by the one thread building a document.
    building: Mutex<()>,
    /// Milliseconds since [`demand_epoch`] of the latest request (0: none yet).
    demanded_at_ms: AtomicU64,
}

/// How long after the latest request the builder thread keeps the document current.
const DEMAND_WINDOW_MS: u64 = 2_000;

fn demand_epoch() -> &'static Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now)
}

fn demand_clock_ms() -> u64 {
    // Never 0, which means "no request yet".
    demand_epoch().elapsed().as_millis() as u64 + 1
}

/// Starts the thread that builds `state`'s document after each publish while it is being
/// requested (within [`DEMAND_WINDOW_MS`] of the latest request), so requests find it built
/// and rarely pay for a build themselves. It ends with the server (`stopping`) or when the
/// workflow's state is dropped.
pub fn spawn_builder(state: &Arc<AppState>) {
    let weak = Arc::downgrade(state);
    let spawned = std::thread::Builder::new()
        .name("state-doc".into())
        .spawn(move || {
            let mut seen = crate::orchestrator::snapshot::published_count();
            loop {
                seen = crate::orchestrator::snapshot::wait_published(seen, Duration::from_secs(1));
                let Some(state) = weak.upgrade() else {
                    return;
                };
                if state.stopping.load(Ordering::SeqCst) {
                    return;
                }
                if state.state_cache.demanded() {
                    state.state_cache.refresh(&state);
                }
            }
        });
    if let Err(e) = spawned {
        log::warn!(error:% = e; "state document builder not started; requests build it");
    }
}

impl StateCache {
    /// The body for the snapshot published now, as [`StateCache::current_for`] gives it to a
    /// client that does not ask for gzip.
    pub fn current(&self, state: &AppState) -> Arc<StateBody> {
        self.current_for(state, false)
    }

    /// The body for the snapshot published now; with `gzip` its gzip encoding is ready. The
    /// snapshot is read under the build lock, so a slower request never replaces a newer
    /// document with an older one. A document whose run-history read failed is served but
    /// not kept.
    pub fn current_for(&self, state: &AppState, gzip: bool) -> Arc<StateBody> {
        self.demanded_at_ms
            .store(demand_clock_ms(), Ordering::Relaxed);
        let (snap, generation) = (state.orch.snapshot(), generation_now());
        let previous = match self.lookup(&snap, generation) {
            Ok(body) => return body,
            Err(previous) => previous,
        };
        let building = match self.building.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                if let Some(body) = previous {
                    return body;
                }
                self.building.lock().unwrap_or_else(|p| p.into_inner())
            }
        };
        self.build(state, gzip, building)
    }

    /// Whether a request came within the demand window.
    fn demanded(&self) -> bool {
        let at = self.demanded_at_ms.load(Ordering::Relaxed);
        at != 0 && demand_clock_ms().saturating_sub(at) < DEMAND_WINDOW_MS
    }

    /// Builds the document of the snapshot published now (with its gzip encoding), unless it
    /// is built or being built.
    fn refresh(&self, state: &AppState) {
        if let Ok(building) = self.building.try_lock() {
            self.build(state, true, building);
        }
    }

    /// The body of the snapshot published now, built under the `building` lock unless a
    /// build that ended meanwhile made it. The snapshot is read under the lock, so a slower
    /// build never replaces a newer document with an older one.
    fn build(
        &self,
        state: &AppState,
        gzip: bool,
        _building: std::sync::MutexGuard<'_, ()>,
    ) -> Arc<StateBody> {
        let (snap, generation) = (state.orch.snapshot(), generation_now());
        if let Ok(body) = self.lookup(&snap, generation) {
            return body;
        }
        let started = Instant::now();
        let (doc, complete) = view(state, &snap);
        let body = Arc::new(StateBody::new(masked_json(&doc)));
        if gzip {
            body.gzip();
        }
        log::debug!(
            revision:% = snap.revision,
            bytes:% = body.json.len(),
            took_us:% = started.elapsed().as_micros(),
            complete:% = complete;
            "state document built"
        );
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        *slot = complete.then(|| Cached {
            snap,
            generation,
            body: Arc::clone(&body),
        });
        body
    }

    /// The cached body when it serves `snap` at `generation`; otherwise the cached body a
    /// concurrent build may serve instead (see [`StateCache`]), if any.
    fn lookup(
        &self,
        snap: &Arc<Snapshot>,
        generation: Generation,
    ) -> Result<Arc<StateBody>, Option<Arc<StateBody>>> {
        let slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        match slot.as_ref() {
            Some(c) if c.serves(snap, generation) => Ok(Arc::clone(&c.body)),
            Some(c) if c.generation == generation && c.snap.same_schedule(snap) => {
                Err(Some(Arc::clone(&c.body)))
            }
            _ => Err(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::views::to_value;
    use super::*;
    use crate::domain::{Issue, RetryTrigger};
    use crate::orchestrator::snapshot::RetryRow;

    /// While another thread builds, a reader may be served the previous body when only
    /// agent events separate the snapshots and the generations are the same; never one
    /// masked against an older secret registry, nor one from before a scheduling change.
    #[test]
    fn a_build_in_progress_serves_the_previous_body_only_across_agent_events() {
        let snapshot = |revision, schedule_revision| {
            Arc::new(Snapshot {
                revision,
                schedule_revision,
                ..Default::default()
            })
        };
        let cache = StateCache::default();
        let first = snapshot(10, 10);
        let body = Arc::new(StateBody::new(b"{}".to_vec()));
        *cache.slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(Cached {
            snap: Arc::clone(&first),
            generation: (1, 1, 1),
            body: Arc::clone(&body),
        });
        let kind = |r: Result<Arc<StateBody>, Option<Arc<StateBody>>>| match r {
            Ok(b) if Arc::ptr_eq(&b, &body) => "current",
            Err(Some(b)) if Arc::ptr_eq(&b, &body) => "previous",
            Err(None) => "wait",
            _ => "other",
        };
        assert_eq!(kind(cache.lookup(&first, (1, 1, 1))), "current");
        let events = snapshot(11, 10);
        assert_eq!(kind(cache.lookup(&events, (1, 1, 1))), "previous");
        assert_eq!(kind(cache.lookup(&events, (2, 1, 1))), "wait", "new secret");
        assert_eq!(
            kind(cache.lookup(&events, (1, 2, 1))),
            "wait",
            "notifications"
        );
        assert_eq!(
            kind(cache.lookup(&snapshot(12, 12), (1, 1, 1))),
            "wait",
            "a dispatch"
        );
        assert_eq!(
            kind(cache.lookup(&snapshot(11, 0), (1, 1, 1))),
            "wait",
            "built by hand"
        );
    }

    /// Serializing the view directly gives the bytes the `Value` round trip used to give.
    #[test]
    fn direct_serialization_matches_the_value_tree() {
        let mut snap = Snapshot {
            generated_at_ms: 1_000,
            ..Default::default()
        };
        std::sync::Arc::make_mut(&mut snap.retrying).push(RetryRow {
            issue: Issue {
                id: "1".into(),
                identifier: "D-1".into(),
                title: "Direct \"quoted\" ünïcode".into(),
                labels: vec!["a".into()],
                ..Default::default()
            },
            attempt: 3,
            due_at_ms: 90_000,
            error: Some("boom".into()),
            trigger: RetryTrigger::Error,
            dispatched_at_ms: 10,
            reaction: None,
            route: Default::default(),
        });
        let doc = StateDoc::build(&snap, "v", &BTreeMap::new(), Vec::new(), 0);
        let via_value = serde_json::to_string(&to_value(&doc)).unwrap_or_default();
        assert_eq!(String::from_utf8_lossy(&masked_json(&doc)), via_value);
    }
}
