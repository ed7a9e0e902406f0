-- Pull-request reactions: the pull-request record a run left, standing escalations (the only
-- reaction state that survives a restart besides run history), dispatch fingerprints and the
-- review comments a run was given, and a queued reaction retry's context.
ALTER TABLE run_history ADD COLUMN pr_record TEXT;           -- JSON of .sortie/scm.json

CREATE TABLE reaction_escalations (
    issue_id           TEXT NOT NULL,
    kind               TEXT NOT NULL,   -- ci | review | bot-review | merge | merge-conflict | merge-completion
    escalated_at_ms    INTEGER NOT NULL,
    escalation_trigger TEXT NOT NULL,   -- budget_exhausted | triage | refused | missing_merge_commit
    used_attempts      INTEGER,
    identifier         TEXT NOT NULL,
    display_identifier TEXT NOT NULL DEFAULT '',
    issue_title        TEXT NOT NULL DEFAULT '',
    issue_url          TEXT NOT NULL DEFAULT '',
    pr_owner           TEXT NOT NULL,
    pr_repo            TEXT NOT NULL,
    pr_number          INTEGER NOT NULL,
    pr_branch          TEXT NOT NULL DEFAULT '',
    pr_head_sha        TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (issue_id, kind)
);

CREATE TABLE reaction_fingerprints (
    issue_id      TEXT NOT NULL,
    kind          TEXT NOT NULL,
    fingerprint   TEXT NOT NULL,
    dispatched    INTEGER NOT NULL DEFAULT 0,
    updated_at_ms INTEGER NOT NULL,
    PRIMARY KEY (issue_id, kind)
);

CREATE TABLE reaction_given_comments (
    issue_id   TEXT NOT NULL,
    pr_key     TEXT NOT NULL,           -- owner/repo#number
    comment_id TEXT NOT NULL,
    PRIMARY KEY (issue_id, pr_key, comment_id)
);

ALTER TABLE retry_entries ADD COLUMN reaction_context TEXT;  -- JSON: the reaction and its prompt context
