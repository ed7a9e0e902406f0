//! Scrubbing stored text: every text value of every table read back and rewritten through the
//! masker, for rows stored before masking happened at binding (builds before schema 10 kept
//! agent output, issue titles and errors in clear). The tables and columns are read from the
//! schema itself, so a table added later is covered without a change here.
//!
//! A pass goes a batch at a time (at most [`BATCH_ROWS`] rows, one short transaction each),
//! in key order with a cursor, so a large database never holds the write lock for long and
//! the writer thread serves writes between batches. While it runs, `secure_delete` is on, so
//! the old text of a rewritten row is overwritten with zeros rather than left in free space;
//! at the end the WAL is checkpointed and truncated, and a database of at most
//! [`VACUUM_MAX_BYTES`] is rebuilt (`VACUUM`) so free pages written by older builds go too.
//! The pass restarts from the first table when the secret registry grows under it. Rewriting
//! masked text changes nothing, so a pass is idempotent.
//!
//! The daemon runs the pass requested by migration 010 (`store_tasks`) at start, once;
//! `sortie scrub` runs a full one on demand.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, ToSql};

use super::bind;
use super::error::{SqlContext, StoreError};

/// Rows read per batch.
pub const BATCH_ROWS: i64 = 200;
/// Largest database the daemon's pass rebuilds with `VACUUM` (a few seconds at most); a larger
/// one is left to `sortie scrub`, which always rebuilds.
pub const VACUUM_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// The `store_tasks` row that asks for a pass.
pub const TASK: &str = "scrub_secrets";

/// What a pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScrubReport {
    pub tables: usize,
    pub rows_read: u64,
    /// Rows with at least one value masked.
    pub rows_rewritten: u64,
    /// Rows whose key held a secret and whose masked key was taken by another row.
    pub rows_removed: u64,
    /// Times the pass started over because the registry grew.
    pub restarts: u64,
}

/// One table as the pass reads it.
#[derive(Debug, Clone)]
struct Table {
    name: String,
    /// `rowid`, or the primary key columns of a `WITHOUT ROWID` table.
    key: Vec<String>,
    columns: Vec<String>,
}

/// A pass in progress.
pub struct Scrub {
    tables: Vec<Table>,
    table: usize,
    cursor: Option<Vec<Value>>,
    generation: u64,
    started: Instant,
    report: ScrubReport,
    secure_delete_was: i64,
}

/// Whether migration 010 (or an operator) asked for a pass that has not finished.
pub fn requested(conn: &Connection) -> Result<bool, StoreError> {
    let has_table: bool = conn
        .query_row(
            "SELECT EXISTS(SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'store_tasks')",
            [],
            |r| r.get(0),
        )
        .ctx("look for store tasks")?;
    if !has_table {
        return Ok(false);
    }
    conn.query_row("SELECT 1 FROM store_tasks WHERE task = ?1", [TASK], |_| {
        Ok(())
    })
    .optional()
    .ctx("read store tasks")
    .map(|r| r.is_some())
}

impl Scrub {
    /// Starts a pass over every table of `conn`'s main database.
    pub fn start(conn: &Connection) -> Result<Scrub, StoreError> {
        let tables = tables(conn)?;
        let secure_delete_was: i64 = conn
            .pragma_query_value(None, "secure_delete", |r| r.get(0))
            .ctx("read secure_delete")?;
        conn.pragma_update(None, "secure_delete", 1)
            .ctx("turn secure_delete on")?;
        Ok(Scrub {
            report: ScrubReport {
                tables: tables.len(),
                ..ScrubReport::default()
            },
            tables,
            table: 0,
            cursor: None,
            generation: crate::mask::generation(),
            started: Instant::now(),
            secure_delete_was,
        })
    }

    pub fn report(&self) -> ScrubReport {
        self.report
    }

    pub fn elapsed_ms(&self) -> u128 {
        self.started.elapsed().as_millis()
    }

