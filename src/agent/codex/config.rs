//! The `codex:` pass-through block: its keys, their checks, and how they become `thread/start`
//! and `turn/start` parameters.

use crate::agent::block::BlockReader;
use crate::domain::SettingProblem;
use serde_json::{Map, Value, json};
use std::path::Path;

/// The `codex:` block keys the adapter understands.
pub const BLOCK_KEYS: &[&str] = &[
    "model",
    "effort",
    "personality",
    "approval_policy",
    "thread_sandbox",
    "turn_sandbox_policy",
];

/// `approval_policy` values (codex's own spelling).
pub const APPROVAL_POLICIES: &[&str] = &["untrusted", "on-failure", "on-request", "never"];
/// `thread_sandbox` values (codex's own spelling).
pub const SANDBOX_MODES: &[&str] = &["read-only", "workspace-write", "danger-full-access"];
/// `turn_sandbox_policy.type` values.
const POLICY_TYPES: &[&str] = &[
    "readOnly",
    "workspaceWrite",
    "dangerFullAccess",
    "externalSandbox",
];

/// The block, checked and mapped onto codex's spelling.
#[derive(Debug, Clone, PartialEq)]
pub struct CodexConfig {
    pub model: Option<String>,
    pub effort: Option<String>,
    pub personality: Option<String>,
    /// Kebab-case, e.g. `never`.
    pub approval_policy: String,
    /// Kebab-case, e.g. `workspace-write`.
    pub thread_sandbox: String,
    /// The operator's overrides of the per-turn sandbox policy (camelCase keys).
    pub turn_sandbox_policy: Option<Map<String, Value>>,
}

/// `workspaceWrite` → `workspace-write`; kebab-case input stays as it is.
pub fn camel_to_kebab(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    for c in s.trim().chars() {
        if c.is_ascii_uppercase() {
            out.push('-');
            out.push(c.to_ascii_lowercase());
        } else if c == '_' {
            out.push('-');
        } else {
            out.push(c);
        }
    }
    out
}

