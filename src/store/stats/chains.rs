//! The stage chain parts of the report. `by_chain` groups the runs of each pass (one
//! `chain_id`) in which a hop was due or made; `chain_funnels` follows each chain of the
//! dispatch rules in force, stage by stage: the passes whose runs in the range reached each
//! stage and what became of them, and the passes on it now (running, queued for a retry,
//! held by a budget), which only the database can show a separate process.

use std::collections::{BTreeMap, HashMap, HashSet};

use rusqlite::Connection;

use super::super::error::{SqlContext, StoreError};
use super::super::scope::{self, Scope};
use super::report::{ChainFunnel, ChainGroup, FunnelStage};
use super::rows::{Outcome, StatRun};
use super::tally::{Share, Tally};
use crate::domain::stage::{HopResult, LivePassKind};

/// A pass's key: its chain id, or the run's issue for a run recorded without one.
fn pass_key(r: &StatRun) -> String {
    if r.chain_id.is_empty() {
        format!("issue:{}", r.issue_id)
    } else {
        r.chain_id.clone()
    }
}

#[derive(Debug, Default)]
struct PassFigures {
    tally: Tally,
    identifier: String,
    rules: Vec<(i64, String)>,
    made: u64,
    not_made: u64,
}

#[derive(Debug, Default)]
struct StageSets {
    passes: HashSet<String>,
    succeeded: HashSet<String>,
    advanced: HashSet<String>,
    not_advanced: HashSet<String>,
}

/// The passes on each stage now: rule → (running, queued, budget held).
pub type LiveStages = HashMap<String, [u64; 3]>;

/// Folds the runs of the range; only runs on a chain's rule, or that reached a hop decision,
/// are kept.
#[derive(Debug, Default)]
pub struct ChainTally {
    /// Every rule on a chain in force.
    chain_rules: HashSet<String>,
    passes: HashMap<String, PassFigures>,
    stages: HashMap<String, StageSets>,
}

impl ChainTally {
    pub fn new(chains: &[Vec<String>]) -> ChainTally {
        ChainTally {
            chain_rules: chains.iter().flatten().cloned().collect(),
            ..ChainTally::default()
        }
    }

    pub fn add(&mut self, r: &StatRun) {
        let on_chain = self.chain_rules.contains(&r.rule_name);
        if !on_chain && r.stage_target.is_empty() {
            return;
        }
        let key = pass_key(r);
        let result = HopResult::parse(&r.stage_result);
        let p = self.passes.entry(key.clone()).or_default();
        p.tally.add(&Share::whole(r));
        if p.identifier.is_empty() {
            p.identifier = r.identifier.clone();
        }
        p.rules.push((r.completed_ms, r.rule_name.clone()));
        match result {
            Some(h) if h.made() => p.made += 1,
            Some(_) => p.not_made += 1,
            None => {}
        }
        if !on_chain {
            return;
        }
        let s = self.stages.entry(r.rule_name.clone()).or_default();
        s.passes.insert(key.clone());
        if r.outcome == Outcome::Succeeded {
            s.succeeded.insert(key.clone());
        }
        match result {
            Some(h) if h.made() => {
                s.advanced.insert(key);
            }
            Some(_) => {
                s.not_advanced.insert(key);
            }
            None => {}
        }
    }

    /// `by_chain`: the passes in which a hop was due or made, most runs first, then by id.
    pub fn groups(&self, all_runs: u64) -> Vec<ChainGroup> {
        let mut out: Vec<ChainGroup> = self
            .passes
            .iter()
            .filter(|(_, p)| p.made + p.not_made > 0)
            .map(|(key, p)| {
                let mut ordered = p.rules.clone();
                ordered.sort();
                let mut rules: Vec<String> = Vec::new();
                for (_, rule) in ordered {
                    if !rules.contains(&rule) {
                        rules.push(rule);
                    }
                }
                ChainGroup {
                    group: p.tally.group(key.clone(), all_runs),
                    issue_identifier: p.identifier.clone(),
                    rules,
                    hops_made: p.made,
                    hops_not_made: p.not_made,
                }
            })
            .collect();
        out.sort_by(|a, b| {
            b.group
                .runs
                .cmp(&a.group.runs)
                .then_with(|| a.group.name.cmp(&b.group.name))
        });
        out
    }

