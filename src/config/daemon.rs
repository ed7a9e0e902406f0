//! Several workflows under one daemon: which workflow files are served (the files named on
//! the command line, or every `*.md` with front matter in a folder), the name each is known
//! by, and the optional `sortie.yaml` holding what they share (a daemon-wide agent cap and
//! spend ceilings, the HTTP server, logging and the one database).
//!
//! A workflow's name is its front matter's `name:`, else its file stem. Names are unique per
//! daemon, made of letters, digits, `-`, `_` and `.` (at most 64), because they appear in
//! URLs (`?workflow=`), metric labels and database keys.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::schema::{LoggingConfig, ServerConfig};
use super::{ConfigError, LoadOptions, Workflow};

/// The file name of the shared settings looked for in a `--workflows` folder.
pub const SHARED_FILE: &str = "sortie.yaml";
/// The front-matter key naming a workflow.
pub const NAME_KEY: &str = "name";
/// Longest workflow name.
pub const MAX_NAME_LEN: usize = 64;
/// Largest `sortie.yaml` read.
const MAX_SHARED_BYTES: u64 = 64 * 1024;
/// Most workflow files one daemon serves.
pub const MAX_WORKFLOWS: usize = 64;

/// One workflow file a daemon serves, and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowSource {
    pub name: String,
    pub path: PathBuf,
}

/// Daemon-wide spend ceilings in USD: recorded spend of every workflow together, per UTC
/// day, week or month; reaching one holds every workflow's dispatch.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SharedSpend {
    pub daily_usd: Option<f64>,
    pub weekly_usd: Option<f64>,
    pub monthly_usd: Option<f64>,
}

impl SharedSpend {
    pub fn any(&self) -> bool {
        self.daily_usd.is_some() || self.weekly_usd.is_some() || self.monthly_usd.is_some()
    }
}

/// `sortie.yaml`: what the workflows of one daemon share.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SharedConfig {
    /// The file it was read from (`None`: no file, every default).
    pub path: Option<PathBuf>,
    /// Agents at once across every workflow; each workflow's own cap still applies inside it.
    pub max_concurrent_agents: Option<u32>,
    pub spend: SharedSpend,
    pub server: ServerConfig,
    pub logging: LoggingConfig,
    /// The one database (absolute); `None`: `.sortie.db` beside `sortie.yaml`, or in the
    /// folder of the first workflow.
    pub db_path: Option<PathBuf>,
    /// The workflow that adopts the history a single workflow left in the database
    /// (`cli::run_many`); `None`: the one whose file name matches, if exactly one does.
    pub unnamed_history: Option<String>,
}

/// Why the workflow list or `sortie.yaml` cannot be used.
#[derive(Debug, Clone, PartialEq)]
pub enum DaemonConfigError {
    /// The `--workflows` folder cannot be listed.
    Folder { path: PathBuf, reason: String },
    /// The folder has no workflow file.
    NoWorkflows { path: PathBuf },
    /// More workflow files than one daemon serves.
    TooMany { count: usize },
    /// `sortie.yaml` cannot be read or parsed.
    SharedFile { path: PathBuf, reason: String },
    /// A `sortie.yaml` field is invalid.
    SharedField {
        path: PathBuf,
        field: String,
        message: String,
    },
    /// A workflow's name is not usable.
    BadName {
        path: PathBuf,
        name: String,
        reason: &'static str,
    },
    /// Two workflows have the same name.
    DuplicateName {
        name: String,
        first: PathBuf,
        second: PathBuf,
    },
    /// A workflow sets something the daemon shares, to a value the daemon does not use.
    Conflict {
        path: PathBuf,
        field: &'static str,
        message: String,
    },
}

