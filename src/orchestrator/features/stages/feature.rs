//! Stage chains as a feature: it owns each issue's latest hop (until its consecutive-hop count
//! resets), the latest pass's hold of each issue between stages, and the live stage passes last
//! written for `sortie stats`. A successful exit's hop is planned and applied here (its label
//! writes run with the exit's tracker calls, [`HopPlan::write`]); a poll's reads confirm hops,
//! and until one does, the gate holds the hop's issue (`stage_hop_unconfirmed`); the routes of
//! poll-tick and retry dispatches are chosen here. Every durable write is returned as an
//! effect; the hops and the rows between stages reach the snapshot.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use crate::config::ServiceConfig;
use crate::domain::stage::{HopResult, LivePass, StageHop, StageOutcome, new_chain_id};
use crate::domain::{Issue, state_in};
use crate::orchestrator::claim::dispatch_pass::{Gate, HoldReason};
use crate::orchestrator::core::effect::{Effect, Write};
use crate::orchestrator::core::feature::{Cx, Feature, PassKind};
use crate::orchestrator::core::snapshot::{BetweenStagesRow, Snapshot};
use crate::orchestrator::core::state::{Held, Pass, RetryInfo, RunFacts};
use crate::orchestrator::features::stages::hop::{HopPlan, HopWrite};
use crate::orchestrator::features::stages::{self, routing};
use crate::store::StageHopWrite;

/// The stages feature's slice of state.
#[derive(Debug, Default)]
pub struct StagesFeature {
    /// Each issue's latest stage hop, until its consecutive-hop count resets (issue id →
    /// hop); the ones no run has picked up since are `between_stages[]`.
    hops: BTreeMap<String, StageHop>,
    /// The latest pass's hold of each issue between stages (`between_stages[].hold`).
    between_holds: BTreeMap<String, Held>,
    /// The live stage passes last written to the database, by issue id.
    live_passes: BTreeMap<String, LivePass>,
    /// The holds of the hops the poll's reads left unconfirmed, for the pass built after them
    /// alone: [`StagesFeature::confirm`] sets them and [`StagesFeature::end_pass`] clears
    /// them, so the next tick's blocker read-ahead (built before its confirming reads) holds
    /// nothing on their account.
    unconfirmed: BTreeMap<String, HoldReason>,
}

/// A stage write as an effect.
fn write(w: StageHopWrite) -> Effect {
    Effect::Write(Write::StageHop(w))
}

impl StagesFeature {
    /// Restores the hops stored before a restart.
    pub fn restore(&mut self, hops: Vec<StageHop>) {
        for h in hops {
            self.hops.insert(h.issue_id.clone(), h);
        }
    }

    /// Hops kept now (for the warm start's log line).
    pub fn hop_count(&self) -> usize {
        self.hops.len()
    }

    /// The hop a successful run of `facts` would make under the configuration in force;
    /// `None` when its rule has no next stage with a label.
    pub(crate) fn plan_hop(&self, facts: &RunFacts, cfg: &ServiceConfig) -> Option<HopPlan> {
        let count = self.hops.get(&facts.issue.id).map_or(0, |h| h.hop_count);
        HopPlan::new(&cfg.dispatch, facts, count)
    }

    /// Whether the exit of the run `facts` made a hop (its reactions are not seeded).
    pub(crate) fn hopped(&self, facts: &RunFacts) -> bool {
        self.hops
            .get(&facts.issue.id)
            .is_some_and(|h| h.source_dispatch_id == facts.dispatch_id)
    }

