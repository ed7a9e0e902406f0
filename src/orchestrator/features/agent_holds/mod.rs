//! Holds on a whole agent kind, not one issue: a provider usage limit (until its reset) and a
//! failed agent login (until a person acts). While one applies, no new session of that kind
//! starts, and the dispatch pass lists every issue it stops as held with the hold's reason.
//!
//! What survives a restart, following "every fact in SQLite":
//! - A usage hold is stored (`agent_usage_holds`) and restored at start. It cannot be rebuilt
//!   from the rest: the refused issue's retry row keeps only a due time, which is the backoff
//!   end when that is later than the reset, and names neither the kind nor the model scope.
//!   Without the row, a restart before the reset would dispatch every other issue of the kind
//!   into a refusal, each spending a session of its budget.
//! - A login hold is not stored: it lifts on every successful workflow load, and a restart
//!   loads the workflow, so a stored one would be lifted at once.

pub mod feature;
pub(crate) mod hooks;
pub mod rate_limits;

use std::collections::BTreeMap;

use crate::orchestrator::claim::dispatch_pass::HoldReason;

/// A usage limit on one agent kind, on every model or on the configured model alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageHold {
    pub agent_kind: String,
    /// The limit named a model, and it is the one the workflow configures (or the runtime's
    /// default when the workflow names none): only sessions on that model are stopped.
    pub model_only: bool,
    /// The configured model a `model_only` hold stops; `None` for the runtime's default model
    /// and for a hold on every model.
    pub model: Option<String>,
    pub resets_at_ms: i64,
    /// When the hold began.
    pub since_ms: i64,
}

impl UsageHold {
    /// Whether a session of `kind` on the configured `model` is stopped by this hold.
    fn stops(&self, kind: &str, model: Option<&str>) -> bool {
        self.agent_kind == kind && (!self.model_only || self.model.as_deref() == model)
    }

    fn same_scope(&self, other: &UsageHold) -> bool {
        self.agent_kind == other.agent_kind
            && self.model_only == other.model_only
            && self.model == other.model
    }
}

/// A failed login of one agent kind: no session of it can succeed until a person logs the
/// agent's CLI in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthHold {
    pub agent_kind: String,
    /// The agent's own message, masked.
    pub message: String,
    pub since_ms: i64,
}

/// Every agent-kind hold in force.
#[derive(Debug, Clone, Default)]
pub struct AgentHolds {
    pub usage: Vec<UsageHold>,
    /// By agent kind.
    pub auth: BTreeMap<String, AuthHold>,
}

impl AgentHolds {
    /// Records a usage limit; a limit of the same scope keeps the later reset and the time the
    /// hold began.
    pub fn note_usage_limit(&mut self, hold: UsageHold) {
        match self.usage.iter_mut().find(|h| h.same_scope(&hold)) {
            Some(h) => h.resets_at_ms = h.resets_at_ms.max(hold.resets_at_ms),
            None => self.usage.push(hold),
        }
    }

    /// Records a failed login; a hold already in force keeps the time it began.
    pub fn note_auth_failed(&mut self, hold: AuthHold) {
        self.auth.entry(hold.agent_kind.clone()).or_insert(hold);
    }

    /// Lifts the login hold of `kind`; true when there was one.
    pub fn lift_auth(&mut self, kind: &str) -> bool {
        self.auth.remove(kind).is_some()
    }

    /// Lifts every login hold; returns the kinds that were held.
    pub fn lift_all_auth(&mut self) -> Vec<String> {
        std::mem::take(&mut self.auth).into_keys().collect()
    }

    /// Drops the usage holds that no dispatch honours any more: a poll-tick dispatch stays
    /// held for `grace_ms` (one poll interval) past the reset.
    pub fn prune(&mut self, now_ms: i64, grace_ms: i64) -> Vec<UsageHold> {
        let (ended, kept) = std::mem::take(&mut self.usage)
            .into_iter()
            .partition(|h| now_ms >= h.resets_at_ms.saturating_add(grace_ms));
        self.usage = kept;
        ended
    }

    /// The hold that stops a new session of `kind` on the configured `model` at `now_ms`: a
    /// login hold first (no reset lifts it), then the usage hold that resets last. `grace_ms`
    /// extends a usage hold past its reset: one poll interval for a poll-tick dispatch, 0 for a
    /// retry (the refused issue's own retry fires at the reset).
    pub fn hold_for(
        &self,
        kind: &str,
        model: Option<&str>,
        now_ms: i64,
        grace_ms: i64,
    ) -> Option<HoldReason> {
        if self.auth.contains_key(kind) {
            return Some(HoldReason::AgentAuthFailed {
                agent_kind: kind.to_string(),
            });
        }
        self.usage
            .iter()
            .filter(|h| h.stops(kind, model) && now_ms < h.resets_at_ms.saturating_add(grace_ms))
            .max_by_key(|h| h.resets_at_ms)
            .map(|h| HoldReason::UsageLimit {
                agent_kind: h.agent_kind.clone(),
                resets_at_ms: h.resets_at_ms,
                model_only: h.model_only,
                model: h.model.clone(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(model_only: bool, model: Option<&str>, resets: i64) -> UsageHold {
        UsageHold {
            agent_kind: "k".into(),
            model_only,
            model: model.map(str::to_string),
            resets_at_ms: resets,
            since_ms: 0,
        }
    }

    #[test]
    fn a_usage_hold_lasts_one_grace_past_its_reset_for_ticks_and_none_for_retries() {
        let mut h = AgentHolds::default();
        h.note_usage_limit(hold(false, None, 10_000));
        assert!(h.hold_for("k", None, 9_999, 0).is_some());
        assert!(
            h.hold_for("k", None, 10_000, 0).is_none(),
            "a retry goes at the reset"
        );
        assert!(
            h.hold_for("k", None, 10_999, 1_000).is_some(),
            "a tick waits one interval"
        );
        assert!(h.hold_for("k", None, 11_000, 1_000).is_none());
        assert!(h.hold_for("other", None, 0, 0).is_none());
        assert!(h.prune(10_999, 1_000).is_empty());
        assert_eq!(h.prune(11_000, 1_000).len(), 1);
        assert!(h.usage.is_empty());
    }

    #[test]
    fn a_model_only_hold_stops_that_configured_model_alone() {
        let mut h = AgentHolds::default();
        h.note_usage_limit(hold(true, Some("big"), 10_000));
        assert!(h.hold_for("k", Some("big"), 0, 0).is_some());
        assert!(h.hold_for("k", Some("small"), 0, 0).is_none());
        assert!(h.hold_for("k", None, 0, 0).is_none());
        h.note_usage_limit(hold(true, Some("big"), 20_000));
        assert_eq!(h.usage.len(), 1, "the same scope keeps one hold");
        assert_eq!(h.usage[0].resets_at_ms, 20_000);
    }

    #[test]
    fn a_login_hold_wins_over_a_usage_hold_and_lifts_on_request() {
        let mut h = AgentHolds::default();
        h.note_usage_limit(hold(false, None, 10_000));
        h.note_auth_failed(AuthHold {
            agent_kind: "k".into(),
            message: "not logged in".into(),
            since_ms: 5,
        });
        assert_eq!(
            h.hold_for("k", None, 0, 0).map(|r| r.code().as_str()),
            Some("agent_auth_failed")
        );
        assert!(h.lift_auth("k"));
        assert_eq!(
            h.hold_for("k", None, 0, 0).map(|r| r.code().as_str()),
            Some("usage_limit")
        );
    }
}
