//! `<workspace>/.sortie/mcp.json`: the MCP configuration a session's agent starts sortie's own
//! tool server (`sortie mcp-server`) from, with the operator's `<kind>.mcp_config` merged in.
//!
//! The file names the absolute sortie binary (symlinks resolved), the workflow, and the
//! environment the server uses, nothing more ([`SidecarNeeds`]): the session's own variables
//! (`SORTIE_ISSUE_ID`, `SORTIE_WORKSPACE`, `SORTIE_DB_PATH`, `SORTIE_API_URL`,
//! `SORTIE_ENV_FILE`, …, which win), the daemon's `SORTIE_*` settings overrides, and only when
//! its `tracker_api` tool can work (a `tracker.project` is set) the variables the workflow's
//! tracker settings are read from, the tracker key among them unless the `.env` file the
//! server loads holds it. Never a webhook secret. It may carry a credential, so it is written
//! like every other `.sortie/` file (atomic, mode 0600, never through a symlink) beside a
//! `.gitignore` of `*` that keeps it out of the agent's commits, and [`remove`]d when the
//! session ends.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::{AgentAdapter, AgentSettings, StartSessionParams, sortie_file};

/// Why a session's MCP file could not be prepared; each fails the attempt (a retryable
/// workspace error), so a person sees it in the run's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpFileError {
    pub kind: McpFileErrorKind,
    /// One line naming the file or setting and the cause.
    pub message: String,
}

/// What went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpFileErrorKind {
    /// The operator's `mcp_config` cannot be read, is too large, or is not a JSON object.
    OperatorConfig,
    /// The operator's `mcp_config` defines the server sortie writes itself.
    Conflict,
    /// This process's executable cannot be named.
    Binary,
    /// The file (or its `.gitignore`) could not be written.
    Write,
}

impl McpFileError {
    pub fn new(kind: McpFileErrorKind, message: impl Into<String>) -> McpFileError {
        McpFileError {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for McpFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for McpFileError {}

/// The file's name inside `.sortie/`.
pub const FILE_NAME: &str = "mcp.json";
/// The server entry sortie owns; an operator config must not define it.
pub const SERVER_NAME: &str = "sortie-tools";
/// Largest operator MCP file read.
const MAX_OPERATOR_BYTES: u64 = 1024 * 1024;

/// Which of the daemon's variables the server needs: names, and values (a variable holding one
/// of them passes: it is what a `$VAR` of the workflow's tracker settings resolves to).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SidecarNeeds {
    pub names: Vec<String>,
    pub values: Vec<String>,
}

impl std::fmt::Debug for SidecarNeeds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SidecarNeeds")
            .field("names", &self.names)
            .field("values", &self.values.len())
            .finish()
    }
}

/// What the session's file says beyond the session parameters.
#[derive(Debug, Clone, Default)]
pub struct McpContext {
    /// The absolute WORKFLOW.md the server loads.
    pub workflow_path: PathBuf,
    /// The database the server reads (read-only).
    pub db_path: PathBuf,
    /// The attempt number, when known (`SORTIE_ATTEMPT`).
    pub attempt: Option<u32>,
    pub daemon: DaemonFacts,
    /// The daemon's variables the server needs beyond the session's.
    pub needs: SidecarNeeds,
}

/// What the daemon process tells every session's server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DaemonFacts {
    /// The HTTP API's base URL (`http://127.0.0.1:7678`) when the daemon serves one
    /// (`SORTIE_API_URL`).
    pub api_url: Option<String>,
    /// The absolute `.env` file the daemon loaded (`--env-file` or `SORTIE_ENV_FILE`), so the
    /// server, started elsewhere, loads the same overrides (`SORTIE_ENV_FILE`).
    pub env_file: Option<PathBuf>,
    /// The workflow's name when the daemon serves several (`SORTIE_WORKFLOW`): the session
    /// tools read that workflow's rows of the shared database and name it to the API.
    pub workflow: Option<String>,
}