impl std::fmt::Display for DaemonConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Folder { path, reason } => {
                write!(
                    f,
                    "cannot list workflow folder {}: {reason}",
                    path.display()
                )
            }
            Self::NoWorkflows { path } => write!(
                f,
                "no workflow file in {} (a workflow is a *.md file whose first line is ---)",
                path.display()
            ),
            Self::TooMany { count } => write!(
                f,
                "{count} workflow files: one daemon serves at most {MAX_WORKFLOWS}"
            ),
            Self::SharedFile { path, reason } => write!(f, "{}: {reason}", path.display()),
            Self::SharedField {
                path,
                field,
                message,
            } => write!(f, "{}: {field}: {message}", path.display()),
            Self::BadName { path, name, reason } => write!(
                f,
                "{}: workflow name {name:?} {reason} (set `{NAME_KEY}:` in its front matter)",
                path.display()
            ),
            Self::DuplicateName {
                name,
                first,
                second,
            } => write!(
                f,
                "two workflows are named {name:?}: {} and {} (names must be unique; set `{NAME_KEY}:` in one's front matter)",
                first.display(),
                second.display()
            ),
            Self::Conflict {
                path,
                field,
                message,
            } => write!(f, "{}: {field}: {message}", path.display()),
        }
    }
}

impl std::error::Error for DaemonConfigError {}

/// The workflow files of a folder: every regular `*.md` whose first line is `---`, sorted by
/// file name (so names and the order workflows are listed in are stable).
pub fn discover(dir: &Path) -> Result<Vec<PathBuf>, DaemonConfigError> {
    let folder_err = |e: std::io::Error| DaemonConfigError::Folder {
        path: dir.to_path_buf(),
        reason: e.to_string(),
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(folder_err)? {
        let path = entry.map_err(folder_err)?.path();
        if path.extension().is_some_and(|e| e == "md") && has_front_matter(&path) {
            found.push(path);
            if found.len() > MAX_WORKFLOWS {
                return Err(DaemonConfigError::TooMany { count: found.len() });
            }
        }
    }
    found.sort();
    if found.is_empty() {
        return Err(DaemonConfigError::NoWorkflows {
            path: dir.to_path_buf(),
        });
    }
    Ok(found)
}

/// Whether `path` is a regular file whose first line is `---` (a README beside the
/// workflows is not one). Reads at most the first few bytes.
pub fn has_front_matter(path: &Path) -> bool {
    use std::io::Read;
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    if !meta.is_file() {
        return false;
    }
    let mut head = [0u8; 8];
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    let n = f.read(&mut head).unwrap_or(0);
    let head = head.get(..n).unwrap_or_default();
    let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    head.starts_with(b"---\n") || head.starts_with(b"---\r\n")
}

/// A loaded workflow's name: its front matter's `name:`, else its file stem.
pub fn workflow_name(wf: &Workflow) -> Result<String, DaemonConfigError> {
    let bad = |name: String, reason| DaemonConfigError::BadName {
        path: wf.path.clone(),
        name,
        reason,
    };
    let name = match wf.config.raw.get(NAME_KEY) {
        None | Some(Value::Null) => wf
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        Some(Value::String(s)) => s.trim().to_string(),
        Some(other) => return Err(bad(other.to_string(), "is not a string")),
    };
    check_name(&name).map_err(|reason| bad(name.clone(), reason))?;
    Ok(name)
}

/// Whether `name` can name a workflow: the reason it cannot.
pub fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("is empty");
    }
    if name.len() > MAX_NAME_LEN {
        return Err("is longer than 64 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err("may hold only letters, digits, '-', '_' and '.'");
    }
    Ok(())
}

/// Refuses two workflows with one name, naming both files.
pub fn check_unique(sources: &[WorkflowSource]) -> Result<(), DaemonConfigError> {
    for (i, a) in sources.iter().enumerate() {
        if let Some(b) = sources[i + 1..].iter().find(|b| b.name == a.name) {
            return Err(DaemonConfigError::DuplicateName {
                name: a.name.clone(),
                first: a.path.clone(),
                second: b.path.clone(),
            });
        }
    }
    Ok(())
}

