//! `worker.sandbox`: `none` (the default), `bubblewrap`, or a map with `kind`, `network`,
//! `allow_hosts`, `home_seed`, `read_only`, `read_write` and `hooks`. A value this build cannot honour is a load error: a
//! daemon that silently ran agents unsandboxed, or with a wider network than written, would be
//! worse than one that refuses to start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::coerce::type_name;
use super::env::expand_path;
use super::error::{ConfigError, ConfigWarning};
use crate::sandbox::{HostPattern, Network, Sandbox, SandboxMode};

/// The keys `worker.sandbox` understands.
const KEYS: &[&str] = &[
    "kind",
    "network",
    "allow_hosts",
    "home_seed",
    "read_only",
    "read_write",
    "hooks",
];

/// What `worker.sandbox` builds from, besides its value.
pub(crate) struct SandboxInputs<'a> {
    pub home: Option<&'a Path>,
    pub env: &'a BTreeMap<String, String>,
    pub workflow_dir: &'a Path,
}

pub(crate) fn build_sandbox(
    v: Option<&Value>,
    ctx: &SandboxInputs<'_>,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<Sandbox, ConfigError> {
    let m = match v {
        None | Some(Value::Null) => return Ok(Sandbox::default()),
        Some(Value::String(s)) => {
            return Ok(Sandbox {
                mode: mode(s)?,
                daemon_home: ctx.home.map(Path::to_path_buf),
                ..Sandbox::default()
            });
        }
        Some(Value::Object(m)) => m,
        Some(v) => {
            return Err(ConfigError::field(
                "worker.sandbox",
                format!("expected none, bubblewrap or a map, got {}", type_name(v)),
            ));
        }
    };
    for k in m.keys().filter(|k| !KEYS.contains(&k.as_str())) {
        warnings.push(ConfigWarning::new(
            "unknown_key",
            format!("worker.sandbox.{k}"),
            format!("unknown key; worker.sandbox reads {}", KEYS.join(", ")),
        ));
    }
    let kind = match m.get("kind") {
        None | Some(Value::Null) => SandboxMode::Bubblewrap,
        Some(Value::String(s)) => mode(s)?,
        Some(v) => return Err(expected("worker.sandbox.kind", "a string", v)),
    };
    let network = network(m.get("network"))?;
    let allow_hosts = allow_hosts(m.get("allow_hosts"))?;
    if !allow_hosts.is_empty() && network != Network::Allowlist {
        warnings.push(ConfigWarning::new(
            "sandbox_allow_hosts_unused",
            "worker.sandbox.allow_hosts",
            format!(
                "read only with network: allowlist (network is {}); ignored",
                network.as_str()
            ),
        ));
    }
    if kind == SandboxMode::None && m.get("hooks") == Some(&Value::Bool(true)) {
        warnings.push(ConfigWarning::new(
            "sandbox_hooks_unused",
            "worker.sandbox.hooks",
            "read only with kind: bubblewrap (kind is none); hooks run outside any sandbox",
        ));
    }
    Ok(Sandbox {
        mode: kind,
        network,
        allow_hosts,
        home_seed: paths(m.get("home_seed"), "worker.sandbox.home_seed", ctx)?,
        read_only: paths(m.get("read_only"), "worker.sandbox.read_only", ctx)?,
        read_write: read_write(m.get("read_write"), ctx)?,
        hooks: match m.get("hooks") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(v) => return Err(expected("worker.sandbox.hooks", "true or false", v)),
        },
        daemon_home: ctx.home.map(Path::to_path_buf),
        hide: Vec::new(),
    })
}

fn expected(field: &str, what: &str, v: &Value) -> ConfigError {
    ConfigError::field(field, format!("expected {what}, got {}", type_name(v)))
}

fn mode(s: &str) -> Result<SandboxMode, ConfigError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "" | "none" => Ok(SandboxMode::None),
        "bubblewrap" | "bwrap" => Ok(SandboxMode::Bubblewrap),
        other => Err(ConfigError::field(
            "worker.sandbox",
            format!("invalid sandbox {other:?} (expected none or bubblewrap)"),
        )),
    }
}

fn network(v: Option<&Value>) -> Result<Network, ConfigError> {
    const FIELD: &str = "worker.sandbox.network";
    let s = match v {
        None | Some(Value::Null) => return Ok(Network::Host),
        Some(Value::String(s)) => s.trim().to_ascii_lowercase(),
        Some(v) => return Err(expected(FIELD, "none, allowlist or host", v)),
    };
    match s.as_str() {
        "" | "host" => Ok(Network::Host),
        "none" => Ok(Network::None),
        "allowlist" => Ok(Network::Allowlist),
        other => Err(ConfigError::field(
            FIELD,
            format!("invalid network {other:?} (expected none, allowlist or host)"),
        )),
    }
}