    /// Applies what a hop's writes did. `true` when the hop was made: the caller releases the
    /// claim (its pending reactions go with it) and writes no handoff. Otherwise the exit
    /// takes the handoff write.
    pub(crate) fn apply_hop(
        &mut self,
        facts: &RunFacts,
        plan: &HopPlan,
        write_done: HopWrite,
        outcome: StageOutcome,
        now_ms: i64,
    ) -> (bool, Vec<Effect>) {
        let issue = &facts.issue;
        let label = &plan.target_label;
        let event_facts = |hop_count| stages::HopFacts {
            issue,
            source_rule: &plan.source_rule,
            target_rule: &plan.target_rule,
            target_label: label,
            chain_id: &facts.route.chain_id,
            hop_count,
            ceiling: plan.ceiling,
        };
        let (labels, left) = match write_done {
            HopWrite::Ceiling => {
                let r = not_made(issue, plan, HopResult::Ceiling, "ceiling");
                let ev = stages::not_advanced(&event_facts(plan.count), &stages::NotMade::Ceiling);
                return (false, decided(facts, plan, r, ev, now_ms));
            }
            HopWrite::AddFailed(e) => {
                let r = not_made(issue, plan, HopResult::Failed, &format!("add_failed: {e}"));
                let why = stages::NotMade::AddFailed(e);
                let ev = stages::not_advanced(&event_facts(plan.count), &why);
                return (false, decided(facts, plan, r, ev, now_ms));
            }
            HopWrite::Made { labels, left } => (labels, left),
        };
        let ev = stages::advanced(&event_facts(plan.count + 1), &left);
        let result = if left.is_empty() {
            HopResult::Advanced
        } else {
            HopResult::Partial
        };
        let hop = StageHop {
            issue_id: issue.id.clone(),
            identifier: issue.identifier.clone(),
            display_identifier: issue.display_identifier.clone(),
            hop_count: plan.count + 1,
            source_rule: plan.source_rule.clone(),
            target_rule: plan.target_rule.clone(),
            target_label: label.clone(),
            previous_outcome: Some(outcome),
            source_dispatch_id: facts.dispatch_id.clone(),
            chain_id: facts.route.chain_id.clone(),
            dispatched_at_ms: Some(facts.dispatched_at_ms),
            hopped_at_ms: now_ms,
            target_observed: false,
            picked_up: false,
            issue_title: issue.title.clone(),
            issue_url: issue.url.clone(),
            issue_type: issue.issue_type.clone(),
            state: issue.state.clone(),
            issue_labels: Some(labels),
        };
        log::info!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            source_rule:% = hop.source_rule,
            target_rule:% = hop.target_rule,
            target_label:% = label,
            hop_count:% = hop.hop_count,
            result:% = result.as_str(),
            stage_labels_left:% = crate::log_field::list(&left);
            "stage hop made"
        );
        let mut effects = vec![write(StageHopWrite::Save(Box::new(hop.clone())))];
        effects.extend(decided(facts, plan, result, ev, now_ms));
        self.hops.insert(issue.id.clone(), hop);
        (true, effects)
    }

    /// Drops the issue's hop record: the issue was seen outside the active states, or a park
    /// was placed or released on it, or it was handed off.
    pub(crate) fn reset(&mut self, issue_id: &str, trigger: &str) -> Vec<Effect> {
        let Some(h) = self.hops.remove(issue_id) else {
            return Vec::new();
        };
        self.between_holds.remove(issue_id);
        log::info!(
            issue_id:% = issue_id,
            issue_identifier:% = h.identifier,
            trigger:% = trigger,
            hop_count:% = h.hop_count;
            "stage hop count reset"
        );
        vec![write(StageHopWrite::Delete(issue_id.to_string()))]
    }

    /// A run of the issue was dispatched: it is no longer between stages.
    pub(crate) fn picked_up(&mut self, issue_id: &str) -> Vec<Effect> {
        self.between_holds.remove(issue_id);
        match self.hops.get_mut(issue_id) {
            Some(h) if !h.picked_up => {
                h.picked_up = true;
                h.target_observed = true;
                vec![write(StageHopWrite::Save(Box::new(h.clone())))]
            }
            _ => Vec::new(),
        }
    }

    /// Issue id → target label of each hop no read has confirmed yet: the poll reads these
    /// issues by id when the listing does not show the label.
    pub(crate) fn unconfirmed_targets(&self) -> BTreeMap<String, String> {
        self.hops
            .iter()
            .filter(|(_, h)| !h.target_observed && !h.picked_up)
            .map(|(id, h)| (id.clone(), h.target_label.clone()))
            .collect()
    }

    /// Confirms the hops no read has confirmed yet: a candidate listing that shows the target
    /// label confirms it; otherwise the poll's direct read (`reads`) does (and replaces the
    /// candidate's labels), or resets the count when the issue left the active states. A read
    /// that shows another configured stage label instead also releases the hold: a person put
    /// the issue on that stage. The issues still unconfirmed (the read failed, or shows no
    /// stage label) are held by the gate of the pass that follows.
    pub(crate) fn confirm(
        &mut self,
        candidates: &mut [std::sync::Arc<Issue>],
        mut reads: BTreeMap<String, crate::tracker::TrackerResult<Issue>>,
        tracker_kind: &str,
        cx: &Cx<'_>,
    ) -> Vec<Effect> {
        let mut held = BTreeMap::new();
        let mut effects = Vec::new();
        for issue in candidates.iter_mut() {
            let Some(hop) = self.hops.get(&issue.id) else {
                continue;
            };
            if hop.target_observed || hop.picked_up {
                continue;
            }
            let label = hop.target_label.clone();
            let carries = |labels: &[String]| labels.iter().any(|l| l.eq_ignore_ascii_case(&label));
            if carries(&issue.labels) {
                effects.extend(self.mark_observed(&issue.id));
                continue;
            }
            let read = reads.remove(&issue.id).unwrap_or_else(|| {
                Err(crate::tracker::TrackerError::new(
                    crate::tracker::TrackerErrorKind::Api,
                    tracker_kind,
                    "not read with this poll",
                ))
            });
            let cfg = &cx.workflow.config.tracker;
            match read {
                Ok(r) if state_in(&r.state, &cfg.terminal_states) => {
                    effects.extend(self.reset(&issue.id, "terminal"))
                }
                Ok(r) if !state_in(&r.state, &cfg.active_states) => {
                    effects.extend(self.reset(&issue.id, "not_active"))
                }
                Ok(r)
                    if carries(&r.labels)
                        || r.labels
                            .iter()
                            .any(|l| cx.workflow.config.dispatch.is_stage_label(l)) =>
                {
                    if !carries(&r.labels) {
                        log::info!(
                            issue_id:% = issue.id,
                            issue_identifier:% = issue.identifier,
                            target_label:% = label;
                            "stage hop target label absent, another stage label found, hold released"
                        );
                    }
                    std::sync::Arc::make_mut(issue).labels = r.labels;
                    effects.extend(self.mark_observed(&issue.id));
                }
                outcome => {
                    if let Err(e) = outcome {
                        log::warn!(
                            issue_id:% = issue.id,
                            issue_identifier:% = issue.identifier,
                            target_label:% = label,
                            error:% = e.to_string();
                            "stage hop target read failed, holding issue"
                        );
                    }
                    held.insert(issue.id.clone(), stages::unconfirmed_hold(&label));
                }
            }
        }
        self.unconfirmed = held;
        effects
    }

    /// Whether some hop still waits for its target to be seen: only then can
    /// [`StagesFeature::confirm`] change a candidate or hold one; otherwise it would walk
    /// the listing for nothing.
    pub(crate) fn awaits_confirmation(&self) -> bool {
        self.hops
            .values()
            .any(|hop| !hop.target_observed && !hop.picked_up)
    }

    /// The pass the confirmation was for has its input: its holds are spent.
    pub(crate) fn end_pass(&mut self) {
        self.unconfirmed.clear();
    }

    fn mark_observed(&mut self, issue_id: &str) -> Vec<Effect> {
        match self.hops.get_mut(issue_id) {
            Some(h) => {
                h.target_observed = true;
                vec![write(StageHopWrite::Save(Box::new(h.clone())))]
            }
            None => Vec::new(),
        }
    }

    /// The pass a poll-tick dispatch of `issue` runs in: the selection the rules give it, in
    /// the pass of the hop that reached it when it selects that hop's target, else a new pass
    /// dated `now`.
    pub(crate) fn poll_pass(&self, issue: &Issue, cfg: &ServiceConfig, now: i64) -> Pass {
        let hop = self.hops.get(&issue.id);
        let sel = routing::select(issue, cfg, hop);
        if !sel.several_stage_labels.is_empty() {
            log::warn!(
                issue_id:% = issue.id,
                issue_identifier:% = issue.identifier,
                stage_labels:% = crate::log_field::list(&sel.several_stage_labels),
                rule_name:% = sel.route.rule_name;
                "several stage labels found"
            );
        }
        let mut route = sel.route;
        let continued = hop.filter(|h| route.lineage.is_some() && !h.picked_up);
        match continued {
            Some(h) => {
                route.chain_id = if h.chain_id.is_empty() {
                    new_chain_id()
                } else {
                    h.chain_id.clone()
                };
                Pass {
                    dispatched_at_ms: h.dispatched_at_ms.unwrap_or(now),
                    route,
                }
            }
            None => {
                route.chain_id = new_chain_id();
                Pass {
                    dispatched_at_ms: now,
                    route,
                }
            }
        }
    }

    /// The pass a firing retry dispatches in: its frozen selection while the configuration
    /// still reaches its agent kind and holds its template; otherwise (or for a retry
    /// restored without a selection, as an interrupted session's) the selection the rules give
    /// the issue now, in the same pass.
    pub(crate) fn retry_pass(&self, info: &RetryInfo, issue: &Issue, cfg: &ServiceConfig) -> Pass {
        let mut pass = info.pass();
        let r = &pass.route;
        let unrouted =
            r.rule_name.is_empty() && r.template.is_empty() && !cfg.dispatch.rules.is_empty();
        let reachable = r.agent_kind.is_empty()
            || r.agent_kind == cfg.agent.kind
            || cfg.dispatch.default.agent.as_deref() == Some(r.agent_kind.as_str())
            || cfg
                .dispatch
                .rules
                .iter()
                .any(|x| x.selection.agent.as_deref() == Some(r.agent_kind.as_str()));
        let held = r.template.is_empty() || cfg.dispatch.templates.contains_key(&r.template);
        if !unrouted && reachable && held {
            return pass;
        }
        let hop = self.hops.get(&issue.id);
        let sel = routing::select(issue, cfg, hop);
        log::info!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            rule_name:% = sel.route.rule_name,
            agent_kind:% = sel.route.agent_kind;
            "retry dispatching on the selection the configuration in force gives it"
        );
        let chain_id = std::mem::take(&mut pass.route.chain_id);
        pass.route = sel.route;
        pass.route.chain_id = if chain_id.is_empty() {
            new_chain_id()
        } else {
            chain_id
        };
        pass
    }

    /// Moves the pass holds of issues between stages to their `between_stages[]` rows.
    pub(crate) fn split_between_holds(
        &mut self,
        held: &mut std::collections::HashMap<String, Held>,
    ) {
        let between: Vec<String> = held
            .keys()
            .filter(|id| self.hops.get(*id).is_some_and(|h| !h.picked_up))
            .cloned()
            .collect();
        self.between_holds.clear();
        for id in between {
            if let Some(h) = held.remove(&id) {
                self.between_holds.insert(id, h);
            }
        }
    }

    /// Empties the live passes the previous process left (nothing is restored from them).
    pub(crate) fn clear_live_passes(&mut self) -> Vec<Effect> {
        self.live_passes.clear();
        vec![write(StageHopWrite::ClearLivePasses)]
    }

    /// Writes the live passes that began or changed and ends the ones that are gone (at each
    /// full publish, only what changed since the last write).
    pub(crate) fn sync_live_passes(&mut self, cx: &Cx<'_>) -> Vec<Effect> {
        let next = stages::live_passes(
            cx.state,
            &self.hops,
            &self.live_passes,
            &cx.workflow.config,
            cx.now_ms,
        );
        if next == self.live_passes {
            return Vec::new();
        }
        let ended = self
            .live_passes
            .keys()
            .filter(|id| !next.contains_key(*id))
            .map(|id| write(StageHopWrite::EndLivePass(id.clone())));
        let changed = next
            .iter()
            .filter(|(id, p)| self.live_passes.get(*id) != Some(*p))
            .map(|(_, p)| write(StageHopWrite::LivePass(Box::new(p.clone()))));
        let effects = ended.chain(changed).collect();
        self.live_passes = next;
        effects
    }

    /// The hops no run has picked up, for issues neither running nor queued for a retry (as
    /// the snapshot lists them), sorted by identifier then issue id.
    fn between_stages(&self, snap: &Snapshot) -> Vec<BetweenStagesRow> {
        let claimed: HashSet<&str> = snap
            .running
            .iter()
            .map(|r| r.issue.id.as_str())
            .chain(snap.retrying.iter().map(|r| r.issue.id.as_str()))
            .collect();
        let mut rows: Vec<BetweenStagesRow> = self
            .hops
            .values()
            .filter(|h| h.between_stages())
            .filter(|h| !claimed.contains(h.issue_id.as_str()))
            .map(|h| BetweenStagesRow {
                hop: h.clone(),
                hold: self.between_holds.get(&h.issue_id).cloned(),
            })
            .collect();
        rows.sort_by(|a, b| {
            a.hop
                .identifier
                .cmp(&b.hop.identifier)
                .then_with(|| a.hop.issue_id.cmp(&b.hop.issue_id))
        });
        rows
    }
}

