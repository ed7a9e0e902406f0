//! Stage chains on `orch`: the hop a successful exit makes in place of the handoff write, the
//! read that confirms a hop before its next stage dispatches, the pass a poll-tick dispatch
//! starts or continues, and the resets of an issue's consecutive-hop count.

use std::collections::BTreeMap;

use crate::domain::stage::{HopResult, StageHop, StageOutcome, new_chain_id};
use crate::orchestrator::core::orchestrator::*;
use crate::orchestrator::features::stages;

/// A stage hop a successful exit would make, decided on `orch` from the configuration in
/// force: the labels it writes are written off it ([`HopPlan::write`]) and the outcome
/// applied by [`Orchestrator::apply_stage_hop`].
#[derive(Debug, Clone)]
pub(crate) struct HopPlan {
    source_rule: String,
    target_rule: String,
    target_label: String,
    /// The issue's consecutive hops so far.
    count: u32,
    ceiling: u32,
    /// Configured stage labels other than the target that the dispatch read showed: each is
    /// removed.
    stale: Vec<String>,
    /// The labels the dispatch read showed.
    labels: Vec<String>,
}

/// What the label writes of a hop did.
#[derive(Debug, Clone)]
pub(crate) enum HopWrite {
    /// One more hop would pass the ceiling: no write made.
    Ceiling,
    /// The target label could not be added.
    AddFailed(String),
    /// The target label was added; `labels` are the issue's labels after the hop and `left`
    /// the stale stage labels whose removal failed.
    Made {
        labels: Vec<String>,
        left: Vec<String>,
    },
}

impl HopPlan {
    /// The tracker writes of the hop (off `orch`): the target label, then the removal of
    /// every stale stage label.
    pub(crate) fn write(&self, tracker: &dyn TrackerAdapter, issue: &Issue) -> HopWrite {
        if self.count + 1 > self.ceiling {
            return HopWrite::Ceiling;
        }
        if let Err(e) = tracker.add_label(&issue.id, &self.target_label) {
            return HopWrite::AddFailed(e.to_string());
        }
        let mut labels = Vec::new();
        let mut left = Vec::new();
        for l in &self.labels {
            if !self.stale.contains(l) {
                labels.push(l.clone());
                continue;
            }
            if let Err(e) = tracker.remove_label(&issue.id, l) {
                log::warn!(
                    issue_id:% = issue.id,
                    issue_identifier:% = issue.identifier,
                    label:% = l,
                    error:% = e.to_string();
                    "stage label not removed"
                );
                left.push(l.clone());
                labels.push(l.clone());
            }
        }
        if !labels
            .iter()
            .any(|l| l.eq_ignore_ascii_case(&self.target_label))
        {
            labels.push(self.target_label.to_lowercase());
        }
        HopWrite::Made { labels, left }
    }
}

impl Orchestrator {
    /// The hop a successful run whose rule carries `next` (read from the configuration in
    /// force now) would make; `None` when its rule has no next stage with a label.
    pub(crate) fn plan_stage_hop(&self, entry: &RunningEntry) -> Option<HopPlan> {
        let d = &self.workflow.config.dispatch;
        let facts = &entry.facts;
        let source = d
            .rule(&facts.route.rule_name)
            .filter(|r| r.next.is_some())?;
        let (target, label) = source
            .next
            .as_deref()
            .and_then(|n| d.rule(n))
            .and_then(|t| t.stage.clone().map(|l| (t, l)))?;
        let issue = &facts.issue;
        let count = self
            .state
            .stage_hops
            .get(&issue.id)
            .map_or(0, |h| h.hop_count);
        Some(HopPlan {
            source_rule: source.name.clone(),
            target_rule: target.name.clone(),
            count,
            ceiling: d.hop_ceiling(),
            stale: issue
                .labels
                .iter()
                .filter(|l| d.is_stage_label(l) && !l.eq_ignore_ascii_case(&label))
                .cloned()
                .collect(),
            labels: issue.labels.clone(),
            target_label: label,
        })
    }

