-- The workflow as part of every key, so one database serves several workflows under one
-- daemon. Every row stored before this schema belongs to the single workflow it was written
-- by, named '' (the name a handle opened without a workflow uses).
--
-- Per table:
--   retry_entries, session_metadata, parked_issues, issue_outcomes, stage_hops,
--   failure_holds, live_stage_passes, handoff_absence              (issue_id)
--   reaction_escalations, reaction_fingerprints, triage_answers     (issue_id, kind)
--   reaction_given_comments                                         (issue_id, pr_key, comment_id)
--   pr_loop                                                         (issue_id, chain_id, reaction_key)
--   attention_acks (item_id: item ids name issues), aggregate_metrics (key),
--   aggregate_exits (exit_type): each workflow keeps its own counters,
--   agent_usage_holds (agent_kind, model_only, model): each workflow may run its agents under
--   an account of its own, so a usage limit holds the workflow that met it
--     -> rebuilt with `workflow` first in the primary key (create, copy, drop, rename,
--        recreate indexes), rows copied as workflow ''.
--   run_history: its key is the row id; gains the column and an index on (workflow, issue_id).
--     Its unique dispatch_id index stays database-wide.
--   agent_events, agent_event_runs: not keyed by issue; keyed by the dispatch id, random and
--     unique across the database, and reached through a run row that is scoped. Their retention
--     caps stay database-wide (one file, one disk budget).
--   price_table_cache (layer), store_tasks (task), schema_migrations: belong to the database,
--     not to a workflow; unchanged.
ALTER TABLE run_history ADD COLUMN workflow TEXT NOT NULL DEFAULT '';
CREATE INDEX idx_run_history_workflow_issue ON run_history(workflow, issue_id);

CREATE TABLE retry_entries_016 (
    issue_id               TEXT,
    identifier             TEXT NOT NULL,
    attempt                INTEGER NOT NULL,
    due_at_ms              INTEGER NOT NULL,
    error                  TEXT,
    session_id             TEXT,
    display_identifier     TEXT NOT NULL DEFAULT '',
    agent_kind             TEXT NOT NULL DEFAULT '',
    template               TEXT NOT NULL DEFAULT '',
    rule_name              TEXT NOT NULL DEFAULT '',
    chain_id               TEXT NOT NULL DEFAULT '',
    stage_previous         TEXT NOT NULL DEFAULT '',
    stage_previous_outcome TEXT NOT NULL DEFAULT '',
    retry_trigger          TEXT,
    reaction_kind          TEXT NOT NULL DEFAULT '',
    reaction_config_key    TEXT NOT NULL DEFAULT '',
    issue_title            TEXT NOT NULL DEFAULT '',
    issue_url              TEXT NOT NULL DEFAULT '',
    issue_type             TEXT NOT NULL DEFAULT '',
    issue_labels           TEXT NOT NULL DEFAULT '[]',
    issue_state            TEXT NOT NULL DEFAULT '',
    configured_model       TEXT NOT NULL DEFAULT '',
    dispatched_at_ms       INTEGER,
    reaction_context       TEXT,
    workflow               TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workflow, issue_id)
);
INSERT INTO retry_entries_016 (
    issue_id, identifier, attempt, due_at_ms, error, session_id, display_identifier, agent_kind,
    template, rule_name, chain_id, stage_previous, stage_previous_outcome, retry_trigger,
    reaction_kind, reaction_config_key, issue_title, issue_url, issue_type, issue_labels,
    issue_state, configured_model, dispatched_at_ms, reaction_context)
SELECT
    issue_id, identifier, attempt, due_at_ms, error, session_id, display_identifier, agent_kind,
    template, rule_name, chain_id, stage_previous, stage_previous_outcome, retry_trigger,
    reaction_kind, reaction_config_key, issue_title, issue_url, issue_type, issue_labels,
    issue_state, configured_model, dispatched_at_ms, reaction_context
FROM retry_entries;
DROP TABLE retry_entries;
ALTER TABLE retry_entries_016 RENAME TO retry_entries;

