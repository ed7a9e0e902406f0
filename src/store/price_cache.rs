//! Downloaded price tables kept across restarts (`price_table_cache`): one row per source, the
//! last body that passed validation. Writes go through the writer thread and wait for their
//! commit; the download thread is the only caller, once a day.

use std::sync::Arc;

use rusqlite::{Connection, named_params};
use sha2::{Digest, Sha256};

use super::bind;
use super::error::{SqlContext, StoreError};
use super::writer::WriterHandle;
use crate::pricing::Feed;
use crate::pricing::fetch::{CacheError, KeptTable, TableCache};

fn save(conn: &Connection, k: &KeptTable) -> Result<(), StoreError> {
    let version: String = Sha256::digest(&k.body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    bind::execute(
        conn,
        "INSERT INTO price_table_cache (layer, url_digest, version, as_of_ms, body)
         VALUES (:layer, :url_digest, :version, :as_of_ms, :body)
         ON CONFLICT (layer) DO UPDATE SET url_digest = excluded.url_digest,
             version = excluded.version, as_of_ms = excluded.as_of_ms, body = excluded.body",
        named_params! {
            ":layer": k.feed.as_str(), ":url_digest": k.url_digest,
            ":version": format!("sha256:{version}"), ":as_of_ms": k.as_of_ms, ":body": k.body,
        },
    )
    .ctx("save price table")?;
    Ok(())
}

fn load(conn: &Connection) -> Result<Vec<KeptTable>, StoreError> {
    let mut stmt = conn
        .prepare("SELECT layer, url_digest, as_of_ms, body FROM price_table_cache ORDER BY layer")
        .ctx("prepare load price tables")?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, Vec<u8>>(3)?,
            ))
        })
        .ctx("load price tables")?;
    let mut out = Vec::new();
    for row in rows {
        let (layer, url_digest, as_of_ms, body) = row.ctx("read price table")?;
        let feed = match layer.as_str() {
            "fetched" => Feed::Fetched,
            "operator" => Feed::Operator,
            _ => continue,
        };
        out.push(KeptTable {
            feed,
            url_digest,
            as_of_ms,
            body,
        });
    }
    Ok(out)
}

/// The database as the download thread's [`TableCache`].
pub struct PriceCache {
    writer: WriterHandle,
}

impl PriceCache {
    pub fn new(writer: WriterHandle) -> Arc<PriceCache> {
        Arc::new(PriceCache { writer })
    }
}

impl TableCache for PriceCache {
    fn load(&self) -> Result<Vec<KeptTable>, CacheError> {
        Ok(self.writer.query(load)?)
    }

    fn save(&self, kept: KeptTable) -> Result<(), CacheError> {
        Ok(self.writer.query(move |c| save(c, &kept))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;

    #[test]
    fn a_kept_table_is_replaced_per_source_and_read_back() {
        let d = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(&d.path().join("db"), Arc::new(SystemClock)).unwrap();
        let cache = PriceCache::new(store.writer());
        assert_eq!(cache.load().unwrap(), []);
        let kept = |digest: &str, at: i64| KeptTable {
            feed: Feed::Fetched,
            url_digest: digest.into(),
            as_of_ms: at,
            body: b"{}".to_vec(),
        };
        cache.save(kept("a", 1)).unwrap();
        cache.save(kept("b", 2)).unwrap();
        assert_eq!(cache.load().unwrap(), [kept("b", 2)]);
    }
}