/// The operator's own MCP servers (`<kind>.mcp_config`): a file, or inline JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperatorMcp {
    File(PathBuf),
    Inline(String),
}

impl OperatorMcp {
    /// The block's `mcp_config`: inline JSON (`{…}`), `@file` or a plain path, relative to
    /// WORKFLOW.md's directory; `None` when unset or blank.
    pub fn of(settings: &AgentSettings) -> Option<OperatorMcp> {
        let v = settings.block.get("mcp_config")?.as_str()?.trim();
        if v.is_empty() {
            return None;
        }
        if v.starts_with('{') {
            return Some(OperatorMcp::Inline(v.to_string()));
        }
        let path = v.strip_prefix('@').unwrap_or(v);
        Some(OperatorMcp::File(settings.workflow_dir.join(path)))
    }

    fn load(&self) -> Result<Map<String, Value>, McpFileError> {
        let (text, what) = match self {
            OperatorMcp::Inline(s) => (s.clone(), "inline mcp_config".to_string()),
            OperatorMcp::File(p) => {
                let what = format!("mcp_config {}", p.display());
                let meta = std::fs::metadata(p).map_err(|e| {
                    McpFileError::new(McpFileErrorKind::OperatorConfig, format!("{what}: {e}"))
                })?;
                if meta.len() > MAX_OPERATOR_BYTES {
                    return Err(McpFileError::new(
                        McpFileErrorKind::OperatorConfig,
                        format!(
                            "{what}: {} bytes, over the {MAX_OPERATOR_BYTES}-byte limit",
                            meta.len()
                        ),
                    ));
                }
                (
                    std::fs::read_to_string(p).map_err(|e| {
                        McpFileError::new(McpFileErrorKind::OperatorConfig, format!("{what}: {e}"))
                    })?,
                    what,
                )
            }
        };
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) => Err(McpFileError::new(
                McpFileErrorKind::OperatorConfig,
                format!("{what}: not a JSON object"),
            )),
            Err(e) => Err(McpFileError::new(
                McpFileErrorKind::OperatorConfig,
                format!("{what}: invalid JSON: {e}"),
            )),
        }
    }
}

/// The server's environment: layer 1 is what `ctx.needs` picks from `process_env`, layer 2
/// (which wins) the session's own variables. A webhook secret never passes.
pub fn server_env(
    process_env: impl IntoIterator<Item = (String, String)>,
    params: &StartSessionParams,
    ctx: &McpContext,
) -> BTreeMap<String, String> {
    let needs = &ctx.needs;
    let mut env: BTreeMap<String, String> = process_env
        .into_iter()
        .filter(|(k, v)| {
            !k.starts_with("SORTIE_WEBHOOK_SECRET_")
                && (needs.names.contains(k) || (!v.is_empty() && needs.values.contains(v)))
        })
        .collect();
    let mut set = |k: &str, v: String| {
        env.insert(k.to_string(), v);
    };
    set("SORTIE_ISSUE_ID", params.issue_id.clone());
    set("SORTIE_ISSUE_IDENTIFIER", params.issue_identifier.clone());
    set(
        "SORTIE_WORKSPACE",
        params.workspace.to_string_lossy().into_owned(),
    );
    set("SORTIE_DB_PATH", ctx.db_path.to_string_lossy().into_owned());
    set("SORTIE_SESSION_ID", String::new());
    if let Some(a) = ctx.attempt {
        set("SORTIE_ATTEMPT", a.to_string());
    }
    if let Some(url) = &ctx.daemon.api_url {
        set("SORTIE_API_URL", url.clone());
    }
    if let Some(file) = &ctx.daemon.env_file {
        set("SORTIE_ENV_FILE", file.to_string_lossy().into_owned());
    }
    if let Some(name) = &ctx.daemon.workflow {
        set("SORTIE_WORKFLOW", name.clone());
    }
    env
}

