//! `GET /api/v1/prices`: the rates in force when the request is served (nothing cached), per
//! agent kind and model, and the state of every price source.

use std::collections::BTreeSet;

use super::AppState;
use super::respond::{ApiError, JsonReply};
use super::views::prices::{
    PriceModelView, PriceSourceView, PricesDoc, TableInForceView, TokenRatesCountView,
};
use super::views::{base_name, to_value, ts};
use crate::pricing::RateBook;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

pub fn prices(state: &AppState) -> Result<JsonReply, ApiError> {
    let now = state.clock.now_ms();
    let snap = state.orch.snapshot();
    let used = state
        .store
        .read_pool()
        .get()
        .map_err(ApiError::history_unavailable)?
        .model_use()
        .map_err(ApiError::history_unavailable)?;
    let book = state.orch.prices.current();
    let sources = state.orch.prices.sources_state();
    let workflow_path = snap.workflow_path.clone();
    let workflow_file = base_name(&workflow_path).unwrap_or_default();
    let mask = move |e: &str| {
        let masked = crate::mask::mask(e);
        if workflow_path.is_empty() {
            masked
        } else {
            masked.replace(&workflow_path, &workflow_file)
        }
    };
    let mut models: Vec<PriceModelView> = used
        .iter()
        .map(|u| {
            row(
                &book,
                &u.agent_kind,
                &u.model,
                Some(u.last_used_at.clone()),
                u.runs,
            )
        })
        .collect();
    let seen: BTreeSet<(String, String)> = used
        .iter()
        .map(|u| (u.agent_kind.clone(), u.model.clone()))
        .collect();
    let configured = [(
        snap.config.agent_kind.clone(),
        snap.config.configured_model.clone(),
    )];
    let mut named: Vec<(String, String)> = configured
        .into_iter()
        .filter_map(|(k, m)| Some((k, m?)))
        .filter(|pair| !seen.contains(pair))
        .collect();
    named.sort();
    named.dedup();
    models.extend(named.iter().map(|(k, m)| row(&book, k, m, None, 0)));
    let doc = PricesDoc {
        generated_at: ts(now),
        table_in_force: book.tables.first().map(|t| TableInForceView {
            layer: t.layer.into(),
            as_of: t.as_of.clone(),
            age_days: age_days(&t.as_of, now),
        }),
        token_rates: TokenRatesCountView {
            kind_entries: book.token_rates.kind_entries(),
            model_entries: book.token_rates.model_entries(),
            version: book.token_rates.version(),
        },
        operator: sources
            .operator
            .as_ref()
            .map(|s| PriceSourceView::build(s, &mask)),
        fetched: PriceSourceView::build(&sources.fetched, &mask),
        embedded: PriceSourceView::build(&sources.embedded, &mask),
        models,
    };
    Ok(JsonReply::ok(to_value(&doc)))
}

fn row(
    book: &RateBook,
    agent_kind: &str,
    model: &str,
    last_used_at: Option<String>,
    runs: i64,
) -> PriceModelView {
    let table_key = book
        .tables
        .iter()
        .find_map(|t| t.lookup_key(model).map(|(k, _)| k.to_string()));
    let resolved = book.resolve(agent_kind, model);
    PriceModelView::build(agent_kind, model, table_key, &resolved, last_used_at, runs)
}

/// Whole days from `as_of` to `now_ms`, never below 0 (0 for a date that does not parse).
fn age_days(as_of: &str, now_ms: i64) -> u64 {
    let Ok(t) = as_of.parse::<jiff::Timestamp>() else {
        return 0;
    };
    u64::try_from((now_ms - t.as_millisecond()) / DAY_MS).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn age_is_whole_days_and_never_negative() {
        let t0 = "2026-11-20T04:05:34Z".parse::<jiff::Timestamp>().unwrap();
        let at = |d: i64| t0.as_millisecond() + d;
        assert_eq!(age_days("2026-11-20T04:05:34Z", at(0)), 0);
        assert_eq!(age_days("2026-11-20T04:05:34Z", at(2 * DAY_MS - 1)), 1);
        assert_eq!(age_days("2026-11-20T04:05:34Z", at(-DAY_MS * 3)), 0);
        assert_eq!(age_days("nope", at(0)), 0);
    }
}