    /// `chain_funnels`: one per chain in force, in the order of `chains`.
    pub fn funnels(&self, chains: &[Vec<String>], live: &LiveStages) -> Vec<ChainFunnel> {
        let count = |set: Option<&HashSet<String>>| set.map_or(0, |s| s.len() as u64);
        chains
            .iter()
            .map(|chain| ChainFunnel {
                chain: chain.clone(),
                stages: chain
                    .iter()
                    .map(|rule| {
                        let s = self.stages.get(rule);
                        let [running, queued, budget_held] =
                            live.get(rule).copied().unwrap_or_default();
                        FunnelStage {
                            rule: rule.clone(),
                            passes: count(s.map(|s| &s.passes)),
                            succeeded: count(s.map(|s| &s.succeeded)),
                            advanced: count(s.map(|s| &s.advanced)),
                            not_advanced: count(s.map(|s| &s.not_advanced)),
                            running,
                            queued,
                            budget_held,
                        }
                    })
                    .collect(),
            })
            .collect()
    }
}

/// The passes on each stage now: the live stage passes the daemon keeps (running sessions,
/// budget holds) and the queued retries, each issue once (a session, then a hold, then a
/// retry). A database that predates the live passes table reads as holding none. Across
/// workflows each workflow's passes count, added together.
pub fn read_live(conn: &Connection, sc: &Scope) -> Result<LiveStages, StoreError> {
    if *sc != Scope::All {
        return read_live_in(conn, sc);
    }
    let col = scope::column(conn, "retry_entries")?;
    let passes = match scope::column(conn, "live_stage_passes") {
        Ok("workflow") => " UNION SELECT workflow FROM live_stage_passes",
        _ => "",
    };
    let mut stmt = conn
        .prepare(&format!(
            "SELECT DISTINCT {col} FROM retry_entries{passes} ORDER BY 1"
        ))
        .ctx("prepare list workflows with live passes")?;
    let names = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .ctx("list workflows with live passes")?
        .collect::<rusqlite::Result<Vec<_>>>()
        .ctx("read workflow with live passes")?;
    let mut live = LiveStages::new();
    for name in names {
        for (rule, counts) in read_live_in(conn, &Scope::one(&name))? {
            let sum = live.entry(rule).or_default();
            for (s, c) in sum.iter_mut().zip(counts) {
                *s += c;
            }
        }
    }
    Ok(live)
}

/// [`read_live`] of one workflow.
fn read_live_in(conn: &Connection, sc: &Scope) -> Result<LiveStages, StoreError> {
    let mut by_issue: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for p in super::super::stage_passes::load_all(conn, sc)? {
        let slot = match p.kind {
            LivePassKind::Session => 0,
            LivePassKind::BudgetHold => 2,
        };
        by_issue.insert(p.issue_id, (slot, p.rule_name));
    }
    let mut stmt = conn
        .prepare(&format!(
            "SELECT issue_id, rule_name FROM retry_entries WHERE rule_name <> '' AND {}",
            scope::filter(scope::column(conn, "retry_entries")?, 1)
        ))
        .ctx("prepare queued retries")?;
    let rows = stmt
        .query_map([sc.bound()], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })
        .ctx("read queued retries")?;
    for row in rows {
        let (issue_id, rule) = row.ctx("read queued retry")?;
        by_issue.entry(issue_id).or_insert((1, rule));
    }
    let mut live = LiveStages::new();
    for (slot, rule) in by_issue.into_values() {
        live.entry(rule).or_default()[slot] += 1;
    }
    Ok(live)
}