/// Reads `sortie.yaml`. Relative paths in it (`db_path`) are taken from its folder.
pub fn load_shared(path: &Path, opts: &LoadOptions) -> Result<SharedConfig, DaemonConfigError> {
    let abs = opts.absolute(path);
    let file_err = |reason: String| DaemonConfigError::SharedFile {
        path: abs.clone(),
        reason,
    };
    let bytes =
        super::workflow_file::read_regular_file(&abs, MAX_SHARED_BYTES).map_err(|e| match e {
            super::workflow_file::FileReadError::NotFound(r)
            | super::workflow_file::FileReadError::Unreadable(r) => file_err(r),
        })?;
    let text = String::from_utf8(bytes).map_err(|_| file_err("is not UTF-8 text".into()))?;
    let raw: Value = if text.trim().is_empty() {
        Value::Object(Map::new())
    } else {
        serde_yaml::from_str(&text).map_err(|e| file_err(format!("invalid YAML: {e}")))?
    };
    let Value::Object(map) = raw else {
        return Err(file_err("must be a map of settings".into()));
    };
    let dir = abs.parent().unwrap_or(Path::new("/")).to_path_buf();
    parse_shared(&map, &abs, &dir)
}

/// The keys `sortie.yaml` reads.
const SHARED_KEYS: &[&str] = &[
    "max_concurrent_agents",
    "max_daily_cost_usd",
    "max_weekly_cost_usd",
    "max_monthly_cost_usd",
    "server",
    "logging",
    "db_path",
    "unnamed_history",
];

fn parse_shared(
    map: &Map<String, Value>,
    path: &Path,
    dir: &Path,
) -> Result<SharedConfig, DaemonConfigError> {
    let field_err = |field: &str, e: ConfigError| DaemonConfigError::SharedField {
        path: path.to_path_buf(),
        field: field.to_string(),
        message: e.to_string(),
    };
    if let Some(unknown) = map.keys().find(|k| !SHARED_KEYS.contains(&k.as_str())) {
        return Err(DaemonConfigError::SharedField {
            path: path.to_path_buf(),
            field: unknown.clone(),
            message: format!("unknown key (known: {})", SHARED_KEYS.join(", ")),
        });
    }
    let empty = Map::new();
    let section = |name: &str| -> Result<&Map<String, Value>, DaemonConfigError> {
        match map.get(name) {
            None | Some(Value::Null) => Ok(&empty),
            Some(Value::Object(m)) => Ok(m),
            Some(_) => Err(DaemonConfigError::SharedField {
                path: path.to_path_buf(),
                field: name.to_string(),
                message: "must be a map".into(),
            }),
        }
    };
    let server =
        super::build::build_server(section("server")?).map_err(|e| field_err("server", e))?;
    let logging =
        super::build::build_logging(section("logging")?).map_err(|e| field_err("logging", e))?;
    let usd = |key: &str| super::build::usd(map, key).map_err(|e| field_err(key, e));
    let spend = SharedSpend {
        daily_usd: usd("max_daily_cost_usd")?,
        weekly_usd: usd("max_weekly_cost_usd")?,
        monthly_usd: usd("max_monthly_cost_usd")?,
    };
    Ok(SharedConfig {
        path: Some(path.to_path_buf()),
        max_concurrent_agents: agent_cap(map, path)?,
        spend,
        server,
        logging,
        db_path: shared_db_path(map, path, dir)?,
        unnamed_history: unnamed_history(map, path)?,
    })
}

fn unnamed_history(
    map: &Map<String, Value>,
    path: &Path,
) -> Result<Option<String>, DaemonConfigError> {
    match map.get("unnamed_history") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if check_name(s.trim()).is_ok() => Ok(Some(s.trim().to_string())),
        Some(v) => Err(DaemonConfigError::SharedField {
            path: path.to_path_buf(),
            field: "unnamed_history".into(),
            message: format!("invalid value {v} (expected a workflow name)"),
        }),
    }
}

fn agent_cap(map: &Map<String, Value>, path: &Path) -> Result<Option<u32>, DaemonConfigError> {
    match map.get("max_concurrent_agents") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n >= 1)
            .map(Some)
            .ok_or_else(|| DaemonConfigError::SharedField {
                path: path.to_path_buf(),
                field: "max_concurrent_agents".into(),
                message: format!("invalid value {v} (expected a whole number of at least 1)"),
            }),
    }
}

