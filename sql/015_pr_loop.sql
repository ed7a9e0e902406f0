-- What each configured pull-request reaction recorded in one pass of an issue (the issue's
-- work under one chain_id), served as `pr_loop`. One row per (issue, pass, reaction key as
-- named under `reactions` in WORKFLOW.md; `label_commands` covers both label commands). The
-- flags only ever turn on and `continuations` only rises; rows are kept as run history is.
CREATE TABLE pr_loop (
    issue_id      TEXT NOT NULL,
    chain_id      TEXT NOT NULL,
    reaction_key  TEXT NOT NULL,
    -- A kind of the reaction began an escalation in the pass (one that has ended included).
    escalated     INTEGER NOT NULL DEFAULT 0,
    -- A triage verdict applied, the pull request merged, the issue moved after the merge, or
    -- a run scheduled.
    acted         INTEGER NOT NULL DEFAULT 0,
    -- A check watched the pull request and found nothing to act on.
    quiet         INTEGER NOT NULL DEFAULT 0,
    -- Runs scheduled for the reaction (a run a budget hold kept from starting included).
    continuations INTEGER NOT NULL DEFAULT 0,
    updated_at_ms INTEGER NOT NULL,
    PRIMARY KEY (issue_id, chain_id, reaction_key)
);
