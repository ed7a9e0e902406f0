//! A live session's spend priced under a [`RateBook`]: the one place that turns a session's
//! figures into the pricing inputs, used for the live estimates and, at the session's end,
//! for the cost its run row freezes.

use std::collections::BTreeMap;

use crate::agent::UsageAttribution;
use crate::agent::event::TokenUsage;
use crate::pricing::{AgentAmount, RateBook, RunPrice, UsageCompleteness};

use crate::orchestrator::core::state::RunFacts;

/// The unit of an agent-reported US-dollar amount among a session's vendor amounts.
pub const USD_UNIT: &str = crate::agent::event::USD_UNIT;

/// How far the session's token figure reaches.
pub fn completeness(facts: &RunFacts) -> UsageCompleteness {
    if !facts.tokens_measured {
        UsageCompleteness::Unmeasured
    } else if facts.turns_without_figure > 0 {
        UsageCompleteness::LowerBound
    } else {
        UsageCompleteness::Complete
    }
}

/// The session's spend per model: the agent's own split when its kind attributes figures per
/// model, else one part under the reported model (`""` when it named none).
pub fn model_parts(facts: &RunFacts, agent_kind: &str) -> Vec<(String, TokenUsage)> {
    let per_model = crate::registry::caps_for_kind(agent_kind)
        .is_some_and(|c| c.usage_attribution == UsageAttribution::PerModel);
    if per_model && !facts.by_model.is_empty() {
        return facts
            .by_model
            .iter()
            .map(|(m, part)| (m.clone(), part.tokens))
            .collect();
    }
    let model = facts.reported_model.clone().unwrap_or_default();
    vec![(model, facts.tokens)]
}

/// US-dollar amounts the agent reported, per model.
pub fn agent_usd(facts: &RunFacts) -> BTreeMap<String, AgentAmount> {
    facts
        .vendor_amounts
        .iter()
        .filter(|((unit, _), _)| unit == USD_UNIT)
        .map(|((_, model), usd)| {
            let amount = AgentAmount {
                usd: *usd,
                lower_bound: facts.turns_without_figure > 0,
            };
            (model.clone(), amount)
        })
        .collect()
}

/// The session's spend so far, priced.
pub fn session_price(facts: &RunFacts, agent_kind: &str, book: &RateBook) -> RunPrice {
    book.price_run(
        agent_kind,
        completeness(facts),
        &facts.tokens,
        &model_parts(facts, agent_kind),
        &agent_usd(facts),
    )
}
