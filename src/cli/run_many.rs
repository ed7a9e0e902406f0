//! Several workflows under one daemon (`sortie A.md B.md`, `sortie --workflows DIR`,
//! `--config sortie.yaml`): one orchestrator thread per workflow (`orch-<name>`), each the
//! sole owner of its workflow's scheduling state, over one database (every row keyed by the
//! workflow's name), one HTTP port and one process.
//!
//! What the workflows share comes from `sortie.yaml` (`config::daemon`): the agent cap across
//! workflows (with its fair share, `orchestrator::core::slots`), the server, logging and the
//! database. Everything else (tracker, agent, rules, reactions, budgets, hooks, workspace root)
//! stays each workflow's own. A workflow that does not load or fails its preflight at start
//! is reported and left out; the others run. With exactly one workflow loaded this is the
//! plain single-workflow daemon (`cli::run`).

use std::path::PathBuf;
use std::sync::Arc;

use crate::clock::{Clock, SystemClock};
use crate::config::daemon::{self, DaemonConfigError, SharedConfig, WorkflowSource};
use crate::config::{LoadOptions, LogFormat, LogLevel, ServerBind};
use crate::orchestrator;
use crate::orchestrator::core::slots::SlotBroker;
use crate::orchestrator::features::spend::ceiling::Ceilings;
use crate::orchestrator::features::spend::daemon::DaemonSpend;

use super::run::{self as single, fail};
use super::workflow_set::{Built, Context, Loaded, WorkflowSet, load_one};

/// `sortie` with several workflows.
pub struct ManyOptions {
    /// Workflow files named on the command line.
    pub files: Vec<PathBuf>,
    /// `--workflows DIR`.
    pub dir: Option<PathBuf>,
    /// `--config FILE` (else `sortie.yaml` in the `--workflows` folder, when there).
    pub config: Option<PathBuf>,
    pub port: Option<String>,
    pub host: Option<String>,
    pub log_level: Option<String>,
    pub log_format: Option<String>,
    pub env_file: Option<PathBuf>,
    pub dry_run: bool,
}

/// A workflow left out at start, and why.
pub struct LeftOut {
    pub source: WorkflowSource,
    pub error: String,
}

/// `--dry-run` over several workflows: each one's dry run in turn under a heading naming it,
/// then the ones that did not load with why. Exit 1 when one did not load or its dry run
/// failed.
fn dry_run_each(loaded: &[Loaded], left_out: &[LeftOut]) -> i32 {
    use std::io::Write;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut code = 0;
    for l in loaded {
        let (name, path) = (&l.source.name, l.source.path.display());
        let _ = writeln!(out, "== workflow {name} ({path})");
        code = code.max(super::dry_run::run(&l.workflow, &l.template, &mut out));
    }
    for l in left_out {
        let (name, path) = (&l.source.name, l.source.path.display());
        let _ = writeln!(out, "== workflow {name} ({path}): not loaded: {}", l.error);
        code = 1;
    }
    code
}