/// `allow_hosts`: host patterns (`crate::sandbox::HostPattern` states the matching rule).
fn allow_hosts(v: Option<&Value>) -> Result<Vec<HostPattern>, ConfigError> {
    const FIELD: &str = "worker.sandbox.allow_hosts";
    let items = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(v) => return Err(expected(FIELD, "a list of host patterns", v)),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let f = format!("{FIELD}[{i}]");
            let s = v.as_str().ok_or_else(|| expected(&f, "a string", v))?;
            HostPattern::parse(s).map_err(|e| ConfigError::field(&f, e.to_string()))
        })
        .collect()
}

/// Adds the hosts every allowlisted session needs besides the workflow's own entries: the
/// tracker's endpoint and a separate source-control provider's endpoint, when the workflow
/// writes them (an adapter's built-in default endpoint is not known here; list it in
/// `allow_hosts` when the agent itself must reach it), and the model API hosts of each agent
/// kind sessions may run (`AgentDescriptor::egress_hosts`).
pub(crate) fn add_default_hosts(sb: &mut Sandbox, endpoints: &[Option<&str>], kinds: &[&str]) {
    if sb.network != Network::Allowlist {
        return;
    }
    let from_urls = endpoints.iter().flatten().filter_map(|u| url_host(u));
    let from_kinds = kinds
        .iter()
        .filter_map(|k| crate::registry::agent(k))
        .flat_map(|d| d.egress_hosts.iter().map(|h| h.to_string()));
    for host in from_urls.chain(from_kinds) {
        if let Ok(p) = HostPattern::parse(&host)
            && !sb.allow_hosts.contains(&p)
        {
            sb.allow_hosts.push(p);
        }
    }
}

/// The agent kinds a session may run: `agent.kind` and those `dispatch` selects.
pub(crate) fn agent_kinds<'a>(
    agent_kind: &'a str,
    dispatch: &'a super::dispatch::DispatchConfig,
) -> Vec<&'a str> {
    let mut out = vec![agent_kind];
    let selected = dispatch
        .rules
        .iter()
        .map(|r| &r.selection)
        .chain(std::iter::once(&dispatch.default))
        .filter_map(|s| s.agent.as_deref());
    for k in selected {
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// `host[:port]` of an `http(s)://` URL.
fn url_host(url: &str) -> Option<String> {
    let rest = url.trim().split_once("://")?.1;
    let auth = rest.split(['/', '?', '#']).next()?;
    let auth = auth.rsplit_once('@').map_or(auth, |(_, h)| h);
    (!auth.is_empty()).then(|| auth.to_string())
}

/// A list of paths: `~` and `$VAR` expanded, relative ones against the workflow's directory.
fn paths(
    v: Option<&Value>,
    field: &str,
    ctx: &SandboxInputs<'_>,
) -> Result<Vec<PathBuf>, ConfigError> {
    let items = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(v) => return Err(expected(field, "a list of paths", v)),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let f = format!("{field}[{i}]");
            let s = v
                .as_str()
                .filter(|s| !s.trim().is_empty())
                .ok_or_else(|| expected(&f, "a non-empty string", v))?;
            let p = expand_path(s.trim(), ctx.home, true, ctx.env)
                .map_err(|e| ConfigError::field(&f, e))?;
            Ok(ctx.workflow_dir.join(p))
        })
        .collect()
}

/// `read_write`: like [`paths`], but each must be absolute as written (after `~`/`$VAR`
/// expansion) and exist now: a read-write grant is spelled out, never guessed from the
/// workflow's directory, and a path `bwrap` cannot bind would fail every session later.
fn read_write(v: Option<&Value>, ctx: &SandboxInputs<'_>) -> Result<Vec<PathBuf>, ConfigError> {
    const FIELD: &str = "worker.sandbox.read_write";
    let items = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(v) => return Err(expected(FIELD, "a list of absolute paths", v)),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let f = format!("{FIELD}[{i}]");
            let s = v
                .as_str()
                .filter(|s| !s.trim().is_empty())
                .ok_or_else(|| expected(&f, "a non-empty string", v))?;
            let p = PathBuf::from(
                expand_path(s.trim(), ctx.home, true, ctx.env)
                    .map_err(|e| ConfigError::field(&f, e))?,
            );
            if !p.is_absolute() {
                return Err(ConfigError::field(
                    &f,
                    format!("{s:?} is not an absolute path"),
                ));
            }
            std::fs::canonicalize(&p)
                .map_err(|e| ConfigError::field(&f, format!("{}: {e}", p.display())))
        })
        .collect()
}

