//! What a child process inherits from sortie's environment: an allowlist, never the whole
//! environment by default.
//!
//! Every child starts from the [`SYSTEM_BASICS`] (what any program needs to find its tools,
//! its home, its locale, the network and its certificates). An agent adds the variables its
//! kind needs (each adapter's descriptor lists them), the operator's `agent.env`
//! ([`EnvPolicy`]) and the session's `SORTIE_*` context; a hook adds the variables its own
//! script names. Sortie's own variables (`SORTIE_*`, among them the tracker key and the
//! webhook secrets) never pass by name, and a variable holding the tracker token or a webhook
//! secret never passes unless the operator names it exactly. `agent.inherit_env: true` gives
//! an agent the whole environment back.
//!
//! Patterns: a name, or a prefix ending in `*` (`LC_*`).

use std::ffi::{OsStr, OsString};

/// The variables every child process gets when sortie has them.
pub const SYSTEM_BASICS: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "COLORTERM",
    "TZ",
    "TMPDIR",
    "XDG_*",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "SSH_AUTH_SOCK",
];

/// The prefix of sortie's own variables (settings overrides, the tracker key, webhook
/// secrets, the `.env` path); an agent gets only the session variables sortie sets itself.
pub const SORTIE_PREFIX: &str = "SORTIE_";

/// Whether `name` matches `pattern` (a name, or a prefix ending in `*`).
pub fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// Whether `pattern` is a variable name, or a non-empty name prefix followed by `*`.
pub fn valid_pattern(pattern: &str) -> bool {
    let name = pattern.strip_suffix('*').unwrap_or(pattern);
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Whether `name` is one of the [`SYSTEM_BASICS`].
pub fn is_basic(name: &str) -> bool {
    SYSTEM_BASICS.iter().any(|p| matches(p, name))
}

/// The [`SYSTEM_BASICS`] of `parent`.
pub fn basics<I, K, V>(parent: I) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<OsStr>,
    V: AsRef<OsStr>,
{
    parent
        .into_iter()
        .filter(|(k, _)| k.as_ref().to_str().is_some_and(is_basic))
        .map(|(k, v)| (k.as_ref().to_os_string(), v.as_ref().to_os_string()))
        .collect()
}

/// The operator's part of an agent's environment (`agent.env`, `agent.inherit_env`) and the
/// values that must never reach an agent unasked.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct EnvPolicy {
    /// `agent.inherit_env`: the whole environment, as Sortie passes it.
    pub inherit_all: bool,
    /// Names and prefix patterns of `agent.env` taken from sortie's environment.
    pub pass: Vec<String>,
    /// `NAME: value` entries of `agent.env`, `$VAR` already expanded.
    pub set: Vec<(String, String)>,
    /// Sortie's own secrets by value (the tracker token, the webhook secrets): a variable
    /// holding one passes only when `pass` names it exactly.
    pub withheld: Vec<String>,
}

impl std::fmt::Debug for EnvPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvPolicy")
            .field("inherit_all", &self.inherit_all)
            .field("pass", &self.pass)
            .field(
                "set",
                &self.set.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            )
            .field("withheld", &self.withheld.len())
            .finish()
    }
}

/// Why a variable of sortie's environment does or does not reach an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A system basic, a variable of the kind, or one `agent.env` names.
    Passed,
    /// `agent.inherit_env` passes everything.
    Inherited,
    /// Not on any list.
    NotListed,
    /// One of sortie's own `SORTIE_*` variables.
    SortieOwn,
    /// It holds the tracker token or a webhook secret, and `agent.env` does not name it.
    HoldsSortieSecret,
}

impl EnvPolicy {
    /// The verdict on one variable of sortie's environment for an agent of a kind that needs
    /// `kind_vars`.
    pub fn verdict(&self, kind_vars: &[&str], name: &str, value: &str) -> Verdict {
        if self.inherit_all {
            return Verdict::Inherited;
        }
        if name.starts_with(SORTIE_PREFIX) {
            return Verdict::SortieOwn;
        }
        let named_exactly = self.pass.iter().any(|p| p == name);
        let listed = is_basic(name)
            || kind_vars.iter().any(|p| matches(p, name))
            || self.pass.iter().any(|p| matches(p, name));
        if !listed {
            return Verdict::NotListed;
        }
        if !named_exactly && !value.is_empty() && self.withheld.iter().any(|w| w == value) {
            return Verdict::HoldsSortieSecret;
        }
        Verdict::Passed
    }