impl Feature for StagesFeature {
    /// A poll tick's pass holds each issue whose hop the poll's reads left unconfirmed: its
    /// next stage waits for a confirming read. A due retry's check holds nothing.
    fn gate(&self, _cx: &Cx<'_>, pass: PassKind) -> Option<Gate> {
        match pass {
            PassKind::Tick if !self.unconfirmed.is_empty() => {
                Some(Gate::Issues(self.unconfirmed.clone()))
            }
            _ => None,
        }
    }

    fn snapshot(&self, snap: &mut Snapshot, _now_ms: i64) {
        snap.between_stages = Arc::new(self.between_stages(snap));
        snap.hop_counts = Arc::new(
            self.hops
                .iter()
                .map(|(id, h)| (id.clone(), h.hop_count))
                .collect(),
        );
    }
}

/// Logs a due hop that was not made; returns its result.
fn not_made(issue: &Issue, plan: &HopPlan, result: HopResult, why: &str) -> HopResult {
    log::warn!(
        issue_id:% = issue.id,
        issue_identifier:% = issue.identifier,
        reason:% = why,
        source_rule:% = plan.source_rule,
        target_rule:% = plan.target_rule,
        target_label:% = plan.target_label,
        hop_count:% = plan.count,
        hop_ceiling:% = plan.ceiling;
        "stage hop not made"
    );
    result
}