CREATE TABLE session_metadata_016 (
    issue_id              TEXT,
    session_id            TEXT NOT NULL,
    agent_pid             TEXT,
    input_tokens          INTEGER NOT NULL DEFAULT 0,
    output_tokens         INTEGER NOT NULL DEFAULT 0,
    total_tokens          INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens     INTEGER NOT NULL DEFAULT 0,
    model_name            TEXT NOT NULL DEFAULT '',
    api_request_count     INTEGER NOT NULL DEFAULT 0,
    updated_at_ms         INTEGER NOT NULL,
    cache_write_tokens    INTEGER NOT NULL DEFAULT 0,
    started_at_ms         INTEGER,
    exit_type             TEXT,
    api_requests_measured INTEGER NOT NULL DEFAULT 0,
    dispatch_id           TEXT,
    agent_pgid            INTEGER,
    agent_start_ticks     INTEGER,
    identifier            TEXT NOT NULL DEFAULT '',
    attempt               INTEGER NOT NULL DEFAULT 0,
    workspace             TEXT NOT NULL DEFAULT '',
    agent_kind            TEXT NOT NULL DEFAULT '',
    workflow_file         TEXT NOT NULL DEFAULT '',
    sortie_instance       TEXT NOT NULL DEFAULT '',
    recovery_pending      INTEGER NOT NULL DEFAULT 0,
    workflow              TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workflow, issue_id)
);
INSERT INTO session_metadata_016 (
    issue_id, session_id, agent_pid, input_tokens, output_tokens, total_tokens,
    cache_read_tokens, model_name, api_request_count, updated_at_ms, cache_write_tokens,
    started_at_ms, exit_type, api_requests_measured, dispatch_id, agent_pgid, agent_start_ticks,
    identifier, attempt, workspace, agent_kind, workflow_file, sortie_instance, recovery_pending)
SELECT
    issue_id, session_id, agent_pid, input_tokens, output_tokens, total_tokens,
    cache_read_tokens, model_name, api_request_count, updated_at_ms, cache_write_tokens,
    started_at_ms, exit_type, api_requests_measured, dispatch_id, agent_pgid, agent_start_ticks,
    identifier, attempt, workspace, agent_kind, workflow_file, sortie_instance, recovery_pending
FROM session_metadata;
DROP TABLE session_metadata;
ALTER TABLE session_metadata_016 RENAME TO session_metadata;

CREATE TABLE aggregate_metrics_016 (
    key                 TEXT,
    input_tokens        INTEGER NOT NULL DEFAULT 0,
    output_tokens       INTEGER NOT NULL DEFAULT 0,
    total_tokens        INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens   INTEGER NOT NULL DEFAULT 0,
    dispatches          INTEGER NOT NULL DEFAULT 0,
    seconds_running     REAL NOT NULL DEFAULT 0,
    updated_at_ms       INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens  INTEGER NOT NULL DEFAULT 0,
    unmeasured_sessions INTEGER NOT NULL DEFAULT 0,
    workflow            TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workflow, key)
);
INSERT INTO aggregate_metrics_016 (
    key, input_tokens, output_tokens, total_tokens, cache_read_tokens, dispatches,
    seconds_running, updated_at_ms, cache_write_tokens, unmeasured_sessions)
SELECT
    key, input_tokens, output_tokens, total_tokens, cache_read_tokens, dispatches,
    seconds_running, updated_at_ms, cache_write_tokens, unmeasured_sessions
FROM aggregate_metrics;
DROP TABLE aggregate_metrics;
ALTER TABLE aggregate_metrics_016 RENAME TO aggregate_metrics;

CREATE TABLE aggregate_exits_016 (
    exit_type TEXT,
    count     INTEGER NOT NULL DEFAULT 0,
    workflow  TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workflow, exit_type)
);
INSERT INTO aggregate_exits_016 (
    exit_type, count)
SELECT
    exit_type, count
FROM aggregate_exits;
DROP TABLE aggregate_exits;
ALTER TABLE aggregate_exits_016 RENAME TO aggregate_exits;

