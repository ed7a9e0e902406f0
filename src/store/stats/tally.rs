//! One group's running figures, and how they read once every run is in. The summary, every
//! breakdown group and every spend bucket are tallies over different sets of runs.

use std::collections::{BTreeMap, BTreeSet};

use super::report::{Duration, Group, Tokens, ratio, round, usd};
use super::rows::{Completeness, CostWord, ModelPart, Outcome, StatRun};

/// What one run, or one model's part of it, adds to a group.
pub struct Share<'a> {
    pub run: &'a StatRun,
    pub tokens: Option<[i64; 5]>,
    pub cost: Option<f64>,
    pub cost_status: CostWord,
    pub agent_priced: Option<f64>,
}

impl<'a> Share<'a> {
    /// The whole run.
    pub fn whole(run: &'a StatRun) -> Share<'a> {
        Share {
            run,
            tokens: run.tokens,
            cost: run.cost,
            cost_status: run.cost_status,
            agent_priced: run.agent_priced_usd(),
        }
    }

    /// One model's part of the run (the by-model breakdown).
    pub fn part(run: &'a StatRun, part: &ModelPart) -> Share<'a> {
        Share {
            run,
            tokens: Some(part.tokens),
            cost: part.cost,
            cost_status: part.cost_status,
            agent_priced: part.agent_priced.then(|| part.cost.unwrap_or(0.0)),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub runs: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub stopped: u64,
    pub cancelled: u64,
    /// Positive durations.
    durations_ms: Vec<i64>,
    pub zero_duration: u64,
    pub duration_excluded: u64,
    turns: i64,
    turns_succeeded: i64,
    tokens: [i64; 5],
    measured: u64,
    cost: f64,
    costed: u64,
    pub unpriced: u64,
    pub partial: u64,
    pub unmeasured: u64,
    pub lower_bound: u64,
    agent_priced: Option<f64>,
    causes: BTreeSet<String>,
    units: BTreeSet<String>,
}

impl Tally {
    pub fn add(&mut self, s: &Share<'_>) {
        let r = s.run;
        self.runs += 1;
        match r.outcome {
            Outcome::Succeeded => {
                self.succeeded += 1;
                self.turns_succeeded += r.turns;
            }
            Outcome::Failed => self.failed += 1,
            Outcome::Stopped => self.stopped += 1,
            Outcome::Cancelled => self.cancelled += 1,
        }
        self.turns += r.turns;
        match r.duration_ms {
            Some(d) if d > 0 => self.durations_ms.push(d),
            Some(_) => {
                self.zero_duration += 1;
                self.duration_excluded += 1;
            }
            None => self.duration_excluded += 1,
        }
        if let Some(t) = s.tokens {
            self.measured += 1;
            for (sum, v) in self.tokens.iter_mut().zip(t) {
                *sum = sum.saturating_add(v);
            }
        }
        if let Some(c) = s.cost {
            self.cost += c;
            self.costed += 1;
        }
        match s.cost_status {
            CostWord::Unpriced => self.unpriced += 1,
            CostWord::Partial => self.partial += 1,
            CostWord::Estimated | CostWord::Unmeasured => {}
        }
        match r.completeness {
            Completeness::Unmeasured => self.unmeasured += 1,
            Completeness::LowerBound => self.lower_bound += 1,
            Completeness::Complete => {}
        }
        if let Some(a) = s.agent_priced {
            *self.agent_priced.get_or_insert(0.0) += a;
        }
        if let Some(c) = &r.unmeasured_cause {
            self.causes.insert(c.clone());
        }
        self.units.extend(r.unmeasured_units.iter().cloned());
    }

    /// Percentiles by nearest rank over the positive durations, in seconds.
    pub fn duration(&self) -> Duration {
        let mut d = self.durations_ms.clone();
        d.sort_unstable();
        let secs = |ms: i64| round(ms as f64 / 1000.0, 3);
        let rank = |p: f64| {
            let i = (p * d.len() as f64).ceil() as usize;
            d.get(i.saturating_sub(1)).copied().map(secs)
        };
        let total: i64 = d.iter().sum();
        Duration {
            p50: rank(0.50),
            p95: rank(0.95),
            mean: (!d.is_empty()).then(|| round(total as f64 / d.len() as f64 / 1000.0, 3)),
            samples: d.len() as u64,
        }
    }

    pub fn mean_turns(&self) -> Option<f64> {
        (self.runs > 0).then(|| round(self.turns as f64 / self.runs as f64, 2))
    }

    pub fn mean_turns_succeeded(&self) -> Option<f64> {
        (self.succeeded > 0).then(|| round(self.turns_succeeded as f64 / self.succeeded as f64, 2))
    }

    /// The sums of the measured runs; `None` when no run was measured.
    pub fn tokens(&self) -> Option<Tokens> {
        let [input, output, total, cache_read, cache_write] = self.tokens;
        (self.measured > 0).then_some(Tokens {
            input,
            output,
            total,
            cache_read,
            cache_write,
            uncached: (total - cache_read).max(0),
        })
    }

    /// The recorded costs summed; `None` when no run carries one.
    pub fn cost_usd(&self) -> Option<f64> {
        (self.costed > 0).then(|| usd(self.cost))
    }

    pub fn cost_per_succeeded(&self) -> Option<f64> {
        (self.costed > 0 && self.succeeded > 0).then(|| usd(self.cost / self.succeeded as f64))
    }

    /// A token figure exists and some run's spend is missing from it or undercounted.
    pub fn tokens_lower_bound(&self) -> bool {
        self.measured > 0 && (self.unmeasured > 0 || self.lower_bound > 0)
    }

    /// A cost exists and some run's spend is missing from it or undercounted.
    pub fn cost_lower_bound(&self) -> bool {
        self.costed > 0
            && (self.unmeasured > 0
                || self.unpriced > 0
                || self.partial > 0
                || self.lower_bound > 0)
    }

    pub fn agent_priced_usd(&self) -> Option<f64> {
        self.agent_priced.map(usd)
    }

    /// The one cause of the unmeasured runs, `mixed` for several, `None` when all measured.
    pub fn unmeasured_cause(&self) -> Option<String> {
        match self.causes.len() {
            0 => None,
            1 => self.causes.first().cloned(),
            _ => Some("mixed".into()),
        }
    }

    pub fn unmeasured_units(&self) -> Vec<String> {
        self.units.iter().cloned().collect()
    }

    pub fn group(&self, name: String, all_runs: u64) -> Group {
        Group {
            name,
            runs: self.runs,
            succeeded: self.succeeded,
            success_rate: ratio(self.succeeded, self.runs),
            share: ratio(self.runs, all_runs),
            duration_seconds: self.duration(),
            mean_turns: self.mean_turns(),
            tokens: self.tokens(),
            cost_usd: self.cost_usd(),
            cost_per_succeeded_run_usd: self.cost_per_succeeded(),
            tokens_unmeasured_runs: self.unmeasured,
            cost_unpriced_runs: self.unpriced,
            cost_partial_runs: self.partial,
            tokens_lower_bound_runs: self.lower_bound,
            tokens_lower_bound: self.tokens_lower_bound(),
            cost_lower_bound: self.cost_lower_bound(),
            agent_priced_usd: self.agent_priced_usd(),
            unmeasured_cause: self.unmeasured_cause(),
            unmeasured_units: self.unmeasured_units(),
        }
    }
}

/// Groups keyed by name, served most runs first, then by name.
#[derive(Debug, Clone, Default)]
pub struct Breakdown {
    groups: BTreeMap<String, Tally>,
}

impl Breakdown {
    pub fn add(&mut self, name: &str, share: &Share<'_>) {
        match self.groups.get_mut(name) {
            Some(t) => t.add(share),
            None => {
                let mut t = Tally::default();
                t.add(share);
                self.groups.insert(name.to_string(), t);
            }
        }
    }

    pub fn groups(&self, all_runs: u64) -> Vec<Group> {
        let mut out: Vec<Group> = self
            .groups
            .iter()
            .map(|(name, t)| t.group(name.clone(), all_runs))
            .collect();
        // The map is ordered by name, and the sort is stable.
        out.sort_by_key(|g| std::cmp::Reverse(g.runs));
        out
    }
}
