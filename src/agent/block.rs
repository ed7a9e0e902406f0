//! Reading an agent kind's pass-through block (`codex:`, `kiro:`, …): typed keys, each
//! wrong value one [`SettingProblem`] naming `<block>.<key>`, and the value the session runs
//! with when a key is unset or wrong. Every kind's settings check reads its block through a
//! [`BlockReader`], so the keys are checked and worded alike.

use crate::domain::SettingProblem;
use serde_json::{Map, Value};

/// One block being read, with the problems found so far.
pub struct BlockReader<'a> {
    name: &'a str,
    block: &'a Map<String, Value>,
    problems: Vec<SettingProblem>,
}

impl<'a> BlockReader<'a> {
    /// Reads `block`, the settings block called `name`.
    pub fn new(name: &'a str, block: &'a Map<String, Value>) -> Self {
        BlockReader {
            name,
            block,
            problems: Vec::new(),
        }
    }

    /// A key's value; an explicit `null` counts as unset.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.block.get(key).filter(|v| !v.is_null())
    }

    /// Records a problem with `key`.
    pub fn problem(&mut self, key: &str, message: String) {
        self.problems
            .push(SettingProblem::new(format!("{}.{key}", self.name), message));
    }

    /// A non-empty string, trimmed.
    pub fn string(&mut self, key: &str) -> Option<String> {
        match self.get(key)? {
            Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
            other => {
                let message = format!(
                    "{}.{key} must be a non-empty string, got {other}",
                    self.name
                );
                self.problem(key, message);
                None
            }
        }
    }

    /// An optional single word (a command line is split on white space); blank is unset.
    pub fn word(&mut self, key: &str) -> Option<String> {
        match self.get(key)? {
            Value::String(s) if s.trim().is_empty() => None,
            Value::String(s) if !s.trim().contains(char::is_whitespace) => {
                Some(s.trim().to_string())
            }
            other => {
                let message = format!(
                    "{}.{key} must be one word (a name without spaces), got {other}",
                    self.name
                );
                self.problem(key, message);
                None
            }
        }
    }

    /// One of `allowed` after `spell` (the kind's own spelling of what was written), else
    /// `default`.
    pub fn one_of(
        &mut self,
        key: &str,
        allowed: &[&str],
        default: &str,
        spell: fn(&str) -> String,
    ) -> String {
        let Some(raw) = self.string(key) else {
            return default.to_string();
        };
        let value = spell(&raw);
        if allowed.contains(&value.as_str()) {
            return value;
        }
        let message = format!(
            "{}.{key} is {raw:?}; allowed values: {}",
            self.name,
            allowed.join(", ")
        );
        self.problem(key, message);
        default.to_string()
    }

    /// `true` or `false`.
    pub fn bool(&mut self, key: &str) -> Option<bool> {
        match self.get(key)? {
            Value::Bool(b) => Some(*b),
            other => {
                let message = format!("{}.{key} must be true or false, got {other}", self.name);
                self.problem(key, message);
                None
            }
        }
    }

    /// A list of strings, as its length (`what` names the items in the problem).
    pub fn string_list_len(&mut self, key: &str, what: &str) -> Option<usize> {
        match self.get(key)? {
            Value::Array(items) if items.iter().all(Value::is_string) => Some(items.len()),
            other => {
                let message = format!("{}.{key} must be a list of {what}, got {other}", self.name);
                self.problem(key, message);
                None
            }
        }
    }

    /// The problems found, in the order the keys were read.
    pub fn finish(self) -> Vec<SettingProblem> {
        self.problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wrong_values_are_one_problem_each_named_by_block_and_key() {
        let block = json!({"a": " x ", "b": "two words", "c": 3, "d": null, "e": "maybe"});
        let block = block.as_object().cloned().unwrap_or_default();
        let mut r = BlockReader::new("k", &block);
        assert_eq!(r.string("a").as_deref(), Some("x"));
        assert_eq!(r.word("b"), None);
        assert_eq!(r.bool("c"), None);
        assert_eq!(r.string("d"), None);
        assert_eq!(r.one_of("e", &["yes", "no"], "no", str::to_string), "no");
        let p = r.finish();
        let fields: Vec<&str> = p.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["k.b", "k.c", "k.e"]);
        assert!(p[2].message.contains("allowed values: yes, no"), "{p:?}");
    }
}
