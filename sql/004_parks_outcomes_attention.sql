-- Parked issues, issue outcomes and attention acknowledgements.
CREATE TABLE parked_issues (
    issue_id         TEXT PRIMARY KEY,
    identifier       TEXT NOT NULL,
    reason           TEXT NOT NULL,               -- agent_blocked | handoff_absence
    label            TEXT NOT NULL DEFAULT '',
    label_applied    INTEGER NOT NULL DEFAULT 0,
    parked_state     TEXT NOT NULL DEFAULT '',
    parked_at_ms     INTEGER NOT NULL,            -- cut to whole seconds
    issue_title      TEXT NOT NULL DEFAULT '',
    issue_url        TEXT NOT NULL DEFAULT '',
    issue_type       TEXT NOT NULL DEFAULT '',
    issue_labels     TEXT NOT NULL DEFAULT '[]',
    run_id           INTEGER,
    rule_name        TEXT NOT NULL DEFAULT '',
    agent_kind       TEXT NOT NULL DEFAULT '',
    configured_model TEXT NOT NULL DEFAULT '',
    dispatched_at_ms INTEGER
);

CREATE TABLE issue_outcomes (
    issue_id       TEXT PRIMARY KEY,
    kind           TEXT NOT NULL,                 -- handed_off | merged | terminal
    observed_at_ms INTEGER NOT NULL,
    state          TEXT NOT NULL DEFAULT '',
    merge_path     TEXT NOT NULL DEFAULT '',      -- auto_merge | merge_completion
    pr_number      INTEGER,
    pr_repository  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX idx_issue_outcomes_observed ON issue_outcomes(observed_at_ms);

CREATE TABLE attention_acks (
    item_id            TEXT PRIMARY KEY,
    kind               TEXT NOT NULL,
    acknowledged_at_ms INTEGER NOT NULL
);