/// Fills in the paths the sandbox hides ([`hidden_paths`]), refuses a `read_only` entry inside
/// the workspace root (another issue's workspace; what it hides elsewhere is masked), and
/// refuses a `read_write` entry
/// that would hand one back: the database, its companion files, the workflow's `.env`, the
/// workspace root and the daemon's home, or a directory holding any of them (a writable parent
/// lets the agent create the database's `-wal` file or replace what is masked), or a path
/// inside the workspace root (another issue's workspace).
pub(crate) fn seal(
    sb: &mut Sandbox,
    db_path: &Path,
    workflow_dir: &Path,
    workspace_root: &Path,
    home: Option<&Path>,
) -> Result<(), ConfigError> {
    sb.hide = hidden_paths(db_path, workflow_dir, workspace_root, home);
    let root = resolved(workspace_root);
    for (i, ro) in sb.read_only.iter().enumerate() {
        if resolved(ro).starts_with(&root) {
            return Err(ConfigError::field(
                format!("worker.sandbox.read_only[{i}]"),
                format!(
                    "{} is inside the workspace root {}; each session sees only its own workspace",
                    ro.display(),
                    root.display()
                ),
            ));
        }
    }
    for (i, rw) in sb.read_write.iter().enumerate() {
        let field = format!("worker.sandbox.read_write[{i}]");
        if let Some(h) = sb.hide.iter().find(|h| resolved(h).starts_with(rw)) {
            return Err(ConfigError::field(
                &field,
                format!(
                    "{} holds {}, which the sandbox keeps from agents",
                    rw.display(),
                    h.display()
                ),
            ));
        }
        if rw.starts_with(&root) {
            return Err(ConfigError::field(
                &field,
                format!(
                    "{} is inside the workspace root {}; each session sees only its own workspace",
                    rw.display(),
                    root.display()
                ),
            ));
        }
    }
    Ok(())
}

/// `p` with symlinks resolved as far as it exists (the rest appended as written).
fn resolved(p: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut cur = p.to_path_buf();
    loop {
        if let Ok(real) = std::fs::canonicalize(&cur) {
            return missing
                .iter()
                .rev()
                .fold(real, |acc: PathBuf, c| acc.join(c));
        }
        match (cur.file_name().map(|n| n.to_os_string()), cur.parent()) {
            (Some(name), Some(parent)) => {
                missing.push(name);
                cur = parent.to_path_buf();
            }
            _ => return p.to_path_buf(),
        }
    }
}

