-- Usage-limit holds on a whole agent kind: no session of the kind (of one configured model, for
-- a model-only hold) starts until the reset, across a restart too. Deleted once the reset and
-- one poll interval have passed.
CREATE TABLE agent_usage_holds (
    agent_kind   TEXT NOT NULL,
    model_only   INTEGER NOT NULL DEFAULT 0,
    model        TEXT NOT NULL DEFAULT '',        -- '' for every model or the runtime's default
    resets_at_ms INTEGER NOT NULL,
    since_ms     INTEGER NOT NULL,
    PRIMARY KEY (agent_kind, model_only, model)
);