CREATE TABLE parked_issues_016 (
    issue_id         TEXT,
    identifier       TEXT NOT NULL,
    reason           TEXT NOT NULL,
    label            TEXT NOT NULL DEFAULT '',
    label_applied    INTEGER NOT NULL DEFAULT 0,
    parked_state     TEXT NOT NULL DEFAULT '',
    parked_at_ms     INTEGER NOT NULL,
    issue_title      TEXT NOT NULL DEFAULT '',
    issue_url        TEXT NOT NULL DEFAULT '',
    issue_type       TEXT NOT NULL DEFAULT '',
    issue_labels     TEXT NOT NULL DEFAULT '[]',
    run_id           INTEGER,
    rule_name        TEXT NOT NULL DEFAULT '',
    agent_kind       TEXT NOT NULL DEFAULT '',
    configured_model TEXT NOT NULL DEFAULT '',
    dispatched_at_ms INTEGER,
    workflow         TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workflow, issue_id)
);
INSERT INTO parked_issues_016 (
    issue_id, identifier, reason, label, label_applied, parked_state, parked_at_ms, issue_title,
    issue_url, issue_type, issue_labels, run_id, rule_name, agent_kind, configured_model,
    dispatched_at_ms)
SELECT
    issue_id, identifier, reason, label, label_applied, parked_state, parked_at_ms, issue_title,
    issue_url, issue_type, issue_labels, run_id, rule_name, agent_kind, configured_model,
    dispatched_at_ms
FROM parked_issues;
DROP TABLE parked_issues;
ALTER TABLE parked_issues_016 RENAME TO parked_issues;

CREATE TABLE issue_outcomes_016 (
    issue_id       TEXT,
    kind           TEXT NOT NULL,
    observed_at_ms INTEGER NOT NULL,
    state          TEXT NOT NULL DEFAULT '',
    merge_path     TEXT NOT NULL DEFAULT '',
    pr_number      INTEGER,
    pr_repository  TEXT NOT NULL DEFAULT '',
    workflow       TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workflow, issue_id)
);
INSERT INTO issue_outcomes_016 (
    issue_id, kind, observed_at_ms, state, merge_path, pr_number, pr_repository)
SELECT
    issue_id, kind, observed_at_ms, state, merge_path, pr_number, pr_repository
FROM issue_outcomes;
DROP TABLE issue_outcomes;
ALTER TABLE issue_outcomes_016 RENAME TO issue_outcomes;
CREATE INDEX idx_issue_outcomes_observed ON issue_outcomes(observed_at_ms);

CREATE TABLE attention_acks_016 (
    item_id            TEXT,
    kind               TEXT NOT NULL,
    acknowledged_at_ms INTEGER NOT NULL,
    workflow           TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workflow, item_id)
);
INSERT INTO attention_acks_016 (
    item_id, kind, acknowledged_at_ms)
SELECT
    item_id, kind, acknowledged_at_ms
FROM attention_acks;
DROP TABLE attention_acks;
ALTER TABLE attention_acks_016 RENAME TO attention_acks;

CREATE TABLE agent_usage_holds_016 (
    agent_kind   TEXT NOT NULL,
    model_only   INTEGER NOT NULL DEFAULT 0,
    model        TEXT NOT NULL DEFAULT '',
    resets_at_ms INTEGER NOT NULL,
    since_ms     INTEGER NOT NULL,
    workflow     TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workflow, agent_kind, model_only, model)
);
INSERT INTO agent_usage_holds_016 (
    agent_kind, model_only, model, resets_at_ms, since_ms)
SELECT
    agent_kind, model_only, model, resets_at_ms, since_ms
FROM agent_usage_holds;
DROP TABLE agent_usage_holds;
ALTER TABLE agent_usage_holds_016 RENAME TO agent_usage_holds;