/// `writable_roots` / `writable-roots` → `writableRoots`.
fn to_camel(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut upper = false;
    for c in s.chars() {
        if c == '_' || c == '-' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn policy_overrides(r: &mut BlockReader) -> Option<Map<String, Value>> {
    let field = "codex.turn_sandbox_policy";
    let raw = match r.get("turn_sandbox_policy")? {
        Value::Object(m) => m,
        other => {
            let message =
                format!("{field} must be a mapping (e.g. networkAccess: true), got {other}");
            r.problem("turn_sandbox_policy", message);
            return None;
        }
    };
    let mut out = Map::new();
    for (k, v) in raw {
        let key = to_camel(k);
        let v = if key == "type" {
            match v.as_str().map(|t| to_camel(&camel_to_kebab(t))) {
                Some(t) if POLICY_TYPES.contains(&t.as_str()) => json!(t),
                _ => {
                    let message = format!(
                        "{field}.type is {v}; allowed values: {}",
                        POLICY_TYPES.join(", ")
                    );
                    r.problem("turn_sandbox_policy", message);
                    continue;
                }
            }
        } else {
            v.clone()
        };
        out.insert(key, v);
    }
    Some(out)
}

impl CodexConfig {
    /// Reads the block; the problems list is empty when every key is usable.
    pub fn parse(block: &Map<String, Value>) -> (CodexConfig, Vec<SettingProblem>) {
        let mut r = BlockReader::new("codex", block);
        let config = CodexConfig {
            model: r.string("model"),
            effort: r.string("effort"),
            personality: r.string("personality"),
            approval_policy: r.one_of(
                "approval_policy",
                APPROVAL_POLICIES,
                "never",
                camel_to_kebab,
            ),
            thread_sandbox: r.one_of(
                "thread_sandbox",
                SANDBOX_MODES,
                "workspace-write",
                camel_to_kebab,
            ),
            turn_sandbox_policy: policy_overrides(&mut r),
        };
        (config, r.finish())
    }

    /// `thread/start` parameters.
    pub fn thread_start_params(&self, cwd: &Path) -> Value {
        let mut p = json!({
            "cwd": cwd.display().to_string(),
            "approvalPolicy": self.approval_policy,
            "sandbox": self.thread_sandbox,
        });
        if let Some(m) = &self.model {
            p["model"] = json!(m);
        }
        if let Some(x) = &self.personality {
            p["personality"] = json!(x);
        }
        p
    }

    /// The per-turn sandbox policy: the thread's mode in its turn-policy shape (the workspace
    /// as the one writable root, no network, for `workspace-write`), with the operator's
    /// overrides on top.
    pub fn sandbox_policy(&self, workspace: &Path) -> Value {
        let mut base = match self.thread_sandbox.as_str() {
            "read-only" => json!({"type": "readOnly"}),
            "danger-full-access" => json!({"type": "dangerFullAccess"}),
            _ => json!({
                "type": "workspaceWrite",
                "writableRoots": [workspace.display().to_string()],
                "networkAccess": false,
            }),
        };
        if let (Some(over), Some(obj)) = (&self.turn_sandbox_policy, base.as_object_mut()) {
            if over.get("type").is_some_and(|t| Some(t) != obj.get("type")) {
                obj.clear();
            }
            for (k, v) in over {
                obj.insert(k.clone(), v.clone());
            }
        }
        base
    }

    /// `turn/start` parameters for one turn. The sandbox policy goes with the first turn, and
    /// with every turn when the operator overrides it.
    pub fn turn_start_params(
        &self,
        thread_id: &str,
        prompt: &str,
        workspace: &Path,
        first_turn: bool,
    ) -> Value {
        let mut p = json!({
            "threadId": thread_id,
            "input": [{"type": "text", "text": prompt}],
            "cwd": workspace.display().to_string(),
        });
        if first_turn || self.turn_sandbox_policy.is_some() {
            p["sandboxPolicy"] = self.sandbox_policy(workspace);
        }
        if let Some(m) = &self.model {
            p["model"] = json!(m);
        }
        if let Some(e) = &self.effort {
            p["effort"] = json!(e);
        }
        p
    }

    /// The answer to a command or file-change approval request. Sortie runs unattended, so
    /// nobody can be asked: a policy that lets the agent escalate on its own judgement
    /// (`never`, `on-request`, `on-failure`) accepts for the session; `untrusted`, which
    /// allows only trusted commands, declines the rest.
    pub fn approval_decision(&self) -> &'static str {
        if self.approval_policy == "untrusted" {
            "decline"
        } else {
            "acceptForSession"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn camel_case_modes_map_to_kebab_case() {
        let (c, p) = CodexConfig::parse(&block(
            json!({"thread_sandbox": "workspaceWrite", "approval_policy": "onRequest"}),
        ));
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(c.thread_sandbox, "workspace-write");
        assert_eq!(c.approval_policy, "on-request");
    }

    #[test]
    fn unknown_values_name_the_allowed_ones() {
        let (_, p) = CodexConfig::parse(&block(
            json!({"approval_policy": "sometimes", "model": 3, "turn_sandbox_policy": "x"}),
        ));
        assert_eq!(p.len(), 3, "{p:?}");
        let allowed = "untrusted, on-failure, on-request, never";
        assert!(p.iter().any(|x| x.message.contains(allowed)), "{p:?}");
    }

    #[test]
    fn the_turn_policy_merges_overrides() {
        let (c, p) = CodexConfig::parse(&block(
            json!({"turn_sandbox_policy": {"network_access": true}}),
        ));
        assert!(p.is_empty());
        let pol = c.sandbox_policy(Path::new("/ws"));
        assert_eq!(
            pol,
            json!({"type": "workspaceWrite", "writableRoots": ["/ws"], "networkAccess": true})
        );
        let t2 = c.turn_start_params("thr", "hi", Path::new("/ws"), false);
        assert!(t2.get("sandboxPolicy").is_some());
        let (plain, _) = CodexConfig::parse(&Map::new());
        let t2 = plain.turn_start_params("thr", "hi", Path::new("/ws"), false);
        assert!(t2.get("sandboxPolicy").is_none());
    }
}