    /// Applies what a hop's writes did. `true` when the hop was made: the caller releases the
    /// claim and writes no handoff. Otherwise the exit takes the handoff write.
    pub(crate) fn apply_stage_hop(
        &mut self,
        entry: &RunningEntry,
        plan: &HopPlan,
        write: HopWrite,
        outcome: StageOutcome,
    ) -> bool {
        let facts = &entry.facts;
        let issue = &facts.issue;
        let label = &plan.target_label;
        let not_made = |result: HopResult, why: &str| {
            log::warn!(
                issue_id:% = issue.id,
                issue_identifier:% = issue.identifier,
                reason:% = why,
                source_rule:% = plan.source_rule,
                target_rule:% = plan.target_rule,
                target_label:% = label,
                hop_count:% = plan.count,
                hop_ceiling:% = plan.ceiling;
                "stage hop not made"
            );
            result
        };
        let event_facts = |hop_count| stages::HopFacts {
            issue,
            source_rule: &plan.source_rule,
            target_rule: &plan.target_rule,
            target_label: label,
            chain_id: &facts.route.chain_id,
            hop_count,
            ceiling: plan.ceiling,
        };
        let (labels, left) = match write {
            HopWrite::Ceiling => {
                let r = not_made(HopResult::Ceiling, "ceiling");
                persist::set_run_stage(&self.store, &facts.dispatch_id, &plan.target_rule, r);
                let ev = stages::not_advanced(&event_facts(plan.count), &stages::NotMade::Ceiling);
                self.add_stage_event(&facts.dispatch_id, ev);
                return false;
            }
            HopWrite::AddFailed(e) => {
                let r = not_made(HopResult::Failed, &format!("add_failed: {e}"));
                persist::set_run_stage(&self.store, &facts.dispatch_id, &plan.target_rule, r);
                let why = stages::NotMade::AddFailed(e);
                let ev = stages::not_advanced(&event_facts(plan.count), &why);
                self.add_stage_event(&facts.dispatch_id, ev);
                return false;
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
            hopped_at_ms: self.clock.now_ms(),
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
        persist::save_stage_hop(&self.store, &hop);
        persist::set_run_stage(&self.store, &facts.dispatch_id, &plan.target_rule, result);
        self.add_stage_event(&facts.dispatch_id, ev);
        self.state.stage_hops.insert(issue.id.clone(), hop);
        self.drop_issue_reactions(&issue.id);
        true
    }

    /// Adds a stage event to the stored events of the run that reached the hop decision (the
    /// run events route, the issue page and the event stream serve it from there).
    fn add_stage_event(&self, dispatch_id: &str, (event_type, payload): (&str, serde_json::Value)) {
        let w = crate::store::StageHopWrite::RunEvent {
            dispatch_id: dispatch_id.to_string(),
            at_ms: self.clock.now_ms(),
            event_type: event_type.to_string(),
            payload,
        };
        if let Err(e) = self.store.writer().stage_hop(w) {
            log::warn!(
                dispatch_id:% = dispatch_id,
                event:% = event_type,
                error:% = e.to_string();
                "stage event not saved"
            );
        }
    }

    /// The hop belongs to the claim being released: its pending reactions go with it.
    fn drop_issue_reactions(&mut self, issue_id: &str) {
        self.features.reactions.drop_issue(issue_id);
    }

    /// Whether the exit of `entry` made a hop (its reactions are not seeded).
    pub(crate) fn hopped(&self, entry: &RunningEntry) -> bool {
        self.state
            .stage_hops
            .get(&entry.facts.issue.id)
            .is_some_and(|h| h.source_dispatch_id == entry.facts.dispatch_id)
    }

    /// Drops the issue's hop record: the issue was seen outside the active states, or a park
    /// was placed or released on it.
    pub(crate) fn reset_hops(&mut self, issue_id: &str, trigger: &str) {
        if let Some(h) = self.state.stage_hops.remove(issue_id) {
            self.state.between_holds.remove(issue_id);
            persist::delete_stage_hop(&self.store, issue_id);
            log::info!(
                issue_id:% = issue_id,
                issue_identifier:% = h.identifier,
                trigger:% = trigger,
                hop_count:% = h.hop_count;
                "stage hop count reset"
            );
        }
    }

    /// A run of the issue was dispatched: it is no longer between stages.
    pub(crate) fn note_picked_up(&mut self, issue_id: &str) {
        self.state.between_holds.remove(issue_id);
        if let Some(h) = self.state.stage_hops.get_mut(issue_id)
            && !h.picked_up
        {
            h.picked_up = true;
            h.target_observed = true;
            persist::save_stage_hop(&self.store, h);
        }
    }

    /// Confirms the hops no read has confirmed yet: a candidate listing that shows the target
    /// label confirms it; otherwise the poll's direct read (`reads`) does (and replaces the
    /// candidate's labels),
    /// or resets the count when the issue left the active states. A read that shows another
    /// configured stage label instead also releases the hold: a person put the issue on that
    /// stage. Returns the issues still held with `stage_hop_unconfirmed` (the read failed, or
    /// shows no stage label).
    pub(crate) fn confirm_hops(
        &mut self,
        candidates: &mut [Issue],
        mut reads: BTreeMap<String, crate::tracker::TrackerResult<Issue>>,
    ) -> BTreeMap<String, HoldReason> {
        let mut held = BTreeMap::new();
        for issue in candidates.iter_mut() {
            let Some(hop) = self.state.stage_hops.get(&issue.id) else {
                continue;
            };
            if hop.target_observed || hop.picked_up {
                continue;
            }
            let label = hop.target_label.clone();
            let rule = hop.target_rule.clone();
            let carries = |labels: &[String]| labels.iter().any(|l| l.eq_ignore_ascii_case(&label));
            if carries(&issue.labels) {
                self.mark_observed(&issue.id);
                continue;
            }
            let read = reads.remove(&issue.id).unwrap_or_else(|| {
                Err(crate::tracker::TrackerError::new(
                    crate::tracker::TrackerErrorKind::Api,
                    self.tracker.kind(),
                    "not read with this poll",
                ))
            });
            let cfg = &self.workflow.config.tracker;
            match read {
                Ok(r) if state_in(&r.state, &cfg.terminal_states) => {
                    self.reset_hops(&issue.id, "terminal")
                }
                Ok(r) if !state_in(&r.state, &cfg.active_states) => {
                    self.reset_hops(&issue.id, "not_active")
                }
                Ok(r)
                    if carries(&r.labels)
                        || r.labels
                            .iter()
                            .any(|l| self.workflow.config.dispatch.is_stage_label(l)) =>
                {
                    if !carries(&r.labels) {
                        log::info!(
                            issue_id:% = issue.id,
                            issue_identifier:% = issue.identifier,
                            target_label:% = label;
                            "stage hop target label absent, another stage label found, hold released"
                        );
                    }
                    issue.labels = r.labels;
                    self.mark_observed(&issue.id);
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
                    held.insert(
                        issue.id.clone(),
                        HoldReason::StageHopUnconfirmed {
                            target_rule: rule,
                            target_label: label,
                        },
                    );
                }
            }
        }
        held
    }

    fn mark_observed(&mut self, issue_id: &str) {
        if let Some(h) = self.state.stage_hops.get_mut(issue_id) {
            h.target_observed = true;
            persist::save_stage_hop(&self.store, h);
        }
    }

    /// The pass a poll-tick dispatch of `issue` runs in: the selection the rules give it, in
    /// the pass of the hop that reached it when it selects that hop's target, else a new pass
    /// dated `now`.
    pub(crate) fn poll_pass(&self, issue: &Issue, now: i64) -> Pass {
        let hop = self.state.stage_hops.get(&issue.id);
        let sel = crate::orchestrator::features::stages::routing::select(
            issue,
            &self.workflow.config,
            hop,
        );
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
    pub(crate) fn retry_pass(&self, info: &RetryInfo, issue: &Issue) -> Pass {
        let mut pass = info.pass();
        let cfg = &self.workflow.config;
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
        let hop = self.state.stage_hops.get(&issue.id);
        let sel = crate::orchestrator::features::stages::routing::select(issue, cfg, hop);
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
    pub(crate) fn split_between_holds(&mut self, held: &mut BTreeMap<String, Held>) {
        let between: Vec<String> = held
            .keys()
            .filter(|id| self.state.stage_hops.get(*id).is_some_and(|h| !h.picked_up))
            .cloned()
            .collect();
        self.state.between_holds.clear();
        for id in between {
            if let Some(h) = held.remove(&id) {
                self.state.between_holds.insert(id, h);
            }
        }
    }
}
