//! Conditional reads: the last body and `ETag` of each path, so a `304 Not Modified` answer
//! (free against the primary rate limit) reuses what was read before. Least recently touched
//! entries are evicted past the capacity; capacity 0 turns the cache off.

use std::collections::HashMap;

use serde_json::Value;

#[derive(Debug)]
struct Entry {
    etag: String,
    body: Value,
    touched: u64,
}

/// A bounded map from request key to (etag, parsed body).
#[derive(Debug, Default)]
pub struct EtagCache {
    capacity: usize,
    tick: u64,
    entries: HashMap<String, Entry>,
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

    /// Stores a 200 answer that carried an `ETag`.
    pub fn store(&mut self, key: &str, etag: &str, body: &Value) {
        if self.capacity == 0 {
            return;
        }
        self.tick += 1;
        if !self.entries.contains_key(key) && self.entries.len() >= self.capacity {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.touched)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.entries.remove(&k);
            }
        }
        self.entries.insert(
            key.to_string(),
            Entry {
                etag: etag.to_string(),
                body: body.clone(),
                touched: self.tick,
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
        c.store("a", "\"1\"", &Value::from(1));
        c.store("b", "\"2\"", &Value::from(2));
        assert_eq!(c.hit("a"), Some(Value::from(1)));
        c.store("c", "\"3\"", &Value::from(3));
        assert_eq!(c.etag("b"), None);
        assert_eq!(c.etag("a").as_deref(), Some("\"1\""));
        assert_eq!(c.len(), 2);
        let mut off = EtagCache::new(0);
        off.store("a", "x", &Value::Null);
        assert_eq!(off.len(), 0);
    }
}
