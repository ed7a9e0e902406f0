//! Conditional reads: the last body and `ETag` of each path, so a `304 Not Modified` answer
//! (free against the primary rate limit) reuses what was read before. Least recently touched
//! entries are evicted past the capacity or past [`MAX_CACHED_BYTES`] of answers (counted by
//! their size as read), so a server of huge issues cannot grow it without bound; an answer
//! over a quarter of that is not kept. Capacity 0 turns the cache off.

use std::collections::HashMap;

use serde_json::Value;

/// Most bytes of answers (as read) the cache keeps.
pub const MAX_CACHED_BYTES: usize = 32 * 1024 * 1024;

#[derive(Debug)]
struct Entry {
    etag: String,
    body: Value,
    touched: u64,
    size: usize,
}

/// A bounded map from request key to (etag, parsed body).
#[derive(Debug, Default)]
pub struct EtagCache {
    capacity: usize,
    tick: u64,
    entries: HashMap<String, Entry>,
    /// Sum of the kept entries' sizes.
    bytes: usize,
}

impl EtagCache {
    pub fn new(capacity: usize) -> Self {
        EtagCache {
            capacity,
            ..EtagCache::default()
        }
    }

    /// The etag to send as `If-None-Match`.
    pub fn etag(&self, key: &str) -> Option<String> {
        self.entries.get(key).map(|e| e.etag.clone())
    }

    /// The body stored for `key` (on a 304), marking it recently used.
    pub fn hit(&mut self, key: &str) -> Option<Value> {
        self.tick += 1;
        let tick = self.tick;
        self.entries.get_mut(key).map(|e| {
            e.touched = tick;
            e.body.clone()
        })
    }

    /// Stores a 200 answer of `size` bytes (as read) that carried an `ETag`.
    pub fn store(&mut self, key: &str, etag: &str, body: &Value, size: usize) {
        if let Some(old) = self.entries.remove(key) {
            self.bytes -= old.size;
        }
        if self.capacity == 0 || size > MAX_CACHED_BYTES / 4 {
            return;
        }
        self.tick += 1;
        while !self.entries.is_empty()
            && (self.entries.len() >= self.capacity || self.bytes + size > MAX_CACHED_BYTES)
        {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.touched)
                .map(|(k, _)| k.clone());
            if let Some(e) = oldest.and_then(|k| self.entries.remove(&k)) {
                self.bytes -= e.size;
            }
        }
        self.bytes += size;
        self.entries.insert(
            key.to_string(),
            Entry {
                etag: etag.to_string(),
                body: body.clone(),
                touched: self.tick,
                size,
            },
        );
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_touched() {
        let mut c = EtagCache::new(2);
        c.store("a", "\"1\"", &Value::from(1), 1);
        c.store("b", "\"2\"", &Value::from(2), 1);
        assert_eq!(c.hit("a"), Some(Value::from(1)));
        c.store("c", "\"3\"", &Value::from(3), 1);
        assert_eq!(c.etag("b"), None);
        assert_eq!(c.etag("a").as_deref(), Some("\"1\""));
        assert_eq!(c.len(), 2);
        let mut off = EtagCache::new(0);
        off.store("a", "x", &Value::Null, 1);
        assert_eq!(off.len(), 0);
    }

    #[test]
    fn kept_answers_stay_under_the_byte_cap() {
        let mut c = EtagCache::new(1000);
        let quarter = MAX_CACHED_BYTES / 4;
        c.store("huge", "x", &Value::Null, quarter + 1);
        assert_eq!(
            c.len(),
            0,
            "an answer over a quarter of the cap is not kept"
        );
        for k in ["a", "b", "c", "d", "e"] {
            c.store(k, "x", &Value::Null, quarter);
        }
        assert_eq!(c.len(), 4);
        assert_eq!(c.etag("a"), None, "the oldest made room");
        assert!(c.bytes <= MAX_CACHED_BYTES);
        c.store("e", "y", &Value::Null, 10);
        assert_eq!(
            c.bytes,
            3 * quarter + 10,
            "a replaced entry gives its bytes back"
        );
    }
}