    /// Scrubs the next batch; `true` once every table is done.
    pub fn step(&mut self, conn: &Connection) -> Result<bool, StoreError> {
        let generation = crate::mask::generation();
        if generation != self.generation {
            self.generation = generation;
            self.table = 0;
            self.cursor = None;
            self.report.restarts += 1;
        }
        let Some(table) = self.tables.get(self.table).cloned() else {
            return Ok(true);
        };
        let secrets = bind::patterns();
        let tx = conn
            .unchecked_transaction()
            .ctx("begin scrub transaction")?;
        let rows = read_batch(&tx, &table, self.cursor.as_deref())?;
        for row in &rows {
            self.report.rows_read += 1;
            match rewrite_row(&tx, &table, row, &secrets)? {
                Rewrite::Unchanged => {}
                Rewrite::Rewritten => self.report.rows_rewritten += 1,
                Rewrite::Removed => self.report.rows_removed += 1,
            }
        }
        tx.commit().ctx("commit scrub transaction")?;
        match rows.last() {
            Some(last) if rows.len() as i64 == BATCH_ROWS => {
                self.cursor = Some(last[..table.key.len()].to_vec());
            }
            _ => {
                self.table += 1;
                self.cursor = None;
            }
        }
        Ok(self.table >= self.tables.len())
    }

    /// Ends a finished pass: drops the request, restores `secure_delete`, rebuilds the file
    /// when `vacuum` says so, and truncates the WAL. Returns whether the WAL was truncated
    /// (a reader holding an old snapshot defers that to a later checkpoint).
    pub fn finish(self, conn: &Connection, vacuum: bool) -> Result<bool, StoreError> {
        bind::execute(
            conn,
            "DELETE FROM store_tasks WHERE task = ?1",
            rusqlite::params![TASK],
        )
        .ctx("clear the scrub request")?;
        if vacuum {
            conn.execute_batch("VACUUM")
                .ctx("rebuild the database file")?;
        }
        conn.pragma_update(None, "secure_delete", self.secure_delete_was)
            .ctx("restore secure_delete")?;
        truncate_wal(conn)
    }

    /// Gives up a pass that failed: `secure_delete` as it was; the request stays for the next
    /// start.
    pub fn abandon(self, conn: &Connection) {
        if let Err(e) = conn.pragma_update(None, "secure_delete", self.secure_delete_was) {
            log::debug!(error:% = e.to_string(); "secure_delete not restored");
        }
    }
}

/// How long the truncating checkpoint waits for readers of older snapshots.
const TRUNCATE_WAIT: Duration = Duration::from_secs(2);

/// `PRAGMA wal_checkpoint(TRUNCATE)`: `true` when the WAL was emptied; `false` when a reader
/// kept it (the next checkpoint then reuses it from the start).
pub fn truncate_wal(conn: &Connection) -> Result<bool, StoreError> {
    conn.busy_timeout(TRUNCATE_WAIT)
        .ctx("set checkpoint busy timeout")?;
    let busy = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            r.get::<_, i64>(0)
        })
        .ctx("checkpoint and truncate the WAL");
    conn.busy_timeout(super::connection::WRITER_BUSY_TIMEOUT)
        .ctx("restore writer busy timeout")?;
    Ok(busy? == 0)
}

/// The database's size in bytes (pages times page size).
pub fn database_bytes(conn: &Connection) -> Result<u64, StoreError> {
    let pages: i64 = conn
        .pragma_query_value(None, "page_count", |r| r.get(0))
        .ctx("read page count")?;
    let size: i64 = conn
        .pragma_query_value(None, "page_size", |r| r.get(0))
        .ctx("read page size")?;
    Ok(u64::try_from(pages.saturating_mul(size)).unwrap_or(0))
}

