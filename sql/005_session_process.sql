-- What identifies a running session's agent process group, so a restart after a crash can
-- stop an agent the killed process left running (a reused pid never matches: the start time
-- from /proc/<pid>/stat field 22 must match too), and what an interrupted session's run row
-- needs. Cleared by the exit write and once a restart has stopped the group.
ALTER TABLE session_metadata ADD COLUMN agent_pgid INTEGER;
ALTER TABLE session_metadata ADD COLUMN agent_start_ticks INTEGER;
ALTER TABLE session_metadata ADD COLUMN identifier TEXT NOT NULL DEFAULT '';
ALTER TABLE session_metadata ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE session_metadata ADD COLUMN workspace TEXT NOT NULL DEFAULT '';
ALTER TABLE session_metadata ADD COLUMN agent_kind TEXT NOT NULL DEFAULT '';
ALTER TABLE session_metadata ADD COLUMN workflow_file TEXT NOT NULL DEFAULT '';
-- The sortie process (`<pid>-<start ticks>`) that ran the session: its agents' descendants
-- carry it in their environment, so a restart finds those that left the group.
ALTER TABLE session_metadata ADD COLUMN sortie_instance TEXT NOT NULL DEFAULT '';
-- Set when a restart records the session as interrupted; cleared once the warm start has
-- stopped what is left of it and queued its resumption.
ALTER TABLE session_metadata ADD COLUMN recovery_pending INTEGER NOT NULL DEFAULT 0;
