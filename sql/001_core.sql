-- Core tables: queued retries, run history, per-issue session metadata, aggregate counters.
CREATE TABLE retry_entries (
    issue_id   TEXT PRIMARY KEY,
    identifier TEXT NOT NULL,
    attempt    INTEGER NOT NULL,
    due_at_ms  INTEGER NOT NULL,          -- absolute epoch milliseconds, never a relative delay
    error      TEXT,
    session_id TEXT                       -- agent session a continuation resumes
);

CREATE TABLE run_history (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,  -- API run_id and paging key
    issue_id        TEXT NOT NULL,
    identifier      TEXT NOT NULL,
    attempt         INTEGER NOT NULL,
    agent_adapter   TEXT NOT NULL,
    workspace       TEXT NOT NULL,
    started_at      TEXT NOT NULL,        -- RFC 3339 UTC, millisecond precision
    completed_at    TEXT NOT NULL,
    status          TEXT NOT NULL,
    error           TEXT,
    workflow_file   TEXT NOT NULL DEFAULT '',
    turns_completed INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX idx_run_history_issue_id ON run_history(issue_id);

CREATE TABLE session_metadata (
    issue_id          TEXT PRIMARY KEY,
    session_id        TEXT NOT NULL,
    agent_pid         TEXT,
    input_tokens      INTEGER NOT NULL DEFAULT 0,
    output_tokens     INTEGER NOT NULL DEFAULT 0,
    total_tokens      INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    model_name        TEXT NOT NULL DEFAULT '',
    api_request_count INTEGER NOT NULL DEFAULT 0,
    updated_at_ms     INTEGER NOT NULL
);

CREATE TABLE aggregate_metrics (
    key               TEXT PRIMARY KEY,
    input_tokens      INTEGER NOT NULL DEFAULT 0,
    output_tokens     INTEGER NOT NULL DEFAULT 0,
    total_tokens      INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    dispatches        INTEGER NOT NULL DEFAULT 0,
    seconds_running   REAL NOT NULL DEFAULT 0,
    updated_at_ms     INTEGER NOT NULL DEFAULT 0
);
