//! The `agent-client-protocol:` pass-through block: how permission requests are answered and
//! which advertised auth method, if any, sortie selects.

use crate::domain::SettingProblem;
use serde_json::{Map, Value};

/// The block keys the adapter understands.
pub const BLOCK_KEYS: &[&str] = &["permission_policy", "auth_method"];

/// `permission_policy` values.
pub const PERMISSION_POLICIES: &[&str] = &["allow", "reject"];

/// The block, checked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AcpConfig {
    /// Answer permission requests with a rejecting option instead of an allowing one.
    pub reject_permissions: bool,
    /// An `authMethods[].id` to select with `authenticate` before the first session.
    pub auth_method: Option<String>,
}

impl AcpConfig {
    /// Reads the block; the problems list is empty when every key is usable.
    pub fn parse(block: &Map<String, Value>) -> (AcpConfig, Vec<SettingProblem>) {
        let mut problems = Vec::new();
        let mut config = AcpConfig::default();
        match block.get("permission_policy") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if PERMISSION_POLICIES.contains(&s.trim()) => {
                config.reject_permissions = s.trim() == "reject";
            }
            Some(other) => problems.push(SettingProblem::new(
                "agent-client-protocol.permission_policy",
                format!(
                    "agent-client-protocol.permission_policy is {other}; allowed values: {}",
                    PERMISSION_POLICIES.join(", ")
                ),
            )),
        }
        match block.get("auth_method") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if !s.trim().is_empty() => {
                config.auth_method = Some(s.trim().to_string());
            }
            Some(other) => problems.push(SettingProblem::new(
                "agent-client-protocol.auth_method",
                format!(
                    "agent-client-protocol.auth_method must be one of the agent's auth method ids, got {other}"
                ),
            )),
        }
        (config, problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_checked() {
        let b = |v: Value| v.as_object().cloned().unwrap_or_default();
        let (c, p) = AcpConfig::parse(&b(
            json!({"permission_policy": "reject", "auth_method": "key"}),
        ));
        assert!(p.is_empty());
        assert!(c.reject_permissions);
        assert_eq!(c.auth_method.as_deref(), Some("key"));
        let (_, p) = AcpConfig::parse(&b(json!({"permission_policy": "maybe", "auth_method": 1})));
        assert_eq!(p.len(), 2);
        assert!(p[0].message.contains("allow, reject"));
    }
}