/// Every table but SQLite's own, with its key and columns.
fn tables(conn: &Connection) -> Result<Vec<Table>, StoreError> {
    let mut stmt = conn
        .prepare(
            "SELECT name, sql FROM sqlite_schema
             WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
        )
        .ctx("prepare list tables")?;
    let listed: Vec<(String, String)> = stmt
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get::<_, Option<String>>(1)?.unwrap_or_default(),
            ))
        })
        .ctx("list tables")?
        .collect::<Result<_, _>>()
        .ctx("read table list")?;
    let mut out = Vec::new();
    for (name, sql) in listed {
        let mut columns = Vec::new();
        let mut pk: Vec<(i64, String)> = Vec::new();
        let mut info = conn
            .prepare(&format!("PRAGMA table_info({})", quote(&name)))
            .ctx("prepare table info")?;
        let rows = info
            .query_map([], |r| Ok((r.get::<_, String>(1)?, r.get::<_, i64>(5)?)))
            .ctx("read table info")?;
        for r in rows {
            let (col, pk_pos) = r.ctx("read table column")?;
            if pk_pos > 0 {
                pk.push((pk_pos, col.clone()));
            }
            columns.push(col);
        }
        pk.sort();
        let without_rowid = sql.to_ascii_uppercase().contains("WITHOUT ROWID");
        let key = if without_rowid {
            pk.into_iter().map(|(_, c)| c).collect()
        } else {
            vec!["rowid".to_string()]
        };
        out.push(Table { name, key, columns });
    }
    Ok(out)
}

fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// The next rows after `cursor`, key columns first.
fn read_batch(
    conn: &Connection,
    t: &Table,
    cursor: Option<&[Value]>,
) -> Result<Vec<Vec<Value>>, StoreError> {
    let keys: Vec<String> = t.key.iter().map(|k| quote_key(k)).collect();
    let cols: Vec<String> = t.columns.iter().map(|c| quote(c)).collect();
    let order = keys.join(", ");
    let filter = match cursor {
        None => String::new(),
        Some(_) => {
            let marks: Vec<String> = (1..=keys.len()).map(|i| format!("?{i}")).collect();
            format!("WHERE ({order}) > ({})", marks.join(", "))
        }
    };
    let sql = format!(
        "SELECT {order}, {} FROM {} {filter} ORDER BY {order} LIMIT {BATCH_ROWS}",
        cols.join(", "),
        quote(&t.name)
    );
    let mut stmt = conn.prepare_cached(&sql).ctx("prepare scrub read")?;
    let width = keys.len() + cols.len();
    let params: Vec<&dyn ToSql> = cursor
        .unwrap_or_default()
        .iter()
        .map(|v| v as &dyn ToSql)
        .collect();
    let rows = stmt
        .query_map(&*params, |r| {
            (0..width).map(|i| r.get::<_, Value>(i)).collect()
        })
        .ctx("scrub read")?;
    rows.collect::<Result<_, _>>().ctx("scrub read row")
}

fn quote_key(k: &str) -> String {
    if k == "rowid" {
        k.to_string()
    } else {
        quote(k)
    }
}

enum Rewrite {
    Unchanged,
    Rewritten,
    Removed,
}

/// Masks the row's text values; writes back only those that changed.
fn rewrite_row(
    conn: &Connection,
    t: &Table,
    row: &[Value],
    secrets: &[Arc<str>],
) -> Result<Rewrite, StoreError> {
    let (key, values) = row.split_at(t.key.len());
    let mut changed: Vec<(usize, String)> = Vec::new();
    for (i, v) in values.iter().enumerate() {
        if let Value::Text(s) = v
            && let std::borrow::Cow::Owned(m) = bind::mask_text(s, secrets)
        {
            changed.push((i, m));
        }
    }
    if changed.is_empty() {
        return Ok(Rewrite::Unchanged);
    }
    let n = changed.len();
    let set: Vec<String> = changed
        .iter()
        .enumerate()
        .map(|(j, (i, _))| format!("{} = ?{}", quote(&t.columns[*i]), j + 1))
        .collect();
    let sql = format!(
        "UPDATE {} SET {} WHERE {}",
        quote(&t.name),
        set.join(", "),
        key_match(t, n)
    );
    let masked: Vec<&dyn ToSql> = changed.iter().map(|(_, m)| m as &dyn ToSql).collect();
    let keys: Vec<&dyn ToSql> = key.iter().map(|v| v as &dyn ToSql).collect();
    match bind::execute_keyed(conn, &sql, &masked, &keys) {
        Ok(_) => Ok(Rewrite::Rewritten),
        // The masked key collides with a stored one: the row cannot keep its secret, and
        // cannot take the other row's place.
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            let sql = format!("DELETE FROM {} WHERE {}", quote(&t.name), key_match(t, 0));
            bind::execute_keyed(conn, &sql, &[], &keys).ctx("remove a row keyed by a secret")?;
            log::warn!(
                table:% = t.name;
                "stored row removed: its key held a secret and its masked key is taken"
            );
            Ok(Rewrite::Removed)
        }
        Err(e) => Err(StoreError::Sqlite {
            context: "scrub rewrite",
            source: e,
        }),
    }
}

