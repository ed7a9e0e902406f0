-- Triage answers of pull-request reactions: the newest verdict a triage run gave for a kind's
-- subject (the fingerprint of the failing head, the comment set or the conflicting head), so
-- an `ignore` (bot review: handled) or an `escalate` answer survives a restart and the same
-- subject is not triaged again.
CREATE TABLE triage_answers (
    issue_id       TEXT NOT NULL,
    kind           TEXT NOT NULL,   -- ci | review | bot-review | merge-conflict
    fingerprint    TEXT NOT NULL,
    answer         TEXT NOT NULL,   -- act | ignore | escalate
    answered_at_ms INTEGER NOT NULL,
    PRIMARY KEY (issue_id, kind)
);
