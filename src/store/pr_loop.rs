//! Pull-request reaction activity per pass (`pr_loop`): for each issue, pass (`chain_id`) and
//! reaction key, whether the reaction began an escalation, acted, or watched and found
//! nothing, and how many runs it scheduled. Written through the single writer as a
//! [`super::ReactionWrite::PrLoop`]; marks only accumulate, so a repeated write is harmless.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::{Connection, params};

use super::bind;
use super::error::{SqlContext, StoreError};
use super::scope::{self, Scope};

/// What one reaction did in a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrLoopMark {
    /// A kind of the reaction began an escalation.
    Escalated,
    /// A triage verdict applied, the pull request merged, or the issue moved after the merge.
    Acted,
    /// A run was scheduled for the reaction (acted, and one more continuation).
    Continuation,
    /// A check watched the pull request and had nothing to act on.
    Quiet,
}

/// One mark of `reaction_key` (as named under `reactions` in WORKFLOW.md) in the pass
/// `chain_id` of `issue_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrLoopWrite {
    pub issue_id: String,
    pub chain_id: String,
    pub reaction_key: String,
    pub mark: PrLoopMark,
    pub at_ms: i64,
}

/// What a reaction recorded in one pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrLoopActivity {
    pub escalated: bool,
    pub acted: bool,
    pub quiet: bool,
    pub continuations: u32,
}

/// Reaction key → activity, for one pass.
pub type PassActivity = BTreeMap<String, PrLoopActivity>;

/// Counts committed activity writes, so a cached document built before one committed is
/// rebuilt after it.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The number of activity writes committed by this process.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// Called by the writer once an activity write committed.
pub(crate) fn note_committed() {
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

pub(crate) fn apply(conn: &Connection, wf: &str, w: &PrLoopWrite) -> Result<(), StoreError> {
    let (escalated, acted, quiet, continuations) = match w.mark {
        PrLoopMark::Escalated => (1, 0, 0, 0),
        PrLoopMark::Acted => (0, 1, 0, 0),
        PrLoopMark::Continuation => (0, 1, 0, 1),
        PrLoopMark::Quiet => (0, 0, 1, 0),
    };
    bind::execute(
        conn,
        "INSERT INTO pr_loop (issue_id, chain_id, reaction_key, escalated, acted, quiet,
                              continuations, updated_at_ms, workflow)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (workflow, issue_id, chain_id, reaction_key) DO UPDATE SET
             escalated = MAX(escalated, excluded.escalated),
             acted = MAX(acted, excluded.acted),
             quiet = MAX(quiet, excluded.quiet),
             continuations = continuations + excluded.continuations,
             updated_at_ms = excluded.updated_at_ms",
        params![
            w.issue_id,
            w.chain_id,
            w.reaction_key,
            escalated,
            acted,
            quiet,
            continuations,
            w.at_ms,
            wf
        ],
    )
    .ctx("save pull request reaction activity")?;
    Ok(())
}

/// The activity of each pass `(issue_id, chain_id)` asked for; a pass with none is absent.
pub(crate) fn read(
    conn: &Connection,
    sc: &Scope,
    passes: &[(String, String)],
) -> Result<BTreeMap<(String, String), PassActivity>, StoreError> {
    let mut out: BTreeMap<(String, String), PassActivity> = BTreeMap::new();
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT reaction_key, escalated, acted, quiet, continuations FROM pr_loop
             WHERE issue_id = ?1 AND chain_id = ?2 AND {}
             ORDER BY reaction_key, workflow",
            scope::filter("workflow", 3)
        ))
        .ctx("prepare read pull request reaction activity")?;
    let mut asked: Vec<&(String, String)> = passes.iter().collect();
    asked.sort();
    asked.dedup();
    for (issue_id, chain_id) in asked {
        let rows = stmt
            .query_map(params![issue_id, chain_id, sc.bound()], |r| {
                let n: i64 = r.get(4)?;
                Ok((
                    r.get::<_, String>(0)?,
                    PrLoopActivity {
                        escalated: r.get::<_, i64>(1)? != 0,
                        acted: r.get::<_, i64>(2)? != 0,
                        quiet: r.get::<_, i64>(3)? != 0,
                        continuations: u32::try_from(n.max(0)).unwrap_or(u32::MAX),
                    },
                ))
            })
            .ctx("read pull request reaction activity")?;
        for row in rows {
            let (key, activity) = row.ctx("read pull request reaction activity row")?;
            out.entry((issue_id.clone(), chain_id.clone()))
                .or_default()
                .insert(key, activity);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(key: &str, mark: PrLoopMark) -> PrLoopWrite {
        PrLoopWrite {
            issue_id: "1".into(),
            chain_id: "c1".into(),
            reaction_key: key.into(),
            mark,
            at_ms: 5,
        }
    }

    #[test]
    fn marks_accumulate_per_pass_and_key() {
        let conn = crate::store::migrate::test_db();
        for w in [
            mark("ci_failure", PrLoopMark::Quiet),
            mark("ci_failure", PrLoopMark::Continuation),
            mark("ci_failure", PrLoopMark::Continuation),
            mark("ci_failure", PrLoopMark::Escalated),
            mark("auto_merge", PrLoopMark::Acted),
        ] {
            apply(&conn, "", &w).unwrap_or_else(|e| panic!("{e}"));
        }
        let passes = [
            ("1".to_string(), "c1".to_string()),
            ("1".to_string(), "c2".to_string()),
        ];
        let got = read(&conn, &Scope::single(), &passes).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got.len(), 1, "a pass with no activity is absent");
        let pass = &got[&passes[0]];
        assert_eq!(
            pass["ci_failure"],
            PrLoopActivity {
                escalated: true,
                acted: true,
                quiet: true,
                continuations: 2
            }
        );
        assert_eq!(
            pass["auto_merge"],
            PrLoopActivity {
                acted: true,
                ..Default::default()
            }
        );
    }
}
