-- Live stage passes: the stage passes that hold no retry entry, a running stage session and a
-- budget hold, each with its chain, its rule and the rule whose hop reached it. They exist for
-- `sortie stats`, a separate process whose stage funnels count work that has not finished.
-- The daemon empties the table at startup and restores nothing from it.
CREATE TABLE live_stage_passes (
    issue_id    TEXT PRIMARY KEY,
    identifier  TEXT NOT NULL DEFAULT '',
    kind        TEXT NOT NULL,              -- session | budget_hold
    chain_id    TEXT NOT NULL DEFAULT '',
    rule_name   TEXT NOT NULL,
    via_rule    TEXT NOT NULL DEFAULT '',   -- the rule whose hop reached it; '' when none did
    since_ms    INTEGER NOT NULL
);
