-- Maintenance a start carries out and then deletes. `scrub_secrets` asks for one pass that
-- rewrites every stored text value through the secret masker (`store::scrub`): builds before
-- this schema stored agent output, issue titles and errors unmasked. From this schema on every
-- value is masked as it is bound, so the pass runs once per database.
CREATE TABLE store_tasks (
    task         TEXT PRIMARY KEY,
    requested_at TEXT NOT NULL
);
INSERT INTO store_tasks (task, requested_at)
    VALUES ('scrub_secrets', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