/// The paths the daemon keeps from agents: the database and its companion files, the
/// workflow's `.env`, the workspace root and the daemon's home.
fn hidden_paths(
    db_path: &Path,
    workflow_dir: &Path,
    workspace_root: &Path,
    home: Option<&Path>,
) -> Vec<PathBuf> {
    let mut out = vec![db_path.to_path_buf()];
    for suffix in ["-wal", "-shm", "-journal", ".lock"] {
        let mut s = db_path.as_os_str().to_os_string();
        s.push(suffix);
        out.push(PathBuf::from(s));
    }
    out.push(workflow_dir.join(".env"));
    out.push(workspace_root.to_path_buf());
    out.extend(home.map(Path::to_path_buf));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn build(v: Value) -> Result<Sandbox, ConfigError> {
        let env = BTreeMap::new();
        let ctx = SandboxInputs {
            home: Some(Path::new("/home/op")),
            env: &env,
            workflow_dir: Path::new("/srv/wf"),
        };
        build_sandbox(Some(&v), &ctx, &mut Vec::new())
    }

    #[test]
    fn forms_and_defaults() {
        assert_eq!(build(json!("none")).map(|s| s.enabled()), Ok(false));
        let sb = build(json!("bubblewrap")).unwrap_or_default();
        assert!(sb.enabled());
        assert_eq!(sb.network, Network::Host);
        let sb = build(json!({"network": "none", "home_seed": ["~/.cfg", "rel"], "hooks": true}))
            .unwrap_or_default();
        assert!(sb.enabled() && sb.hooks);
        assert_eq!(sb.network, Network::None);
        assert_eq!(
            sb.home_seed,
            vec![PathBuf::from("/home/op/.cfg"), PathBuf::from("/srv/wf/rel")]
        );
    }

    #[test]
    fn allowlist_reads_its_hosts_and_adds_the_endpoints() {
        let mut sb = build(
            json!({"network": "allowlist", "allow_hosts": ["*.example.com", "127.0.0.1:8080"]}),
        )
        .unwrap_or_default();
        assert_eq!(sb.network, Network::Allowlist);
        assert_eq!(sb.allow_hosts.len(), 2);
        add_default_hosts(
            &mut sb,
            &[
                Some("https://tracker.example.org/api"),
                None,
                Some("https://u@git.example.net:8443"),
            ],
            &["mock"],
        );
        let names: Vec<String> = sb.allow_hosts.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            names,
            [
                "*.example.com",
                "127.0.0.1:8080",
                "tracker.example.org",
                "git.example.net:8443"
            ]
        );
        let mut host = build(json!({"network": "host"})).unwrap_or_default();
        add_default_hosts(&mut host, &[Some("https://tracker.example.org")], &["mock"]);
        assert!(host.allow_hosts.is_empty());
    }

    #[test]
    fn every_agent_kinds_default_hosts_are_patterns_and_are_added() {
        for d in crate::registry::AGENTS {
            let mut sb = build(json!({"network": "allowlist"})).unwrap_or_default();
            add_default_hosts(&mut sb, &[], &[d.kind]);
            let names: Vec<String> = sb.allow_hosts.iter().map(|p| p.to_string()).collect();
            assert_eq!(names.len(), d.egress_hosts.len(), "{}: {names:?}", d.kind);
            for h in d.egress_hosts {
                assert!(HostPattern::parse(h).is_ok(), "{}: {h}", d.kind);
            }
        }
        let mut sb = build(json!({"network": "allowlist"})).unwrap_or_default();
        let all: Vec<&str> = crate::registry::AGENTS.iter().map(|d| d.kind).collect();
        add_default_hosts(&mut sb, &[], &all);
        assert!(!sb.allow_hosts.is_empty());
    }

    #[test]
    fn read_write_must_be_absolute_existing_and_keep_clear_of_hidden_paths() {
        let base = std::env::temp_dir().join(format!("sortie-cfg-rw-{}", std::process::id()));
        let ws_root = base.join("ws");
        let shared = base.join("shared");
        let _ = std::fs::create_dir_all(ws_root.join("A-1"));
        let _ = std::fs::create_dir_all(&shared);
        let rw = |paths: Vec<&Path>| {
            let list: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            let mut sb = build(json!({"read_write": list}))?;
            seal(&mut sb, &base.join("db.sqlite"), &base, &ws_root, None).map(|()| sb)
        };
        let ok = rw(vec![&shared]).unwrap_or_default();
        assert_eq!(ok.read_write.len(), 1);
        assert!(ok.hide.contains(&base.join(".env")));
        // The database's directory, the workspace root and a workspace inside it are refused.
        assert!(rw(vec![&base]).is_err());
        assert!(rw(vec![&ws_root]).is_err());
        assert!(rw(vec![&ws_root.join("A-1")]).is_err());
        assert!(rw(vec![Path::new("/")]).is_err());
        assert!(rw(vec![&base.join("missing")]).is_err());
        let ro = |path: &Path| {
            let mut sb = build(json!({"read_only": [path.display().to_string()]}))?;
            seal(&mut sb, &base.join("db.sqlite"), &base, &ws_root, None)
        };
        assert!(ro(&ws_root.join("A-1")).is_err());
        assert!(ro(&base).is_ok());
        assert!(build(json!({"read_write": ["relative/dir"]})).is_err());
        assert!(build(json!({"read_write": "/tmp"})).is_err());
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn hooks_without_a_sandbox_are_named() {
        let env = BTreeMap::new();
        let ctx = SandboxInputs {
            home: None,
            env: &env,
            workflow_dir: Path::new("/srv/wf"),
        };
        let mut warnings = Vec::new();
        let v = json!({"kind": "none", "hooks": true});
        assert!(build_sandbox(Some(&v), &ctx, &mut warnings).is_ok());
        assert_eq!(warnings.len(), 1);
        let mut warnings = Vec::new();
        let v = json!({"kind": "bubblewrap", "hooks": true});
        assert!(build_sandbox(Some(&v), &ctx, &mut warnings).is_ok());
        assert!(warnings.is_empty());
    }

    #[test]
    fn what_cannot_be_honoured_is_refused() {
        assert!(build(json!("docker")).is_err());
        assert!(build(json!({"network": "allowlist", "allow_hosts": ["http://x.org"]})).is_err());
        assert!(build(json!({"network": "allowlist", "allow_hosts": "x.org"})).is_err());
        assert!(build(json!({"network": "wide"})).is_err());
        assert!(build(json!({"hooks": "yes"})).is_err());
        assert!(build(json!({"home_seed": "~/.cfg"})).is_err());
        assert!(build(json!(3)).is_err());
    }
}