/// The writes of a hop decision on the run that reached it: the run row's target stage and
/// result, then the stage event (the run events route, the issue page and the event stream
/// serve it from there).
fn decided(
    facts: &RunFacts,
    plan: &HopPlan,
    result: HopResult,
    (event_type, payload): (&str, serde_json::Value),
    now_ms: i64,
) -> Vec<Effect> {
    vec![
        write(StageHopWrite::RunStage {
            dispatch_id: facts.dispatch_id.clone(),
            target: plan.target_rule.clone(),
            result: result.as_str().to_string(),
        }),
        write(StageHopWrite::RunEvent {
            dispatch_id: facts.dispatch_id.clone(),
            at_ms: now_ms,
            event_type: event_type.to_string(),
            payload,
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orchestrator::core::feature_world::World;
    use crate::orchestrator::core::snapshot::RetryRow;

    fn world() -> World {
        World::at(1_000)
    }

    fn hop(id: &str) -> StageHop {
        StageHop {
            issue_id: id.into(),
            identifier: format!("T-{id}"),
            hop_count: 1,
            source_rule: "specify".into(),
            target_rule: "implement".into(),
            target_label: "stage-implement".into(),
            ..Default::default()
        }
    }

    fn issue(id: &str, labels: &[&str]) -> Issue {
        Issue {
            id: id.into(),
            identifier: format!("T-{id}"),
            title: "t".into(),
            state: "To Do".into(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn the_hops_a_poll_left_unconfirmed_hold_the_pass_after_its_reads_alone() {
        let w = world();
        let mut f = StagesFeature::default();
        f.restore(vec![hop("1"), hop("2"), hop("3")]);
        let mut candidates = vec![
            Arc::new(issue("1", &["Stage-Implement"])),
            Arc::new(issue("2", &[])),
            Arc::new(issue("3", &[])),
        ];
        let done = Issue {
            state: "Done".into(),
            ..issue("3", &[])
        };
        let reads = BTreeMap::from([("3".to_string(), Ok(done))]);
        let effects = f.confirm(&mut candidates, reads, "file", &w.cx());
        // 1: the listing shows the label; 3: the read finds it terminal; 2: not read.
        assert_eq!(effects.len(), 2, "{effects:?}");
        assert!(matches!(
            &effects[0],
            Effect::Write(Write::StageHop(StageHopWrite::Save(h)))
                if h.issue_id == "1" && h.target_observed
        ));
        assert!(
            matches!(
                &effects[1],
                Effect::Write(Write::StageHop(StageHopWrite::Delete(id))) if id == "3"
            ),
            "{effects:?}"
        );
        let held = BTreeMap::from([("2".to_string(), stages::unconfirmed_hold("stage-implement"))]);
        assert_eq!(f.gate(&w.cx(), PassKind::Tick), Some(Gate::Issues(held)));
        assert_eq!(f.gate(&w.cx(), PassKind::Retry), None);
        f.end_pass();
        assert_eq!(
            f.gate(&w.cx(), PassKind::Tick),
            None,
            "the next tick's blocker read-ahead holds nothing"
        );
        let targets: Vec<String> = f.unconfirmed_targets().into_keys().collect();
        assert_eq!(targets, vec!["2"]);
        assert_eq!(f.hop_count(), 2);
        let hold = stages::unconfirmed_hold("stage-implement");
        assert_eq!(hold.code().as_str(), "stage_hop_unconfirmed");
    }

    #[test]
    fn between_stages_lists_the_unclaimed_hops_with_their_pass_holds() {
        let mut f = StagesFeature::default();
        let picked = StageHop {
            picked_up: true,
            ..hop("3")
        };
        f.restore(vec![hop("1"), hop("2"), picked]);
        let held_row = |id: &str| Held {
            issue: Arc::new(issue(id, &[])),
            reason: stages::unconfirmed_hold("stage-implement"),
            since_ms: 5,
        };
        let mut held = std::collections::HashMap::from([
            ("1".to_string(), held_row("1")),
            ("9".to_string(), held_row("9")),
        ]);
        f.split_between_holds(&mut held);
        assert_eq!(held.keys().collect::<Vec<_>>(), vec!["9"]);
        let mut snap = Snapshot {
            retrying: Arc::new(vec![RetryRow {
                issue: issue("2", &[]),
                attempt: 1,
                due_at_ms: 0,
                error: None,
                trigger: crate::domain::RetryTrigger::Timer,
                dispatched_at_ms: 0,
                route: Default::default(),
                reaction: None,
            }]),
            ..Default::default()
        };
        f.snapshot(&mut snap, 0);
        let rows: Vec<(&str, bool)> = snap
            .between_stages
            .iter()
            .map(|r| (r.hop.issue_id.as_str(), r.hold.is_some()))
            .collect();
        assert_eq!(rows, vec![("1", true)]);
        assert_eq!(snap.hop_counts.len(), 3);
        // A dispatch picks the hop up once: its row is saved, and it leaves `between_stages`.
        assert_eq!(f.picked_up("1").len(), 1);
        assert!(f.picked_up("1").is_empty());
        f.snapshot(&mut snap, 0);
        assert!(snap.between_stages.is_empty());
    }
}
