-- Each issue's count of withheld handoffs in a row (`tracker.handoff_evidence`): a run whose
-- handoff Sortie withheld for want of evidence of work adds one, a run that ends normally or
-- the park at the ceiling removes the row. Kept so a restart does not start the sequence again.
CREATE TABLE handoff_absence (
    issue_id          TEXT PRIMARY KEY,
    withheld_in_a_row INTEGER NOT NULL,
    updated_at_ms     INTEGER NOT NULL
);
