//! The skill calls and the self-review records of the runs in the range.

use std::collections::{BTreeMap, HashSet};

use super::report::{SelfReview, SkillCalls, SkillEntry, VerdictEntry, round};
use super::rows::{Review, StatRun};

#[derive(Debug, Default)]
pub struct SkillTally {
    unrecorded: u64,
    /// Name → (calls, runs, tool errors).
    skills: BTreeMap<String, (u64, u64, u64)>,
}

impl SkillTally {
    pub fn add(&mut self, run: &StatRun) {
        let Some(calls) = &run.skills else {
            self.unrecorded += 1;
            return;
        };
        let mut seen = HashSet::new();
        for c in calls {
            let e = self.skills.entry(c.skill.clone()).or_default();
            e.0 += 1;
            if seen.insert(c.skill.as_str()) {
                e.1 += 1;
            }
            if c.tool_error {
                e.2 += 1;
            }
        }
    }

    /// Most calls first, then by name.
    pub fn finish(&self) -> SkillCalls {
        let mut by_skill: Vec<SkillEntry> = self
            .skills
            .iter()
            .map(|(name, (calls, runs, errors))| SkillEntry {
                name: name.clone(),
                calls: *calls,
                runs: *runs,
                tool_errors: *errors,
            })
            .collect();
        by_skill.sort_by_key(|s| std::cmp::Reverse(s.calls));
        SkillCalls {
            unrecorded_runs: self.unrecorded,
            by_skill,
        }
    }
}

#[derive(Debug, Default)]
pub struct ReviewTally {
    with_metadata: u64,
    unparsed: u64,
    cap_reached: u64,
    iterations: f64,
    iteration_runs: u64,
    verdicts: BTreeMap<String, u64>,
}

impl ReviewTally {
    pub fn add(&mut self, run: &StatRun) {
        match &run.review {
            Review::None => {}
            Review::Unparsed => {
                self.with_metadata += 1;
                self.unparsed += 1;
            }
            Review::Recorded {
                verdict,
                iterations,
                cap_reached,
            } => {
                self.with_metadata += 1;
                *self.verdicts.entry(verdict.clone()).or_default() += 1;
                if *cap_reached {
                    self.cap_reached += 1;
                }
                if let Some(i) = iterations {
                    self.iterations += i;
                    self.iteration_runs += 1;
                }
            }
        }
    }

    /// Verdicts with the most runs first, then by name.
    pub fn finish(&self) -> SelfReview {
        let mut by_final_verdict: Vec<VerdictEntry> = self
            .verdicts
            .iter()
            .map(|(name, runs)| VerdictEntry {
                name: name.clone(),
                runs: *runs,
            })
            .collect();
        by_final_verdict.sort_by_key(|v| std::cmp::Reverse(v.runs));
        SelfReview {
            runs_with_metadata: self.with_metadata,
            by_final_verdict,
            cap_reached_runs: self.cap_reached,
            mean_iterations: (self.iteration_runs > 0)
                .then(|| round(self.iterations / self.iteration_runs as f64, 2)),
            unparsed_runs: self.unparsed,
        }
    }
}
