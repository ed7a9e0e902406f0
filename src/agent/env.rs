//! The environment of an agent's processes (see `crate::child_env` for the rule): the system
//! basics, the variables the kind's descriptor lists ([`super::AgentDescriptor::env_vars`]),
//! what `agent.env` names or sets, and the session's own variables. Built once per session and
//! used for every process of it (each turn's CLI, a JSON-RPC server, a kind's preflight).
//!
//! On an SSH host the agent runs in the host's own login environment: sortie forwards only
//! what `agent.env` names or sets and the session's variables (and a kind's managed
//! variables), on the remote command line, never its local basics or the kind's credentials.

use std::ffi::OsString;

use super::{AgentSettings, StartSessionParams};

/// The session's variables every agent process gets.
pub fn session_vars(params: &StartSessionParams) -> Vec<(String, String)> {
    let mut vars = vec![
        ("SORTIE_ISSUE_ID".to_string(), params.issue_id.clone()),
        (
            "SORTIE_ISSUE_IDENTIFIER".to_string(),
            params.issue_identifier.clone(),
        ),
        (
            "SORTIE_WORKSPACE".to_string(),
            params.workspace.to_string_lossy().into_owned(),
        ),
    ];
    if let Some(a) = params.attempt {
        vars.push(("SORTIE_ATTEMPT".to_string(), a.to_string()));
    }
    vars
}

/// The environment an agent process of this session starts from: for a local session the
/// whole of it, for one on an SSH host what is forwarded to the remote command line.
pub fn session_env(
    settings: &AgentSettings,
    kind_vars: &[&str],
    params: &StartSessionParams,
) -> Vec<(OsString, OsString)> {
    let session = session_vars(params);
    if params.remote.is_some() {
        return forwarded(settings, std::env::vars_os(), &session);
    }
    settings
        .env
        .agent_env(std::env::vars_os(), kind_vars, &session)
}

/// What goes to a remote agent: the variables `agent.env` names (from sortie's environment,
/// sortie's own never), its `NAME: value` entries, then the session's.
fn forwarded(
    settings: &AgentSettings,
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    session: &[(String, String)],
) -> Vec<(OsString, OsString)> {
    let policy = crate::child_env::EnvPolicy {
        inherit_all: false,
        pass: settings.env.pass.clone(),
        set: settings.env.set.clone(),
        withheld: settings.env.withheld.clone(),
    };
    policy
        .agent_env(parent, &[], session)
        .into_iter()
        .filter(|(k, _)| {
            let k = k.to_string_lossy();
            !crate::child_env::is_basic(&k) || policy.pass.iter().any(|p| p == k.as_ref())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_session_forwards_only_what_agent_env_names_and_the_session() {
        let settings = AgentSettings {
            env: crate::child_env::EnvPolicy {
                pass: vec!["OTEL_*".into()],
                set: vec![("FOO".into(), "bar".into())],
                ..Default::default()
            },
            ..Default::default()
        };
        let parent = [
            ("PATH", "/bin"),
            ("ANTHROPIC_API_KEY", "k"),
            ("OTEL_X", "1"),
            ("SORTIE_TRACKER_API_KEY", "t"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let got = forwarded(&settings, parent, &[("SORTIE_ISSUE_ID".into(), "7".into())]);
        let names: Vec<_> = got.iter().map(|(k, _)| k.to_string_lossy()).collect();
        assert_eq!(names, ["OTEL_X", "FOO", "SORTIE_ISSUE_ID"]);
    }
}
