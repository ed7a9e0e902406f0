//! A poll whose tracker listing was read before a hand-off's transition was written, and whose
//! answer arrives after the hand-off settled and released the issue, must not dispatch the
//! handed-off issue again: that listing still shows it active. A wrapper around the real file
//! tracker holds such a listing back until the orchestrator has published the hand-off, so the
//! order is forced rather than hoped for. The orchestrator runs its own loop with the real
//! clock and the mock agent.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use common::store::{count, raw};
use common::wait::{poll, wait_for};
use sortie::clock::{Clock, SystemClock};
use sortie::config::{LoadOptions, load_workflow};
use sortie::domain::{Comment, Issue, OutcomeKind};
use sortie::orchestrator::snapshot::Snapshot;
use sortie::orchestrator::{OrchMsg, Orchestrator, OrchestratorDeps, adapters};
use sortie::prompt::PromptTemplate;
use sortie::store::Store;
use sortie::tracker::{Blockers, CandidateList, TrackerAdapter, TrackerResult};

type Published = Arc<RwLock<Arc<Snapshot>>>;

/// The file tracker, except that the first listing read while issue `1` runs is answered only
/// once the orchestrator has published that issue's hand-off.
struct HeldListing {
    inner: Arc<dyn TrackerAdapter>,
    published: Arc<OnceLock<Published>>,
    armed: AtomicBool,
    held_one: AtomicBool,
}

impl HeldListing {
    fn snapshot(&self) -> Option<Arc<Snapshot>> {
        let published = self.published.get()?;
        published.read().ok().map(|s| Arc::clone(&s))
    }

    fn handed_off(&self) -> bool {
        self.snapshot().is_some_and(|s| {
            s.outcomes
                .get("1")
                .is_some_and(|(kind, _)| *kind == OutcomeKind::HandedOff)
        })
    }

    fn running(&self) -> bool {
        self.snapshot()
            .is_some_and(|s| s.running.iter().any(|r| r.issue.id == "1"))
    }
}

impl TrackerAdapter for HeldListing {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
    fn fetch_candidate_issues(&self) -> TrackerResult<Vec<Issue>> {
        self.inner.fetch_candidate_issues()
    }
    fn fetch_sorted_candidates(&self) -> TrackerResult<CandidateList> {
        let listing = self.inner.fetch_sorted_candidates()?;
        let lists_it = listing.iter().any(|i| i.id == "1");
        if lists_it && self.running() && self.armed.swap(false, Ordering::SeqCst) {
            // Bounded: a hand-off that never comes fails the test's own assertion instead.
            let _ = poll(Duration::from_secs(30), Duration::from_millis(5), || {
                self.handed_off().then_some(())
            });
            self.held_one.store(true, Ordering::SeqCst);
        }
        Ok(listing)
    }
    fn fetch_issue_by_id(&self, id: &str) -> TrackerResult<Issue> {
        self.inner.fetch_issue_by_id(id)
    }
    fn fetch_issues_by_states(&self, states: &[String]) -> TrackerResult<Vec<Issue>> {
        self.inner.fetch_issues_by_states(states)
    }
    fn fetch_issue_states_by_ids(
        &self,
        ids: &[String],
    ) -> TrackerResult<std::collections::BTreeMap<String, String>> {
        self.inner.fetch_issue_states_by_ids(ids)
    }
    fn fetch_issue_states_by_identifiers(
        &self,
        identifiers: &[String],
    ) -> TrackerResult<std::collections::BTreeMap<String, String>> {
        self.inner.fetch_issue_states_by_identifiers(identifiers)
    }
    fn fetch_issue_comments(&self, id: &str) -> TrackerResult<Vec<Comment>> {
        self.inner.fetch_issue_comments(id)
    }
    fn transition_issue(&self, id: &str, state: &str) -> TrackerResult<()> {
        self.inner.transition_issue(id, state)
    }
    fn comment_issue(&self, id: &str, text: &str) -> TrackerResult<()> {
        self.inner.comment_issue(id, text)
    }
    fn add_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        self.inner.add_label(id, label)
    }
    fn remove_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        self.inner.remove_label(id, label)
    }
    fn fetch_blockers(&self, id: &str) -> TrackerResult<Blockers> {
        self.inner.fetch_blockers(id)
    }
}

#[test]
fn a_listing_read_before_a_handoff_does_not_dispatch_the_issue_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("issues.json"),
        r#"[{"id": "1", "identifier": "P-1", "title": "Hand me off", "state": "To Do"}]"#,
    )
    .expect("issues");
    std::fs::write(
        dir.path().join("WORKFLOW.md"),
        format!(
            "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\n  \
             handoff_state: Review\nfile:\n  path: ./issues.json\npolling:\n  interval_ms: 50\n  \
             min_interval_ms: 1\nworkspace:\n  root: {}\nagent:\n  kind: mock\n  max_turns: 1\n\
             mock:\n  turn_delay_ms: 300\n---\nDo {{{{ .issue.identifier }}}}\n",
            dir.path().join("ws").display()
        ),
    )
    .expect("workflow");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let opts = LoadOptions::from_process(None);
    let wf = load_workflow(&dir.path().join("WORKFLOW.md"), &opts).expect("load workflow");
    let template = PromptTemplate::parse(&wf.prompt_template, "WORKFLOW.md", 0).expect("template");
    let db = dir.path().join("sortie.db");
    let published = Arc::new(OnceLock::new());
    let tracker = Arc::new(HeldListing {
        inner: adapters::build_tracker(&wf, clock.clone()).expect("tracker"),
        published: published.clone(),
        armed: AtomicBool::new(true),
        held_one: AtomicBool::new(false),
    });
    let deps = OrchestratorDeps {
        tracker: tracker.clone(),
        agent: adapters::build_agent(&wf, clock.clone()).expect("agent"),
        store: Arc::new(Store::open(&db, clock.clone()).expect("store")),
        workflow: Arc::new(wf),
        template: Arc::new(template),
        load_options: opts,
        metrics: Arc::new(sortie::metrics::Metrics::new(&Default::default())),
        clock,
        prices: sortie::pricing::PriceBoard::default(),
    };
    let (orch, handle) = Orchestrator::new(deps);
    let _ = published.set(handle.snapshot.clone());
    let loop_thread = std::thread::spawn(move || Orchestrator::run(orch));

    wait_for(
        "a listing held back across the hand-off",
        Duration::from_secs(30),
        || tracker.held_one.load(Ordering::SeqCst).then_some(()),
    );
    // Polls run one at a time: two that succeeded after the held one read the file, which
    // shows the issue in Review, and the held one's answer was applied before them.
    let last_poll = || handle.snapshot().health.poll.last_success_ms;
    let first = wait_for("a poll", Duration::from_secs(10), last_poll);
    wait_for("two more polls", Duration::from_secs(10), || {
        last_poll().filter(|t| *t >= first + 100)
    });
    let _ = handle.tx.send(OrchMsg::Shutdown);
    loop_thread.join().expect("orchestrator loop");

    let runs = count(
        &raw(&db),
        "SELECT COUNT(*) FROM run_history WHERE issue_id = '1'",
    );
    assert_eq!(runs, 1, "the handed-off issue was dispatched again");
    let state = std::fs::read_to_string(dir.path().join("issues.json")).expect("issues");
    assert!(state.contains("Review"), "{state}");
}
