-- Run detail: routing, models, token classes and measurement flags, origin, stage position,
-- cost columns; frozen routing and issue context on retries; cache writes and unmeasured
-- session counts on the aggregates; exits by type.
ALTER TABLE run_history ADD COLUMN display_identifier TEXT NOT NULL DEFAULT '';
ALTER TABLE run_history ADD COLUMN issue_title TEXT NOT NULL DEFAULT '';
ALTER TABLE run_history ADD COLUMN issue_url TEXT NOT NULL DEFAULT '';
ALTER TABLE run_history ADD COLUMN rule_name TEXT NOT NULL DEFAULT '';
ALTER TABLE run_history ADD COLUMN template TEXT NOT NULL DEFAULT '';
ALTER TABLE run_history ADD COLUMN configured_model TEXT NOT NULL DEFAULT '';
ALTER TABLE run_history ADD COLUMN configured_effort TEXT NOT NULL DEFAULT '';
ALTER TABLE run_history ADD COLUMN reported_model TEXT NOT NULL DEFAULT '';
ALTER TABLE run_history ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE run_history ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE run_history ADD COLUMN total_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE run_history ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE run_history ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
-- Append-only rows no later run revisits: an older row reads as measured.
ALTER TABLE run_history ADD COLUMN tokens_measured INTEGER NOT NULL DEFAULT 1;
ALTER TABLE run_history ADD COLUMN unaccounted_turns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE run_history ADD COLUMN declared_outcome TEXT;
ALTER TABLE run_history ADD COLUMN agent_text TEXT;
ALTER TABLE run_history ADD COLUMN dispatched_at TEXT;
ALTER TABLE run_history ADD COLUMN review_metadata TEXT;
ALTER TABLE run_history ADD COLUMN chain_id TEXT NOT NULL DEFAULT '';
ALTER TABLE run_history ADD COLUMN stage_previous TEXT NOT NULL DEFAULT '';
ALTER TABLE run_history ADD COLUMN stage_previous_outcome TEXT NOT NULL DEFAULT '';
ALTER TABLE run_history ADD COLUMN stage_target TEXT NOT NULL DEFAULT '';
ALTER TABLE run_history ADD COLUMN stage_result TEXT NOT NULL DEFAULT '';
ALTER TABLE run_history ADD COLUMN hop_first INTEGER NOT NULL DEFAULT 0;
ALTER TABLE run_history ADD COLUMN agent_blocked INTEGER NOT NULL DEFAULT 0;
-- Origin: NULL means "recorded before the origin was stored".
ALTER TABLE run_history ADD COLUMN retry_trigger TEXT;
ALTER TABLE run_history ADD COLUMN reaction_kind TEXT;
ALTER TABLE run_history ADD COLUMN reaction_config_key TEXT;
ALTER TABLE run_history ADD COLUMN session_id TEXT;
ALTER TABLE run_history ADD COLUMN ssh_host TEXT;
ALTER TABLE run_history ADD COLUMN usage_completeness TEXT NOT NULL DEFAULT '';
ALTER TABLE run_history ADD COLUMN unmeasured_cause TEXT;
ALTER TABLE run_history ADD COLUMN usage_provenance TEXT;
ALTER TABLE run_history ADD COLUMN vendor_amounts TEXT;
ALTER TABLE run_history ADD COLUMN model_usage TEXT;
ALTER TABLE run_history ADD COLUMN skills TEXT;
ALTER TABLE run_history ADD COLUMN estimated_cost_usd REAL;
ALTER TABLE run_history ADD COLUMN cost_status TEXT NOT NULL DEFAULT '';
ALTER TABLE run_history ADD COLUMN price_source TEXT NOT NULL DEFAULT '';
ALTER TABLE run_history ADD COLUMN rates_version TEXT NOT NULL DEFAULT '';
CREATE INDEX idx_run_history_completed_at ON run_history(completed_at);
CREATE INDEX idx_run_history_identifier ON run_history(identifier);

ALTER TABLE retry_entries ADD COLUMN display_identifier TEXT NOT NULL DEFAULT '';
ALTER TABLE retry_entries ADD COLUMN agent_kind TEXT NOT NULL DEFAULT '';
ALTER TABLE retry_entries ADD COLUMN template TEXT NOT NULL DEFAULT '';
ALTER TABLE retry_entries ADD COLUMN rule_name TEXT NOT NULL DEFAULT '';
ALTER TABLE retry_entries ADD COLUMN chain_id TEXT NOT NULL DEFAULT '';
ALTER TABLE retry_entries ADD COLUMN stage_previous TEXT NOT NULL DEFAULT '';
ALTER TABLE retry_entries ADD COLUMN stage_previous_outcome TEXT NOT NULL DEFAULT '';
-- What scheduled the retry; NULL = queued before this was stored.
ALTER TABLE retry_entries ADD COLUMN retry_trigger TEXT;
ALTER TABLE retry_entries ADD COLUMN reaction_kind TEXT NOT NULL DEFAULT '';
ALTER TABLE retry_entries ADD COLUMN reaction_config_key TEXT NOT NULL DEFAULT '';
ALTER TABLE retry_entries ADD COLUMN issue_title TEXT NOT NULL DEFAULT '';
ALTER TABLE retry_entries ADD COLUMN issue_url TEXT NOT NULL DEFAULT '';
ALTER TABLE retry_entries ADD COLUMN issue_type TEXT NOT NULL DEFAULT '';
ALTER TABLE retry_entries ADD COLUMN issue_labels TEXT NOT NULL DEFAULT '[]';
ALTER TABLE retry_entries ADD COLUMN issue_state TEXT NOT NULL DEFAULT '';
ALTER TABLE retry_entries ADD COLUMN configured_model TEXT NOT NULL DEFAULT '';
ALTER TABLE retry_entries ADD COLUMN dispatched_at_ms INTEGER;

ALTER TABLE session_metadata ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE session_metadata ADD COLUMN started_at_ms INTEGER;
ALTER TABLE session_metadata ADD COLUMN exit_type TEXT;
-- One current row per issue, overwritten by the next session: an old row may read unmeasured.
ALTER TABLE session_metadata ADD COLUMN api_requests_measured INTEGER NOT NULL DEFAULT 0;
ALTER TABLE session_metadata ADD COLUMN dispatch_id TEXT;

ALTER TABLE aggregate_metrics ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE aggregate_metrics ADD COLUMN unmeasured_sessions INTEGER NOT NULL DEFAULT 0;

CREATE TABLE aggregate_exits (
    exit_type TEXT PRIMARY KEY,
    count     INTEGER NOT NULL DEFAULT 0
);
