//! Bounds a free-form label (tool names, verification commands): values are cut to a fixed
//! length and only the first few distinct ones get their own series; later ones share
//! `other`. This keeps cardinality bounded whatever an agent reports.

use std::collections::HashSet;
use std::sync::Mutex;

use super::catalogue::{FREE_LABEL_CAP, FREE_LABEL_CHARS, OTHER};

#[derive(Debug, Default)]
pub struct FreeLabel {
    seen: Mutex<HashSet<String>>,
}

impl FreeLabel {
    /// The label value to record `raw` under.
    pub fn admit(&self, raw: &str) -> String {
        let value: String = raw.trim().chars().take(FREE_LABEL_CHARS).collect();
        if value.is_empty() {
            return "unknown".to_string();
        }
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.contains(&value) {
            return value;
        }
        if seen.len() >= FREE_LABEL_CAP {
            return OTHER.to_string();
        }
        seen.insert(value.clone());
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_distinct_values_and_length() {
        let l = FreeLabel::default();
        let long = "x".repeat(200);
        assert_eq!(l.admit(&long).chars().count(), FREE_LABEL_CHARS);
        for i in 0..FREE_LABEL_CAP * 2 {
            l.admit(&format!("tool{i}"));
        }
        assert_eq!(l.admit("tool0"), "tool0");
        assert_eq!(l.admit("brand-new"), OTHER);
        assert_eq!(l.admit("  "), "unknown");
    }
}
