-- Each issue's latest stage hop, kept until its consecutive-hop count resets: it counts hops
-- across restarts and, until a run picks the issue up, lists it in between_stages[].
CREATE TABLE stage_hops (
    issue_id           TEXT PRIMARY KEY,
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
    issue_labels       TEXT                          -- JSON list; NULL while the hop holds no read
);
