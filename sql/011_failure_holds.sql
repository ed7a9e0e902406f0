-- Issues held by the failure breaker: a run failed with a cause that will not heal by itself,
-- or too many runs in a row failed with the same cause. Kept until a person releases the issue
-- (acknowledge, retry now) or the workflow reloads, across a restart too.
CREATE TABLE failure_holds (
    issue_id      TEXT PRIMARY KEY,
    identifier    TEXT NOT NULL,
    issue_title   TEXT NOT NULL DEFAULT '',
    issue_url     TEXT NOT NULL DEFAULT '',
    issue_state   TEXT NOT NULL DEFAULT '',
    agent_kind    TEXT NOT NULL DEFAULT '',
    cause         TEXT NOT NULL,                -- a failure class code, else the error code
    classified    INTEGER NOT NULL DEFAULT 0,   -- 1: the cause is a failure class
    runs          INTEGER NOT NULL,             -- consecutive runs that ended with the cause
    message       TEXT NOT NULL DEFAULT '',     -- the agent's own words, masked
    since_ms      INTEGER NOT NULL
);