fn shared_db_path(
    map: &Map<String, Value>,
    path: &Path,
    dir: &Path,
) -> Result<Option<PathBuf>, DaemonConfigError> {
    match map.get("db_path") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(dir.join(s.trim()))),
        Some(v) => Err(DaemonConfigError::SharedField {
            path: path.to_path_buf(),
            field: "db_path".into(),
            message: format!("invalid value {v} (expected a file path)"),
        }),
    }
}

/// The database every workflow shares: `sortie.yaml`'s `db_path`, else `.sortie.db` beside
/// it, else the first workflow's own `db_path`. A workflow whose front matter names another
/// database is refused: one daemon keeps one database.
pub fn shared_db(
    shared: &SharedConfig,
    workflows: &[&Workflow],
) -> Result<PathBuf, DaemonConfigError> {
    let chosen = match (&shared.db_path, &shared.path, workflows.first()) {
        (Some(p), _, _) => p.clone(),
        (None, Some(file), _) => file
            .parent()
            .unwrap_or(Path::new("/"))
            .join(super::DEFAULT_DB_FILE),
        (None, None, Some(first)) => first.config.db_path.clone(),
        (None, None, None) => PathBuf::from(super::DEFAULT_DB_FILE),
    };
    for wf in workflows {
        let own = wf.config.raw.get("db_path").is_some();
        if own && wf.config.db_path != chosen {
            return Err(DaemonConfigError::Conflict {
                path: wf.path.clone(),
                field: "db_path",
                message: format!(
                    "names {} but the daemon's database is {} (with several workflows, set db_path in sortie.yaml only)",
                    wf.config.db_path.display(),
                    chosen.display()
                ),
            });
        }
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(dir: &Path) -> LoadOptions {
        LoadOptions {
            env_file: None,
            env: Default::default(),
            cwd: dir.to_path_buf(),
            home: None,
        }
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("web-app_2.x").is_ok());
        assert_eq!(check_name(""), Err("is empty"));
        assert!(check_name("a b").is_err());
        assert!(check_name("a/b").is_err());
        assert!(check_name(&"x".repeat(65)).is_err());
    }

    #[test]
    fn duplicate_names_name_both_files() {
        let s = |n: &str, p: &str| WorkflowSource {
            name: n.into(),
            path: p.into(),
        };
        let err = check_unique(&[s("a", "/x/a.md"), s("b", "/x/b.md"), s("a", "/y/a.md")])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("/x/a.md") && err.contains("/y/a.md"), "{err}");
    }

    #[test]
    fn a_folder_lists_only_files_with_front_matter_in_name_order() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let write = |n: &str, t: &str| {
            std::fs::write(dir.path().join(n), t).unwrap_or_else(|e| panic!("{e}"))
        };
        write("b.md", "---\ntracker: {}\n---\nx\n");
        write("a.md", "\u{feff}---\r\ntracker: {}\r\n---\r\n");
        write("README.md", "# notes\n");
        write("c.txt", "---\n");
        let found = discover(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<_> = found
            .iter()
            .filter_map(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.md", "b.md"]);
        let empty = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            discover(empty.path()),
            Err(DaemonConfigError::NoWorkflows { .. })
        ));
    }

    #[test]
    fn shared_settings_are_read_and_checked() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join(SHARED_FILE);
        std::fs::write(
            &file,
            "max_concurrent_agents: 2\nmax_daily_cost_usd: 5.5\nserver:\n  port: 0\nlogging:\n  level: debug\ndb_path: data/all.db\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let s = load_shared(&file, &opts(dir.path())).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.max_concurrent_agents, Some(2));
        assert_eq!(s.spend.daily_usd, Some(5.5));
        assert_eq!(s.server.port, Some(0));
        assert_eq!(s.db_path, Some(dir.path().join("data/all.db")));
        for (text, needle) in [
            ("max_concurrent_agents: 0\n", "max_concurrent_agents"),
            ("agent: {}\n", "unknown key"),
            ("server: 3\n", "must be a map"),
            ("- a\n", "must be a map"),
            ("max_daily_cost_usd: lots\n", "max_daily_cost_usd"),
        ] {
            std::fs::write(&file, text).unwrap_or_else(|e| panic!("{e}"));
            let err = load_shared(&file, &opts(dir.path()))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }
}