/// The whole document: the operator's config (when any) with the `sortie-tools` server added.
/// `Err` when the operator's config cannot be read or defines `sortie-tools` itself.
pub fn document(
    binary: &Path,
    workflow: &Path,
    env: &BTreeMap<String, String>,
    operator: Option<&OperatorMcp>,
) -> Result<Value, McpFileError> {
    let mut doc = match operator {
        Some(op) => op.load()?,
        None => Map::new(),
    };
    let servers = doc
        .entry("mcpServers")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(servers) = servers else {
        return Err(McpFileError::new(
            McpFileErrorKind::OperatorConfig,
            "mcp_config: mcpServers is not a JSON object",
        ));
    };
    if servers.contains_key(SERVER_NAME) {
        return Err(McpFileError::new(
            McpFileErrorKind::Conflict,
            format!(
                "mcp_config defines the server {SERVER_NAME:?}, which sortie writes itself; rename or remove that entry"
            ),
        ));
    }
    servers.insert(
        SERVER_NAME.into(),
        json!({
            "type": "stdio",
            "command": binary.to_string_lossy(),
            "args": ["mcp-server", "--workflow", workflow.to_string_lossy()],
            "env": env,
        }),
    );
    Ok(Value::Object(doc))
}

/// Writes `.sortie/mcp.json` and `.sortie/.gitignore` into the workspace; the file's path.
pub fn write(workspace: &Path, doc: &Value) -> Result<PathBuf, McpFileError> {
    let body = serde_json::to_vec_pretty(doc)
        .map_err(|e| McpFileError::new(McpFileErrorKind::Write, format!("mcp config: {e}")))?;
    let dir = sortie_file::sortie_dir(workspace);
    sortie_file::write(workspace, ".gitignore", b"*\n").map_err(|e| {
        let m = format!("{}: {e}", dir.join(".gitignore").display());
        McpFileError::new(McpFileErrorKind::Write, m)
    })?;
    sortie_file::write(workspace, FILE_NAME, &body).map_err(|e| {
        let m = format!("{}: {e}", dir.join(FILE_NAME).display());
        McpFileError::new(McpFileErrorKind::Write, m)
    })?;
    Ok(dir.join(FILE_NAME))
}

