-- The last validated copy of each downloaded price table, so a restart prices with it before
-- its first download. `url_digest` names the address it came from (never the address itself,
-- which may carry a credential); `as_of_ms` is the download's time.
CREATE TABLE price_table_cache (
    layer      TEXT PRIMARY KEY,                  -- 'fetched' or 'operator'
    url_digest TEXT NOT NULL,
    version    TEXT NOT NULL,
    as_of_ms   INTEGER NOT NULL,
    body       BLOB NOT NULL
);