    /// An agent's environment from sortie's (`parent`): what passes ([`EnvPolicy::verdict`]),
    /// then the `agent.env` values, then `session` (the session's own variables), later
    /// entries replacing earlier ones. Variables that are not UTF-8 pass only when inherited.
    pub fn agent_env<I, K, V>(
        &self,
        parent: I,
        kind_vars: &[&str],
        session: &[(String, String)],
    ) -> Vec<(OsString, OsString)>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        let mut env: Vec<(OsString, OsString)> = parent
            .into_iter()
            .filter(|(k, v)| {
                if self.inherit_all {
                    return true;
                }
                match (k.as_ref().to_str(), v.as_ref().to_str()) {
                    (Some(k), Some(v)) => self.verdict(kind_vars, k, v) == Verdict::Passed,
                    _ => false,
                }
            })
            .map(|(k, v)| (k.as_ref().to_os_string(), v.as_ref().to_os_string()))
            .collect();
        for (k, v) in self.set.iter().chain(session) {
            env.retain(|(ek, _)| ek.as_os_str() != k.as_str());
            env.push((OsString::from(k), OsString::from(v)));
        }
        env
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn names(v: &[(OsString, OsString)]) -> Vec<String> {
        let mut n: Vec<String> = v
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    }

    #[test]
    fn patterns_match_names_and_prefixes() {
        assert!(matches("LC_*", "LC_ALL"));
        assert!(matches("PATH", "PATH"));
        assert!(!matches("PATH", "PATHX"));
        assert!(valid_pattern("OTEL_*") && valid_pattern("_X") && valid_pattern("A1"));
        assert!(!valid_pattern("*") && !valid_pattern("1A") && !valid_pattern("A-B"));
        assert!(!valid_pattern("") && !valid_pattern("A*B"));
    }

    #[test]
    fn an_agent_gets_the_basics_its_kind_and_the_listed_and_never_sortie_secrets() {
        let parent = env(&[
            ("PATH", "/bin"),
            ("HOME", "/home/s"),
            ("LC_ALL", "C"),
            ("ANTHROPIC_API_KEY", "ak"),
            ("SORTIE_TRACKER_API_KEY", "tk"),
            ("SORTIE_WEBHOOK_SECRET_GITHUB", "wh"),
            ("LINEAR_API_KEY", "tk"),
            ("DB_PASSWORD", "pw"),
            ("OTEL_ENDPOINT", "x"),
            ("GITHUB_TOKEN", "tk"),
        ]);
        let policy = EnvPolicy {
            pass: vec!["OTEL_*".into()],
            set: vec![("FOO".into(), "bar".into())],
            withheld: vec!["tk".into(), "wh".into()],
            ..Default::default()
        };
        let kind = ["ANTHROPIC_*", "GITHUB_TOKEN"];
        let session = env(&[("SORTIE_ISSUE_ID", "1")]);
        let got = policy.agent_env(parent.clone(), &kind, &session);
        assert_eq!(
            names(&got),
            [
                "ANTHROPIC_API_KEY",
                "FOO",
                "HOME",
                "LC_ALL",
                "OTEL_ENDPOINT",
                "PATH",
                "SORTIE_ISSUE_ID"
            ]
        );
        assert_eq!(
            policy.verdict(&kind, "GITHUB_TOKEN", "tk"),
            Verdict::HoldsSortieSecret
        );
        // Named exactly, the operator's choice wins over the withheld value.
        let named = EnvPolicy {
            pass: vec!["GITHUB_TOKEN".into()],
            ..policy.clone()
        };
        assert_eq!(named.verdict(&kind, "GITHUB_TOKEN", "tk"), Verdict::Passed);
        // Sortie's own never pass by name, listed or not.
        let listed = EnvPolicy {
            pass: vec!["SORTIE_*".into()],
            ..policy.clone()
        };
        assert_eq!(
            listed.verdict(&kind, "SORTIE_TRACKER_API_KEY", "tk"),
            Verdict::SortieOwn
        );
        let all = EnvPolicy {
            inherit_all: true,
            ..policy
        };
        // Everything, plus the `agent.env` value.
        assert_eq!(
            all.agent_env(parent.clone(), &kind, &[]).len(),
            parent.len() + 1
        );
    }

    #[test]
    fn the_policy_debug_shows_no_values() {
        let p = EnvPolicy {
            set: vec![("K".into(), "secret-value".into())],
            withheld: vec!["tok".into()],
            ..Default::default()
        };
        let text = format!("{p:?}");
        assert!(
            !text.contains("secret-value") && !text.contains("tok\""),
            "{text}"
        );
    }
}