/// Runs several workflows; returns the process exit code.
pub fn run(opts: ManyOptions) -> i32 {
    let (level, format) = match super::run::log_flags(&opts.log_level, &opts.log_format) {
        Ok(v) => v,
        Err(code) => return code,
    };
    let load_options = LoadOptions::from_process(opts.env_file.clone());
    let shared = match shared_config(&opts, &load_options) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let paths = match workflow_paths(&opts) {
        // Absolute and without `.` parts: the paths are shown and watched.
        Ok(p) => p
            .into_iter()
            .map(|p| load_options.cwd.join(p).components().collect::<PathBuf>())
            .collect::<Vec<_>>(),
        Err(e) => return fail(e),
    };
    let (loaded, left_out) = match load_all(&paths, &load_options) {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    let level = level.or(shared.logging.level).unwrap_or(LogLevel::Info);
    let format = format.or(shared.logging.format).unwrap_or(LogFormat::Text);
    crate::logging::init(level, format);
    if opts.dry_run {
        return dry_run_each(&loaded, &left_out);
    }
    for l in &left_out {
        log::error!(
            workflow:% = l.source.name,
            workflow_path:% = l.source.path.display(),
            error:% = l.error;
            "workflow not loaded; the others run"
        );
    }
    if loaded.is_empty() {
        return fail("no workflow could be loaded");
    }
    let bind = match ServerBind::resolve(opts.port.as_deref(), opts.host.as_deref(), &shared.server)
    {
        Ok(b) => b,
        Err(e) => return fail(e),
    };
    let db_path = match daemon::shared_db(
        &shared,
        &loaded.iter().map(|l| &l.workflow).collect::<Vec<_>>(),
    ) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    for l in &loaded {
        for key in ["server", "logging", "db_path"]
            .into_iter()
            .filter(|k| l.workflow.config.raw.contains_key(*k))
        {
            log::warn!(
                workflow:% = l.source.name,
                field:% = key;
                "a workflow's own setting is not used with several workflows; set it in sortie.yaml"
            );
        }
        for w in &l.workflow.warnings {
            log::warn!(
                workflow:% = l.source.name,
                check:% = w.check,
                field:% = w.field,
                message:% = w.message;
                "workflow warning"
            );
        }
    }
    log::info!(
        version:% = crate::build_info::VERSION,
        workflows:% = loaded.iter().map(|l| l.source.name.as_str()).collect::<Vec<_>>().join(","),
        server_addr:% = format!("{}:{}", bind.host, bind.port);
        "sortie starting"
    );
    let dir = opts
        .dir
        .as_ref()
        .map(|d| load_options.cwd.join(d).components().collect());
    run_daemon(Daemon {
        loaded,
        left_out,
        shared,
        db_path,
        load_options,
        bind,
        log_format: format,
        dir,
    })
}

/// `sortie.yaml`: the `--config` file, else the one in the `--workflows` folder, else none.
fn shared_config(
    opts: &ManyOptions,
    load_options: &LoadOptions,
) -> Result<SharedConfig, DaemonConfigError> {
    let path = opts.config.clone().or_else(|| {
        opts.dir
            .as_ref()
            .map(|d| d.join(daemon::SHARED_FILE))
            .filter(|p| p.exists())
    });
    match path {
        Some(p) => daemon::load_shared(&p, load_options),
        None => Ok(SharedConfig::default()),
    }
}

/// The workflow files: the folder's (with `--workflows`) and the ones named.
fn workflow_paths(opts: &ManyOptions) -> Result<Vec<PathBuf>, DaemonConfigError> {
    let mut paths = match &opts.dir {
        Some(d) => daemon::discover(d)?,
        None => Vec::new(),
    };
    paths.extend(opts.files.iter().cloned());
    if paths.is_empty() {
        paths.push(single::default_workflow());
    }
    if paths.len() > daemon::MAX_WORKFLOWS {
        return Err(DaemonConfigError::TooMany { count: paths.len() });
    }
    Ok(paths)
}

/// Loads, names and checks every workflow. A duplicate name stops the start (which of the
/// two is meant cannot be guessed); a workflow that fails to load or its preflight is left out.
fn load_all(
    paths: &[PathBuf],
    load_options: &LoadOptions,
) -> Result<(Vec<Loaded>, Vec<LeftOut>), DaemonConfigError> {
    let mut loaded = Vec::new();
    let mut left_out = Vec::new();
    for path in paths {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        match load_one(path, load_options) {
            Ok(l) => loaded.push(l),
            Err((name, error)) => left_out.push(LeftOut {
                source: WorkflowSource {
                    name: name.unwrap_or(stem),
                    path: path.clone(),
                },
                error,
            }),
        }
    }
    let sources: Vec<WorkflowSource> = loaded
        .iter()
        .map(|l| l.source.clone())
        .chain(left_out.iter().map(|l| l.source.clone()))
        .collect();
    daemon::check_unique(&sources)?;
    Ok((loaded, left_out))
}

/// Everything the daemon starts from.
struct Daemon {
    loaded: Vec<Loaded>,
    left_out: Vec<LeftOut>,
    shared: SharedConfig,
    db_path: PathBuf,
    load_options: LoadOptions,
    bind: ServerBind,
    log_format: LogFormat,
    /// The `--workflows` folder, watched for files added and removed.
    dir: Option<PathBuf>,
}

fn run_daemon(d: Daemon) -> i32 {
    let Some(first) = d.loaded.first() else {
        return fail("no workflow could be loaded");
    };
    single::start_keeper(&first.workflow, d.log_format);
    for l in &d.loaded {
        single::warn_agent_environment(&l.workflow);
    }
    single::adopt_orphans();
    log::info!(db_path:% = d.db_path.display(); "database path resolved");
    let _db_lock = match single::lock_database(&d.db_path, None) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store = match crate::store::Store::open(&d.db_path, clock.clone()) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    adopt_unnamed(&store, &d.shared, &d.loaded);
    let ctx = Context {
        store: store.scoped(""),
        clock,
        load_options: d.load_options,
        broker: d
            .shared
            .max_concurrent_agents
            .map(|n| SlotBroker::new(n as usize)),
        spend: d.shared.spend.any().then(|| {
            DaemonSpend::new(Ceilings {
                daily: d.shared.spend.daily_usd,
                weekly: d.shared.spend.weekly_usd,
                monthly: d.shared.spend.monthly_usd,
            })
        }),
        bind: d.bind,
    };
    let code = serve(ctx, d.loaded, d.left_out, d.dir);
    // Every workflow has flushed its writes; the writer they share stops last.
    if let Err(e) = store.close() {
        log::error!(error:% = e.to_string(); "database close failed");
    }
    code
}

/// Builds every workflow, starts the server and the orchestrators, and supervises them until
/// they end; the exit code.
fn serve(ctx: Context, loaded: Vec<Loaded>, left_out: Vec<LeftOut>, dir: Option<PathBuf>) -> i32 {
    let drain_budget = loaded
        .iter()
        .map(|l| std::time::Duration::from_millis(l.workflow.config.shutdown.drain_timeout_ms))
        .max()
        .unwrap_or_default();
    let mut built = Vec::new();
    for l in loaded {
        match WorkflowSet::build(&ctx, l) {
            Ok(b) => built.push(b),
            Err(e) => return fail(e),
        }
    }
    let inboxes: single::Inboxes = Arc::new(std::sync::Mutex::new(
        built.iter().map(|b| b.handle.tx.clone()).collect(),
    ));
    if let Err(e) = single::install_signal_handlers(inboxes.clone(), drain_budget) {
        return fail(format!("cannot install signal handlers: {e}"));
    }
    let listed: Vec<crate::http::LeftOutWorkflow> = left_out
        .iter()
        .map(|l| crate::http::LeftOutWorkflow {
            name: l.source.name.clone(),
            path: l.source.path.display().to_string(),
            error: l.error.clone(),
        })
        .collect();
    let server = match crate::http::start_many(
        &ctx.bind,
        built.iter().map(Built::served).collect(),
        listed,
        ctx.clock.clone(),
    ) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let essential_panicked = single::install_essential_panic_hook(inboxes.clone());
    let known: std::collections::BTreeSet<PathBuf> = built
        .iter()
        .map(|b| b.path.clone())
        .chain(left_out.iter().map(|l| l.source.path.clone()))
        .collect();
    let left_out = left_out
        .into_iter()
        .map(|l| (l.source.path, l.source.name))
        .collect();
    let mut set = WorkflowSet::new(
        ctx,
        server.as_ref().map(|s| s.served()),
        inboxes.clone(),
        left_out,
    );
    for b in built {
        if let Err(e) = set.launch(b, true) {
            single::tell_all(&inboxes, || orchestrator::OrchMsg::Shutdown);
            return fail(e);
        }
    }
    let folder = dir.and_then(|d| match super::workflow_dir::spawn(&d, known) {
        Ok(rx) => Some(rx),
        Err(e) => {
            log::warn!(error:% = e; "workflow folder not watched; files added or removed need a restart");
            None
        }
    });
    log::info!("sortie started");
    let ended = set.supervise(server.as_ref().map(|s| s.fatal_receiver()), folder);
    if let Some(s) = server {
        s.shutdown();
    }
    if ended.http_died {
        return 1;
    }
    single::exit_code(
        ended.panicked,
        essential_panicked.load(std::sync::atomic::Ordering::SeqCst),
    )
}

/// The rows a database kept for the one workflow that used it alone (`''`) go to that
/// workflow: the one `sortie.yaml`'s `unnamed_history` names, else the loaded workflow whose
/// file the newest of those runs recorded (its path, else its file name when exactly one
/// workflow's file has it). Otherwise they
/// stay unnamed (a warning says how to adopt them); nothing is guessed.
fn adopt_unnamed(store: &crate::store::Store, shared: &SharedConfig, loaded: &[Loaded]) {
    let found = match store.writer().unnamed_rows() {
        Ok(f) if f.rows > 0 => f,
        Ok(_) => return,
        Err(e) => {
            log::warn!(error:% = e.to_string(); "rows of a single workflow not looked for");
            return;
        }
    };
    // The recorded path itself, else its file name when exactly one workflow has it.
    let by_file = |file: &str| {
        let recorded = std::path::Path::new(file);
        if let Some(l) = loaded.iter().find(|l| l.workflow.path == recorded) {
            return Some(l.source.name.clone());
        }
        let mut matching = loaded
            .iter()
            .filter(|l| l.workflow.path.file_name() == recorded.file_name());
        match (matching.next(), matching.next()) {
            (Some(l), None) => Some(l.source.name.clone()),
            _ => None,
        }
    };
    let target = shared
        .unnamed_history
        .clone()
        .or_else(|| found.workflow_file.as_deref().and_then(by_file));
    let target = target.filter(|n| {
        let known = loaded.iter().any(|l| l.source.name == *n);
        if !known {
            log::warn!(workflow:% = n; "unnamed_history names no loaded workflow; history not adopted");
        }
        known
    });
    let Some(name) = target else {
        log::warn!(
            rows:% = found.rows,
            workflow_file:% = found.workflow_file.as_deref().unwrap_or("");
            "the database holds the history of a single workflow that no loaded workflow adopts; name it with unnamed_history in sortie.yaml"
        );
        return;
    };
    match store.writer().adopt_unnamed(&name) {
        Ok(Some(n)) => log::info!(
            workflow:% = name,
            rows:% = n;
            "history of the single workflow adopted"
        ),
        Ok(None) => log::warn!(
            workflow:% = name,
            rows:% = found.rows;
            "the single workflow's history is not adopted: this workflow has history of its own"
        ),
        Err(e) => log::error!(
            workflow:% = name,
            error:% = e.to_string();
            "the single workflow's history could not be adopted"
        ),
    }
}
