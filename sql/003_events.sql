-- Dispatch ids on run history and the agent events of finished runs. Runs already on record
-- get no dispatch id and no events.
ALTER TABLE run_history ADD COLUMN dispatch_id TEXT;
CREATE UNIQUE INDEX idx_run_history_dispatch_id ON run_history(dispatch_id)
    WHERE dispatch_id IS NOT NULL AND dispatch_id <> '';

CREATE TABLE agent_events (
    dispatch_id TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    at_ms       INTEGER NOT NULL,
    event_type  TEXT NOT NULL,
    payload     TEXT NOT NULL,     -- JSON object: message, session_id, tool_*, usage, ...
    PRIMARY KEY (dispatch_id, seq)
) WITHOUT ROWID;

-- One row per run whose events are stored, so retention works per run, not per event.
CREATE TABLE agent_event_runs (
    dispatch_id     TEXT PRIMARY KEY,
    run_id          INTEGER,
    completed_at_ms INTEGER NOT NULL,
    first_seq       INTEGER NOT NULL,
    last_seq        INTEGER NOT NULL,
    event_count     INTEGER NOT NULL,
    bytes           INTEGER NOT NULL
);
CREATE INDEX idx_agent_event_runs_completed ON agent_event_runs(completed_at_ms);