/// Removes the session's `.sortie/mcp.json` (it may hold a credential); a missing file is
/// fine. Called when the session has ended.
pub fn remove(workspace: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(sortie_file::sortie_dir(workspace).join(FILE_NAME)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The sortie binary the agent starts: this process's executable, symlinks resolved.
pub fn sortie_binary() -> Result<PathBuf, McpFileError> {
    let exe = std::env::current_exe()
        .map_err(|e| McpFileError::new(McpFileErrorKind::Binary, format!("sortie binary: {e}")))?;
    std::fs::canonicalize(&exe).map_err(|e| {
        let m = format!("sortie binary {}: {e}", exe.display());
        McpFileError::new(McpFileErrorKind::Binary, m)
    })
}

/// Prepares a session's MCP file: for a kind that takes one (and a local run), writes it and
/// returns its path for [`StartSessionParams::mcp_config_path`]; `Ok(None)` for a kind that
/// takes none or a run on an SSH host (the file would name local paths). `Err` fails the
/// attempt: the operator's config is unreadable or claims `sortie-tools`, or the file could
/// not be written.
pub fn prepare(
    adapter: &dyn AgentAdapter,
    params: &StartSessionParams,
    ctx: &McpContext,
) -> Result<Option<PathBuf>, McpFileError> {
    let Some(settings) = adapter.worker_mcp_settings() else {
        return Ok(None);
    };
    if params.remote.is_some() {
        return Ok(None);
    }
    // `vars()` would panic on a variable that is not UTF-8; such a variable is left out.
    let process_env = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
    let env = server_env(process_env, params, ctx);
    let operator = OperatorMcp::of(settings);
    let doc = document(
        &sortie_binary()?,
        &ctx.workflow_path,
        &env,
        operator.as_ref(),
    )?;
    write(&params.workspace, &doc).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn params(ws: &Path) -> StartSessionParams {
        StartSessionParams {
            workspace: ws.to_path_buf(),
            issue_id: "10001".into(),
            issue_identifier: "MT-7".into(),
            ..Default::default()
        }
    }

    fn ctx() -> McpContext {
        McpContext {
            workflow_path: "/srv/WORKFLOW.md".into(),
            db_path: "/srv/.sortie.db".into(),
            attempt: Some(2),
            daemon: DaemonFacts {
                api_url: Some("http://127.0.0.1:7678".into()),
                env_file: Some("/srv/.env".into()),
                workflow: None,
            },
            needs: SidecarNeeds {
                names: vec![
                    "SORTIE_TRACKER_API_KEY".into(),
                    "SORTIE_AGENT_MAX_TOKENS".into(),
                ],
                values: vec!["lin-key".into()],
            },
        }
    }

    #[test]
    fn the_environment_keeps_what_the_server_needs_and_the_session_wins() {
        let process = vec![
            ("SORTIE_TRACKER_API_KEY".to_string(), "k-123".to_string()),
            ("SORTIE_AGENT_MAX_TOKENS".to_string(), "9".to_string()),
            ("SORTIE_ISSUE_ID".to_string(), "stale".to_string()),
            ("SORTIE_ENV_FILE".to_string(), "rel/.env".to_string()),
            (
                "SORTIE_WEBHOOK_SECRET_GITHUB".to_string(),
                "lin-key".to_string(),
            ),
            ("LINEAR_API_KEY".to_string(), "lin-key".to_string()),
            ("DB_PASSWORD".to_string(), "pw".to_string()),
            ("HOME".to_string(), "/root".to_string()),
        ];
        let env = server_env(process, &params(Path::new("/ws/MT-7")), &ctx());
        assert_eq!(env["SORTIE_TRACKER_API_KEY"], "k-123");
        assert_eq!(env["SORTIE_AGENT_MAX_TOKENS"], "9");
        assert_eq!(env["LINEAR_API_KEY"], "lin-key");
        assert!(!env.contains_key("SORTIE_WEBHOOK_SECRET_GITHUB"));
        assert!(!env.contains_key("DB_PASSWORD"));
        assert_eq!(env["SORTIE_ISSUE_ID"], "10001");
        assert_eq!(env["SORTIE_ISSUE_IDENTIFIER"], "MT-7");
        assert_eq!(env["SORTIE_WORKSPACE"], "/ws/MT-7");
        assert_eq!(env["SORTIE_DB_PATH"], "/srv/.sortie.db");
        assert_eq!(env["SORTIE_SESSION_ID"], "");
        assert_eq!(env["SORTIE_ATTEMPT"], "2");
        assert_eq!(env["SORTIE_API_URL"], "http://127.0.0.1:7678");
        assert_eq!(env["SORTIE_ENV_FILE"], "/srv/.env");
        assert!(!env.contains_key("HOME"));
        let bare = server_env(
            Vec::new(),
            &params(Path::new("/ws")),
            &McpContext::default(),
        );
        assert!(!bare.contains_key("SORTIE_ATTEMPT") && !bare.contains_key("SORTIE_API_URL"));
        assert!(!env.contains_key("SORTIE_WORKFLOW"));
    }

    #[test]
    fn a_workflow_of_several_is_named_to_the_server() {
        let mut c = ctx();
        c.daemon.workflow = Some("web".into());
        let env = server_env(Vec::new(), &params(Path::new("/ws/MT-7")), &c);
        assert_eq!(env["SORTIE_WORKFLOW"], "web");
    }

    #[test]
    fn the_operator_config_is_merged_and_may_not_claim_sortie_tools() {
        let env = BTreeMap::new();
        let op = OperatorMcp::Inline(
            r#"{"mcpServers":{"github":{"command":"gh-mcp"}},"other":1}"#.into(),
        );
        let doc = document(
            Path::new("/bin/sortie"),
            Path::new("/w/WORKFLOW.md"),
            &env,
            Some(&op),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(doc["other"], 1);
        assert_eq!(doc["mcpServers"]["github"]["command"], "gh-mcp");
        let own = &doc["mcpServers"][SERVER_NAME];
        assert_eq!(own["type"], "stdio");
        assert_eq!(own["command"], "/bin/sortie");
        assert_eq!(
            own["args"],
            json!(["mcp-server", "--workflow", "/w/WORKFLOW.md"])
        );
        let claims = OperatorMcp::Inline(r#"{"mcpServers":{"sortie-tools":{}}}"#.into());
        let err = document(Path::new("/b"), Path::new("/w"), &env, Some(&claims))
            .err()
            .map(|e| e.message)
            .unwrap_or_default();
        assert!(err.contains("sortie-tools"), "{err}");
        let broken = OperatorMcp::Inline("{nope".into());
        assert!(document(Path::new("/b"), Path::new("/w"), &env, Some(&broken)).is_err());
    }

    #[test]
    fn operator_values_are_inline_json_or_files_beside_the_workflow() {
        let mut s = AgentSettings {
            workflow_dir: "/w".into(),
            ..Default::default()
        };
        assert_eq!(OperatorMcp::of(&s), None);
        s.block.insert("mcp_config".into(), json!("@extra.json"));
        assert_eq!(
            OperatorMcp::of(&s),
            Some(OperatorMcp::File("/w/extra.json".into()))
        );
        s.block.insert("mcp_config".into(), json!("conf/mcp.json"));
        assert_eq!(
            OperatorMcp::of(&s),
            Some(OperatorMcp::File("/w/conf/mcp.json".into()))
        );
        s.block
            .insert("mcp_config".into(), json!(" {\"mcpServers\":{}}"));
        assert!(matches!(OperatorMcp::of(&s), Some(OperatorMcp::Inline(_))));
    }

    #[test]
    fn only_local_runs_of_kinds_that_take_it_get_the_file() {
        let clock: std::sync::Arc<dyn crate::clock::Clock> =
            std::sync::Arc::new(crate::clock::ManualClock::new(0));
        let claude =
            crate::agent::claude::ClaudeAdapter::new(AgentSettings::default(), clock.clone());
        let mock = crate::agent::mock::DESCRIPTOR.build;
        let mock = mock(&AgentSettings::default(), clock).unwrap_or_else(|e| panic!("{e:?}"));
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut p = params(d.path());
        assert_eq!(prepare(mock.as_ref(), &p, &ctx()), Ok(None));
        assert!(!d.path().join(".sortie").exists());
        let target = crate::ssh::SshTarget::parse("worker-1").unwrap_or_else(|e| panic!("{e:?}"));
        p.remote = Some(crate::ssh::SshHost {
            target,
            options: Default::default(),
        });
        assert_eq!(prepare(&claude, &p, &ctx()), Ok(None));
        assert!(!d.path().join(".sortie").exists());
        p.remote = None;
        let path = prepare(&claude, &p, &ctx())
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("no file"));
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_default())
            .unwrap_or(Value::Null);
        let own = &doc["mcpServers"][SERVER_NAME];
        assert!(own["command"].as_str().is_some_and(|c| c.starts_with('/')));
        assert_eq!(own["env"]["SORTIE_ISSUE_ID"], "10001");
    }

    #[test]
    fn the_file_is_private_and_ignored_by_git() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = write(d.path(), &json!({"mcpServers": {}})).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(path, d.path().join(".sortie").join("mcp.json"));
        let mode = std::fs::metadata(&path)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0);
        assert_eq!(mode, 0o600);
        let ignore =
            std::fs::read_to_string(d.path().join(".sortie/.gitignore")).unwrap_or_default();
        assert_eq!(ignore.trim(), "*");
    }
}