/// `k1 = ?(after+1) AND k2 = ?(after+2) …`.
fn key_match(t: &Table, after: usize) -> String {
    t.key
        .iter()
        .enumerate()
        .map(|(j, k)| format!("{} = ?{}", quote_key(k), after + j + 1))
        .collect::<Vec<_>>()
        .join(" AND ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        let c = Connection::open_in_memory().expect("open");
        c.execute_batch(
            "CREATE TABLE store_tasks (task TEXT PRIMARY KEY, requested_at TEXT NOT NULL);
             INSERT INTO store_tasks VALUES ('scrub_secrets', 'now');
             CREATE TABLE plain (id INTEGER PRIMARY KEY, a TEXT, n INTEGER, b BLOB);
             CREATE TABLE keyed (k TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT,
                 PRIMARY KEY (k, seq)) WITHOUT ROWID;
             CREATE TABLE named (name TEXT PRIMARY KEY, v TEXT);",
        )
        .expect("schema");
        c
    }

    fn run_pass(c: &Connection) -> ScrubReport {
        let mut s = Scrub::start(c).expect("start");
        let mut batches = 0;
        while !s.step(c).expect("step") {
            batches += 1;
            assert!(batches < 10_000, "pass does not end");
        }
        let report = s.report();
        s.finish(c, false).expect("finish");
        report
    }

    #[test]
    fn every_table_is_scrubbed_in_batches_and_a_second_pass_changes_nothing() {
        crate::mask::register_secret("scrub-probe-s3cret");
        let c = db();
        let rows = BATCH_ROWS * 2 + 7;
        for i in 0..rows {
            c.execute(
                "INSERT INTO plain (a, n, b) VALUES (?1, ?2, x'00')",
                rusqlite::params![format!("row {i} scrub-probe-s3cret"), i],
            )
            .expect("insert");
            c.execute(
                "INSERT INTO keyed VALUES ('d', ?1, ?2)",
                rusqlite::params![i, r#"{"m":"scrub-probe-s3cret"}"#],
            )
            .expect("insert keyed");
        }
        c.execute_batch(
            "INSERT INTO named VALUES ('scrub-probe-s3cret', 'x');
             INSERT INTO named VALUES ('[redacted]', 'y');
             INSERT INTO named VALUES ('n-scrub-probe-s3cret', 'z');",
        )
        .expect("named");
        let report = run_pass(&c);
        // The request row of `store_tasks` is read too.
        assert_eq!(report.rows_read as i64, rows * 2 + 3 + 1);
        assert_eq!(report.rows_rewritten as i64, rows * 2 + 1);
        assert_eq!(report.rows_removed, 1);
        let left: i64 = c
            .query_row(
                "SELECT (SELECT COUNT(*) FROM plain WHERE a LIKE '%s3cret%')
                      + (SELECT COUNT(*) FROM keyed WHERE body LIKE '%s3cret%')
                      + (SELECT COUNT(*) FROM named WHERE name LIKE '%s3cret%')",
                [],
                |r| r.get(0),
            )
            .expect("count");
        assert_eq!(left, 0);
        let a: String = c
            .query_row("SELECT a FROM plain WHERE id = 1", [], |r| r.get(0))
            .expect("row");
        assert_eq!(a, "row 0 [redacted]");
        assert!(!requested(&c).expect("requested"), "request cleared");

        let again = run_pass(&c);
        assert_eq!(again.rows_rewritten, 0);
        assert_eq!(again.rows_removed, 0);
    }
}
