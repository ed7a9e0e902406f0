//! A small pool of read-only connections shared by request handlers. Opening a connection per
//! request costs a file open, schema parse and a fresh statement cache; a pooled connection
//! keeps its prepared statements (`prepare_cached`) across requests.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::error::StoreError;
use super::read::ReadConn;
use super::scope::Scope;

/// Idle connections kept; one per request thread is enough, more are opened on demand and
/// closed when returned.
const MAX_IDLE: usize = 8;

/// Idle read-only connections to one database file.
pub struct ReadPool {
    path: PathBuf,
    idle: Mutex<Vec<ReadConn>>,
}

impl ReadPool {
    /// A pool that opens connections lazily (the database must exist by the first read).
    pub fn new(path: &Path) -> ReadPool {
        ReadPool {
            path: path.to_path_buf(),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// This pool's connections, reading `scope`'s rows.
    pub fn scoped(&self, scope: Scope) -> ScopedPool<'_> {
        ScopedPool { pool: self, scope }
    }

    /// A connection from the pool (or a new one), reading the single workflow; it goes back
    /// when the guard drops.
    pub fn get(&self) -> Result<PooledRead<'_>, StoreError> {
        self.get_in(Scope::single())
    }

    fn get_in(&self, scope: Scope) -> Result<PooledRead<'_>, StoreError> {
        let conn = match self.take_idle() {
            Some(c) => c,
            None => ReadConn::open(&self.path)?,
        }
        .with_scope(scope);
        Ok(PooledRead {
            pool: self,
            conn: Some(conn),
            keep: true,
        })
    }

    /// Runs `read` on a pooled connection. A connection whose read failed is closed rather
    /// than returned, so a handle in an unknown state is not handed out again.
    pub fn with<T>(
        &self,
        read: impl FnOnce(&ReadConn) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.with_in(Scope::single(), read)
    }

    fn with_in<T>(
        &self,
        scope: Scope,
        read: impl FnOnce(&ReadConn) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut guard = self.get_in(scope)?;
        let result = read(&guard);
        guard.keep = result.is_ok();
        result
    }

    #[cfg(test)]
    fn idle_count(&self) -> usize {
        self.idle.lock().map(|v| v.len()).unwrap_or(0)
    }

    fn take_idle(&self) -> Option<ReadConn> {
        self.idle.lock().ok().and_then(|mut v| v.pop())
    }

    fn give_back(&self, conn: ReadConn) {
        if let Ok(mut v) = self.idle.lock()
            && v.len() < MAX_IDLE
        {
            v.push(conn);
        }
    }
}

/// A pool whose connections read one scope's rows (see [`Scope`]).
pub struct ScopedPool<'a> {
    pool: &'a ReadPool,
    scope: Scope,
}

impl<'a> ScopedPool<'a> {
    /// A connection from the pool (or a new one); it goes back when the guard drops.
    pub fn get(&self) -> Result<PooledRead<'a>, StoreError> {
        self.pool.get_in(self.scope.clone())
    }

    /// [`ReadPool::with`], reading this scope.
    pub fn with<T>(
        &self,
        read: impl FnOnce(&ReadConn) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.pool.with_in(self.scope.clone(), read)
    }
}

/// A pooled connection, returned to its pool on drop.
pub struct PooledRead<'a> {
    pool: &'a ReadPool,
    /// Always `Some` until `drop` moves it back into the pool.
    conn: Option<ReadConn>,
    keep: bool,
}

impl std::ops::Deref for PooledRead<'_> {
    type Target = ReadConn;
    fn deref(&self) -> &ReadConn {
        match &self.conn {
            Some(c) => c,
            None => unreachable!("the connection is taken only in drop"),
        }
    }
}

impl Drop for PooledRead<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.conn.take()
            && self.keep
        {
            self.pool.give_back(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = dir.path().join("t.db");
        let conn = rusqlite::Connection::open(&path).unwrap_or_else(|e| panic!("open: {e}"));
        conn.execute_batch("CREATE TABLE t (x INTEGER)")
            .unwrap_or_else(|e| panic!("create: {e}"));
        (dir, path)
    }

    #[test]
    fn connections_are_reused_and_failed_ones_dropped() {
        let (_dir, path) = db();
        let pool = ReadPool::new(&path);
        assert!(pool.with(|c| c.ping()).is_ok());
        assert_eq!(pool.idle_count(), 1);
        {
            let a = pool.get().unwrap_or_else(|e| panic!("get: {e}"));
            let b = pool.get().unwrap_or_else(|e| panic!("get: {e}"));
            assert!(a.ping().is_ok() && b.ping().is_ok());
            assert_eq!(pool.idle_count(), 0);
        }
        assert_eq!(pool.idle_count(), 2);
        let failed: Result<(), StoreError> = pool.with(|_| Err(StoreError::WriterGone));
        assert!(failed.is_err());
        assert_eq!(pool.idle_count(), 1);
    }

    #[test]
    fn a_missing_database_is_an_error() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let pool = ReadPool::new(&dir.path().join("absent.db"));
        assert!(pool.with(|c| c.ping()).is_err());
        assert_eq!(pool.idle_count(), 0);
    }
}
