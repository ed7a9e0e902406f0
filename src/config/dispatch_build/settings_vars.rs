//! `$VAR` and `${VAR}` in a rule's settings block: every string leaf (nested maps and lists
//! included) is expanded from the environment, as `os.ExpandEnv` would, once at load. A value
//! behind a secret-looking variable (`*_TOKEN`, `*_KEY`…) or put into a secret-looking key is
//! registered as a secret (masked wherever it would appear); a model name is not. A variable
//! that is unset draws the advisory `unresolved_extension_var`, naming the field
//! (`dispatch.rules[<i>].<kind>.<key>`) and the variable, never a value; the reference leaves
//! the load valid, and so does this build. `$$` names no variable and is not reported.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::super::dispatch::DispatchConfig;
use super::super::env::expand_env;
use super::super::error::ConfigWarning;

/// The warning's check id.
pub const UNRESOLVED_VAR_CHECK: &str = "unresolved_extension_var";

/// The variables `s` names, in order, each once (`$NAME`, `${NAME}`; `$$` and a lone `$` name
/// none).
fn referenced(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'$' || i + 1 >= b.len() {
            i += 1;
            continue;
        }
        let (name, next) = if b[i + 1] == b'$' {
            ("", i + 2)
        } else if b[i + 1] == b'{' {
            match s[i + 2..].find('}') {
                Some(end) => (&s[i + 2..i + 2 + end], i + 3 + end),
                None => ("", b.len()),
            }
        } else {
            let end = s[i + 1..]
                .find(|c: char| !(c == '_' || c.is_ascii_alphanumeric()))
                .map_or(b.len(), |e| i + 1 + e);
            (&s[i + 1..end], end)
        };
        if !name.is_empty() && !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
        i = next.max(i + 1);
    }
    out
}

struct Walk<'a> {
    env: &'a BTreeMap<String, String>,
    warnings: &'a mut Vec<ConfigWarning>,
    secrets: &'a mut Vec<String>,
}

impl Walk<'_> {
    fn value(&mut self, v: &mut Value, field: &str) {
        match v {
            Value::String(s) if s.contains('$') => {
                let key = field.rsplit(['.', '[']).next().unwrap_or("");
                for name in referenced(s) {
                    if let Some(value) = self.env.get(&name) {
                        // Masked under the rule the environment and `.env` follow: a value
                        // behind a secret-looking variable, or put into a secret-looking key.
                        if !value.is_empty()
                            && (crate::mask::is_secret_entry(&name, value)
                                || crate::mask::is_secret_entry(key, value))
                        {
                            self.secrets.push(value.clone());
                        }
                    } else {
                        self.warnings.push(ConfigWarning::new(
                            UNRESOLVED_VAR_CHECK,
                            field,
                            format!(
                                "references ${name}, which is not set in the environment; it resolves to an empty string"
                            ),
                        ));
                    }
                }
                *s = expand_env(s, self.env).text;
            }
            Value::Array(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    self.value(item, &format!("{field}[{i}]"));
                }
            }
            Value::Object(m) => self.map(m, field),
            _ => {}
        }
    }

    fn map(&mut self, m: &mut Map<String, Value>, field: &str) {
        for (k, v) in m.iter_mut() {
            self.value(v, &format!("{field}.{k}"));
        }
    }
}

/// Expands the settings blocks of `cfg`'s rules in place.
pub(super) fn resolve(
    cfg: &mut DispatchConfig,
    workflow_kind: &str,
    env: &BTreeMap<String, String>,
    warnings: &mut Vec<ConfigWarning>,
    secrets: &mut Vec<String>,
) {
    let kinds: Vec<String> = cfg
        .rules
        .iter()
        .map(|r| cfg.rule_kind(r, workflow_kind).to_string())
        .collect();
    let mut walk = Walk {
        env,
        warnings,
        secrets,
    };
    for (i, (rule, kind)) in cfg.rules.iter_mut().zip(kinds).enumerate() {
        if let Some(block) = rule.settings.as_mut() {
            walk.map(block, &format!("dispatch.rules[{i}].{kind}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_read_as_the_expansion_reads_them() {
        assert_eq!(referenced("$A and ${B_2}/x$C-"), vec!["A", "B_2", "C"]);
        assert_eq!(referenced("cost $$ and $"), Vec::<String>::new());
        assert_eq!(referenced("$A$A"), vec!["A"]);
    }

    #[test]
    fn leaves_expand_secrets_register_and_unset_names_warn() {
        let env: BTreeMap<String, String> = [
            ("MODEL".to_string(), "strong-model".to_string()),
            ("API_KEY".to_string(), "s3cret".to_string()),
        ]
        .into_iter()
        .collect();
        let mut block = serde_json::json!({
            "model": "$MODEL",
            "headers": {"auth": "Bearer ${API_KEY}"},
            "args": ["--x", "$MISSING"],
            "max_turns": 3,
        });
        let (mut warnings, mut secrets) = (Vec::new(), Vec::new());
        let mut w = Walk {
            env: &env,
            warnings: &mut warnings,
            secrets: &mut secrets,
        };
        w.value(&mut block, "dispatch.rules[0].claude-code");
        assert_eq!(
            block,
            serde_json::json!({"model": "strong-model", "headers": {"auth": "Bearer s3cret"},
                               "args": ["--x", ""], "max_turns": 3})
        );
        assert_eq!(secrets, vec!["s3cret"], "a model name is no secret");
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].check, UNRESOLVED_VAR_CHECK);
        assert_eq!(warnings[0].field, "dispatch.rules[0].claude-code.args[1]");
        assert!(
            warnings[0].message.contains("$MISSING"),
            "{}",
            warnings[0].message
        );
    }
}