CREATE TABLE reaction_escalations_016 (
    issue_id           TEXT NOT NULL,
    kind               TEXT NOT NULL,
    escalated_at_ms    INTEGER NOT NULL,
    escalation_trigger TEXT NOT NULL,
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
    workflow           TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workflow, issue_id, kind)
);
INSERT INTO reaction_escalations_016 (
    issue_id, kind, escalated_at_ms, escalation_trigger, used_attempts, identifier,
    display_identifier, issue_title, issue_url, pr_owner, pr_repo, pr_number, pr_branch,
    pr_head_sha)
SELECT
    issue_id, kind, escalated_at_ms, escalation_trigger, used_attempts, identifier,
    display_identifier, issue_title, issue_url, pr_owner, pr_repo, pr_number, pr_branch,
    pr_head_sha
FROM reaction_escalations;
DROP TABLE reaction_escalations;
ALTER TABLE reaction_escalations_016 RENAME TO reaction_escalations;

CREATE TABLE reaction_fingerprints_016 (
    issue_id      TEXT NOT NULL,
    kind          TEXT NOT NULL,
    fingerprint   TEXT NOT NULL,
    dispatched    INTEGER NOT NULL DEFAULT 0,
    updated_at_ms INTEGER NOT NULL,
    workflow      TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workflow, issue_id, kind)
);
INSERT INTO reaction_fingerprints_016 (
    issue_id, kind, fingerprint, dispatched, updated_at_ms)
SELECT
    issue_id, kind, fingerprint, dispatched, updated_at_ms
FROM reaction_fingerprints;
DROP TABLE reaction_fingerprints;
ALTER TABLE reaction_fingerprints_016 RENAME TO reaction_fingerprints;

CREATE TABLE reaction_given_comments_016 (
    issue_id   TEXT NOT NULL,
    pr_key     TEXT NOT NULL,
    comment_id TEXT NOT NULL,
    workflow   TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workflow, issue_id, pr_key, comment_id)
);
INSERT INTO reaction_given_comments_016 (
    issue_id, pr_key, comment_id)
SELECT
    issue_id, pr_key, comment_id
FROM reaction_given_comments;
DROP TABLE reaction_given_comments;
ALTER TABLE reaction_given_comments_016 RENAME TO reaction_given_comments;

CREATE TABLE stage_hops_016 (
    issue_id           TEXT,
    identifier         TEXT NOT NULL DEFAULT '',
    display_identifier TEXT NOT NULL DEFAULT '',
    hop_count          INTEGER NOT NULL DEFAULT 0,
    source_rule        TEXT NOT NULL DEFAULT '',
    target_rule        TEXT NOT NULL DEFAULT '',
    target_label       TEXT NOT NULL DEFAULT '',
    previous_outcome   TEXT NOT NULL DEFAULT '',
    source_dispatch_id TEXT NOT NULL DEFAULT '',
    chain_id           TEXT NOT NULL DEFAULT '',
    dispatched_at_ms   INTEGER,
    hopped_at_ms       INTEGER NOT NULL DEFAULT 0,
    target_observed    INTEGER NOT NULL DEFAULT 0,
    picked_up          INTEGER NOT NULL DEFAULT 0,
    issue_title        TEXT NOT NULL DEFAULT '',
    issue_url          TEXT NOT NULL DEFAULT '',
    issue_type         TEXT NOT NULL DEFAULT '',
    state              TEXT NOT NULL DEFAULT '',
    issue_labels       TEXT,
    workflow           TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workflow, issue_id)
);
INSERT INTO stage_hops_016 (
    issue_id, identifier, display_identifier, hop_count, source_rule, target_rule, target_label,
    previous_outcome, source_dispatch_id, chain_id, dispatched_at_ms, hopped_at_ms,
    target_observed, picked_up, issue_title, issue_url, issue_type, state, issue_labels)
SELECT
    issue_id, identifier, display_identifier, hop_count, source_rule, target_rule, target_label,
    previous_outcome, source_dispatch_id, chain_id, dispatched_at_ms, hopped_at_ms,
    target_observed, picked_up, issue_title, issue_url, issue_type, state, issue_labels
FROM stage_hops;
DROP TABLE stage_hops;
ALTER TABLE stage_hops_016 RENAME TO stage_hops;

