//! An issue's state, read from its labels, for the trackers whose issues are only open or
//! closed (GitHub, GitLab, Gitea): workflow states are labels, with open/closed as the
//! fallback.

/// The configured state words, lowercased.
#[derive(Debug, Clone)]
pub struct StateWords {
    pub active: Vec<String>,
    pub terminal: Vec<String>,
    pub handoff: Option<String>,
}

/// Lowercased non-blank states, or the defaults when none are configured.
pub fn configured_states(configured: &[String], default: &[&str]) -> Vec<String> {
    let list: Vec<String> = configured
        .iter()
        .map(|s| s.trim().to_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    if list.is_empty() {
        default.iter().map(|s| s.to_string()).collect()
    } else {
        list
    }
}

impl StateWords {
    /// The configured words (`tracker.active_states`, `terminal_states`, `handoff_state`),
    /// lowercased, with the kind's defaults for an empty list.
    pub fn configured(
        s: &crate::tracker::TrackerSettings,
        default_active: &[&str],
        default_terminal: &[&str],
    ) -> StateWords {
        StateWords {
            active: configured_states(&s.active_states, default_active),
            terminal: configured_states(&s.terminal_states, default_terminal),
            handoff: s
                .handoff_state
                .as_deref()
                .map(|h| h.trim().to_lowercase())
                .filter(|h| !h.is_empty()),
        }
    }

    /// Settings of these words that work but are probably not what was meant: a blank list
    /// item, a state both active and terminal, a handoff state that is also either, an
    /// in-progress state that is terminal or the handoff state.
    pub fn warnings(&self, s: &crate::tracker::TrackerSettings) -> Vec<String> {
        let mut out = Vec::new();
        let raw = s.active_states.iter().chain(&s.terminal_states);
        if raw.clone().any(|v| v.trim().is_empty()) {
            out.push("tracker state lists contain a blank item".to_string());
        }
        for a in self.active.iter().filter(|a| self.terminal.contains(a)) {
            out.push(format!("state {a:?} is both active and terminal"));
        }
        if let Some(h) = &self.handoff
            && (self.active.contains(h) || self.terminal.contains(h))
        {
            out.push(format!(
                "handoff_state {h:?} is also an active or terminal state"
            ));
        }
        if let Some(p) = s.in_progress_state.as_deref().map(str::to_lowercase)
            && (self.terminal.contains(&p) || self.handoff.as_ref() == Some(&p))
        {
            out.push(format!(
                "in_progress_state {p:?} is terminal or equals handoff_state"
            ));
        }
        out
    }

    /// First active label present (config order), else first terminal label, else the
    /// handoff label, else open (GitLab: `opened`) ⇒ first active state, closed ⇒ first
    /// terminal state, else the native word.
    pub fn state_of(&self, labels: &[String], native: &str) -> String {
        let has = |s: &String| labels.iter().any(|l| l == s);
        if let Some(s) = self.active.iter().find(|s| has(s)) {
            return s.clone();
        }
        if let Some(s) = self.terminal.iter().find(|s| has(s)) {
            return s.clone();
        }
        if let Some(h) = self.handoff.as_ref().filter(|h| has(h)) {
            return h.clone();
        }
        let fallback = match native {
            "open" | "opened" => self.active.first(),
            "closed" => self.terminal.first(),
            _ => None,
        };
        fallback.cloned().unwrap_or_else(|| native.to_string())
    }

    /// Every label that names a state.
    pub fn is_state_label(&self, label: &str) -> bool {
        self.active
            .iter()
            .chain(&self.terminal)
            .chain(&self.handoff)
            .any(|s| s == label)
    }

    pub fn is_terminal(&self, state: &str) -> bool {
        self.terminal.iter().any(|s| s == state)
    }

    pub fn is_active(&self, state: &str) -> bool {
        self.active.iter().any(|s| s == state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words() -> StateWords {
        StateWords {
            active: vec!["backlog".into(), "in-progress".into()],
            terminal: vec!["done".into(), "wontfix".into()],
            handoff: Some("review".into()),
        }
    }

    fn l(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn precedence_then_open_closed_fallback() {
        let w = words();
        assert_eq!(
            w.state_of(&l(&["in-progress", "backlog"]), "open"),
            "backlog"
        );
        assert_eq!(
            w.state_of(&l(&["done", "in-progress"]), "closed"),
            "in-progress"
        );
        assert_eq!(w.state_of(&l(&["wontfix", "review"]), "open"), "wontfix");
        assert_eq!(w.state_of(&l(&["review", "bug"]), "open"), "review");
        assert_eq!(w.state_of(&l(&["bug"]), "open"), "backlog");
        assert_eq!(w.state_of(&l(&["bug"]), "opened"), "backlog");
        assert_eq!(w.state_of(&l(&[]), "locked"), "locked");
        assert_eq!(w.state_of(&l(&[]), "closed"), "done");
        let empty = StateWords {
            active: vec![],
            terminal: vec![],
            handoff: None,
        };
        assert_eq!(empty.state_of(&l(&[]), "open"), "open");
    }
}