CREATE TABLE failure_holds_016 (
    issue_id    TEXT,
    identifier  TEXT NOT NULL,
    issue_title TEXT NOT NULL DEFAULT '',
    issue_url   TEXT NOT NULL DEFAULT '',
    issue_state TEXT NOT NULL DEFAULT '',
    agent_kind  TEXT NOT NULL DEFAULT '',
    cause       TEXT NOT NULL,
    classified  INTEGER NOT NULL DEFAULT 0,
    runs        INTEGER NOT NULL,
    message     TEXT NOT NULL DEFAULT '',
    since_ms    INTEGER NOT NULL,
    workflow    TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workflow, issue_id)
);
INSERT INTO failure_holds_016 (
    issue_id, identifier, issue_title, issue_url, issue_state, agent_kind, cause, classified,
    runs, message, since_ms)
SELECT
    issue_id, identifier, issue_title, issue_url, issue_state, agent_kind, cause, classified,
    runs, message, since_ms
FROM failure_holds;
DROP TABLE failure_holds;
ALTER TABLE failure_holds_016 RENAME TO failure_holds;

CREATE TABLE triage_answers_016 (
    issue_id       TEXT NOT NULL,
    kind           TEXT NOT NULL,
    fingerprint    TEXT NOT NULL,
    answer         TEXT NOT NULL,
    answered_at_ms INTEGER NOT NULL,
    workflow       TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workflow, issue_id, kind)
);
INSERT INTO triage_answers_016 (
    issue_id, kind, fingerprint, answer, answered_at_ms)
SELECT
    issue_id, kind, fingerprint, answer, answered_at_ms
FROM triage_answers;
DROP TABLE triage_answers;
ALTER TABLE triage_answers_016 RENAME TO triage_answers;

CREATE TABLE live_stage_passes_016 (
    issue_id   TEXT,
    identifier TEXT NOT NULL DEFAULT '',
    kind       TEXT NOT NULL,
    chain_id   TEXT NOT NULL DEFAULT '',
    rule_name  TEXT NOT NULL,
    via_rule   TEXT NOT NULL DEFAULT '',
    since_ms   INTEGER NOT NULL,
    workflow   TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workflow, issue_id)
);
INSERT INTO live_stage_passes_016 (
    issue_id, identifier, kind, chain_id, rule_name, via_rule, since_ms)
SELECT
    issue_id, identifier, kind, chain_id, rule_name, via_rule, since_ms
FROM live_stage_passes;
DROP TABLE live_stage_passes;
ALTER TABLE live_stage_passes_016 RENAME TO live_stage_passes;

CREATE TABLE handoff_absence_016 (
    issue_id          TEXT,
    withheld_in_a_row INTEGER NOT NULL,
    updated_at_ms     INTEGER NOT NULL,
    workflow          TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workflow, issue_id)
);
INSERT INTO handoff_absence_016 (
    issue_id, withheld_in_a_row, updated_at_ms)
SELECT
    issue_id, withheld_in_a_row, updated_at_ms
FROM handoff_absence;
DROP TABLE handoff_absence;
ALTER TABLE handoff_absence_016 RENAME TO handoff_absence;

CREATE TABLE pr_loop_016 (
    issue_id      TEXT NOT NULL,
    chain_id      TEXT NOT NULL,
    reaction_key  TEXT NOT NULL,
    escalated     INTEGER NOT NULL DEFAULT 0,
    acted         INTEGER NOT NULL DEFAULT 0,
    quiet         INTEGER NOT NULL DEFAULT 0,
    continuations INTEGER NOT NULL DEFAULT 0,
    updated_at_ms INTEGER NOT NULL,
    workflow      TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workflow, issue_id, chain_id, reaction_key)
);
INSERT INTO pr_loop_016 (
    issue_id, chain_id, reaction_key, escalated, acted, quiet, continuations, updated_at_ms)
SELECT
    issue_id, chain_id, reaction_key, escalated, acted, quiet, continuations, updated_at_ms
FROM pr_loop;
DROP TABLE pr_loop;
ALTER TABLE pr_loop_016 RENAME TO pr_loop;
