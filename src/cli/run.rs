//! Run mode: load and check the workflow, set up logging, then either a
//! dry run or the daemon: database, warm start, HTTP server, signal handling, the workflow
//! watcher and the orchestrator thread.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::clock::{Clock, SystemClock};
use crate::config::{LoadOptions, ServerBind, Workflow, load_workflow};
use crate::config::{LogFormat, LogLevel};
use crate::logging;
use crate::orchestrator::{self, adapters};
use crate::prompt::PromptTemplate;

/// Flags shared by `sortie` and `sortie demo`.
pub struct RunOptions {
    pub workflow: PathBuf,
    pub port: Option<String>,
    pub host: Option<String>,
    pub log_level: Option<String>,
    pub log_format: Option<String>,
    pub env_file: Option<PathBuf>,
    pub dry_run: bool,
    /// `SORTIE_*` values laid over the process environment (they win over it), for every
    /// load of the workflow, reloads included: how `sortie demo --speed` scales its timings.
    pub env_overlay: Vec<(String, String)>,
    /// The database lock the caller already holds (`sortie demo` takes it before it resets
    /// anything); used when it guards the workflow's `db_path`, otherwise dropped and the lock
    /// taken afresh.
    pub db_lock: Option<crate::store::lock::DbLock>,
}

pub(super) fn fail(msg: impl std::fmt::Display) -> i32 {
    eprintln!("sortie: {msg}");
    1
}

/// Starts the keeper process that stops sortie's agents, hooks and helpers if sortie dies
/// without draining (`process_signal::keeper`), before anything can start one.
pub(super) fn start_keeper(wf: &Workflow, log_format: LogFormat) {
    let grace = crate::agent::AgentSettings {
        stop_grace_ms: wf.config.agent.stop_grace_ms,
        ..Default::default()
    }
    .stop_grace();
    let format = match log_format {
        LogFormat::Text => "text",
        LogFormat::Json => "json",
    };
    let env = crate::child_env::basics(std::env::vars_os());
    match crate::process_signal::keeper::spawn_watched(grace, format, env) {
        Ok(pid) => log::info!(pid:% = pid, grace_ms:% = grace.as_millis(); "keeper started"),
        Err(e) => log::error!(
            error:% = e.to_string();
            "keeper not started; agents may outlive a killed sortie until the next start"
        ),
    }
}

/// Says at start what agents get from sortie's environment that an operator should know
/// (names only, never values): with `agent.inherit_env` the secret-looking variables and
/// sortie's own secrets it exposes; otherwise the variables the agent kind needs that are
/// withheld because they hold the tracker token or a webhook secret.
pub(super) fn warn_agent_environment(wf: &Workflow) {
    let policy = &wf.config.agent.env;
    let kind_vars = crate::registry::agent(&wf.config.agent.kind)
        .map(|d| d.env_vars)
        .unwrap_or_default();
    let vars: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    if policy.inherit_all {
        let mut exposed: Vec<&str> = vars
            .iter()
            .filter(|(k, v)| {
                crate::mask::is_secret_name(k)
                    || k.starts_with("SORTIE_WEBHOOK_SECRET_")
                    || (!v.is_empty() && policy.withheld.contains(v))
            })
            .map(|(k, _)| k.as_str())
            .collect();
        exposed.sort_unstable();
        log::warn!(
            variables:% = exposed.join(",");
            "agent.inherit_env is true: agents get sortie's whole environment, including these secrets"
        );
        return;
    }
    let mut withheld: Vec<&str> = vars
        .iter()
        .filter(|(k, v)| {
            kind_vars.iter().any(|p| crate::child_env::matches(p, k))
                && policy.verdict(kind_vars, k, v) == crate::child_env::Verdict::HoldsSortieSecret
        })
        .map(|(k, _)| k.as_str())
        .collect();
    withheld.sort_unstable();
    if !withheld.is_empty() {
        log::warn!(
            agent_kind:% = wf.config.agent.kind,
            variables:% = withheld.join(",");
            "agent variables withheld: they hold sortie's tracker token or a webhook secret; name them in agent.env to pass them anyway"
        );
    }
}

/// Startup preflight reports every problem at once; this logs and drops the ones that do not
/// stop the daemon. A missing agent program is reported but does not stop the daemon: it may be installed
/// without a config change, and meanwhile the per-tick preflight fails (no dispatch,
/// `/readyz` 503, an attention item). A sandbox that cannot start likewise (bubblewrap may
/// be installed, user namespaces allowed). A missing tracker data file likewise: it may be
/// created later, and meanwhile each poll fails and says so.
pub(super) fn log_held_back_problems(report: &mut super::validate::Report) {
    report.errors.retain(|d| {
        let consequence = match d.check.as_str() {
            crate::config::AGENT_COMMAND_CHECK => {
                "dispatch preflight failed; nothing is dispatched until it passes"
            }
            crate::config::SANDBOX_CHECK => {
                "the sandbox cannot start; nothing is dispatched until it can"
            }
            crate::config::TRACKER_DATA_FILE_CHECK => {
                "tracker data file missing; every poll fails until it exists"
            }
            _ => return true,
        };
        log::error!(check:% = d.check, error:% = d.message; "{consequence}");
        false
    });
}

/// `--log-level` and `--log-format` as typed: their values, or the exit code after saying
/// which value is not accepted.
pub(super) fn log_flags(
    level: &Option<String>,
    format: &Option<String>,
) -> Result<(Option<LogLevel>, Option<LogFormat>), i32> {
    let level = match level.as_deref().map(|l| (l, LogLevel::parse(l))) {
        Some((l, None)) => {
            return Err(fail(format!(
                "unknown log level {l:?}: accepted values are debug, info, warn, error"
            )));
        }
        Some((_, Some(v))) => Some(v),
        None => None,
    };
    let format = match format.as_deref().map(|f| (f, LogFormat::parse(f))) {
        Some((f, None)) => {
            return Err(fail(format!(
                "unknown log format {f:?}: accepted values are text, json"
            )));
        }
        Some((_, Some(v))) => Some(v),
        None => None,
    };
    Ok((level, format))
}

/// Runs sortie; returns the process exit code.
pub fn run(opts: RunOptions) -> i32 {
    // Flag values are checked before anything else.
    let (flag_level, flag_format) = match log_flags(&opts.log_level, &opts.log_format) {
        Ok(v) => v,
        Err(code) => return code,
    };

    let mut load_options = LoadOptions::from_process(opts.env_file.clone());
    load_options.env.extend(opts.env_overlay.iter().cloned());
    let wf = match load_workflow(&opts.workflow, &load_options) {
        Ok(wf) => wf,
        Err(e) => return fail(e),
    };
    let level = flag_level
        .or(wf.config.logging.level)
        .unwrap_or(LogLevel::Info);
    let format = flag_format
        .or(wf.config.logging.format)
        .unwrap_or(LogFormat::Text);
    logging::init(level, format);
    for w in &wf.warnings {
        log::warn!(check:% = w.check, field:% = w.field, message:% = w.message; "workflow warning");
    }

    let template = match PromptTemplate::parse(
        &wf.prompt_template,
        &wf.path.display().to_string(),
        wf.prompt_line_offset,
    ) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let bind = match ServerBind::resolve(
        opts.port.as_deref(),
        opts.host.as_deref(),
        &wf.config.server,
    ) {
        Ok(b) => b,
        Err(e) => return fail(e),
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);

    let mut report = super::validate::validate(&wf.path, &load_options);
    log_held_back_problems(&mut report);
    if !report.errors.is_empty() {
        let joined: Vec<String> = report.errors.iter().map(|d| d.message.clone()).collect();
        log::error!(error:% = joined.join("; "); "dispatch preflight failed");
        return fail(format!("dispatch preflight failed: {}", joined.join("; ")));
    }

    if opts.dry_run {
        let stdout = std::io::stdout();
        let mut lock = stdout.lock();
        return super::dry_run::run(&wf, &template, &mut lock);
    }

    log::info!(
        version:% = crate::build_info::VERSION,
        workflow_path:% = wf.path.display(),
        server_addr:% = format!("{}:{}", bind.host, bind.port);
        "sortie starting"
    );
    run_daemon(
        wf,
        template,
        load_options,
        bind,
        clock,
        opts.db_lock,
        format,
    )
}

fn run_daemon(
    wf: Workflow,
    template: PromptTemplate,
    load_options: LoadOptions,
    bind: ServerBind,
    clock: Arc<dyn Clock>,
    held_lock: Option<crate::store::lock::DbLock>,
    log_format: LogFormat,
) -> i32 {
    start_keeper(&wf, log_format);
    warn_agent_environment(&wf);
    adopt_orphans();
    log::info!(db_path:% = wf.config.db_path.display(); "database path resolved");
    // One daemon per database: held until this function returns (process exit). A lock the
    // caller holds on another database is released first.
    let _db_lock = match lock_database(&wf.config.db_path, held_lock) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let store = match crate::store::Store::open(&wf.config.db_path, clock.clone()) {
        Ok(s) => Arc::new(s),
        Err(e) => return fail(e),
    };
    let tracker = match adapters::build_tracker(&wf, clock.clone()) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let agent = match adapters::build_agent(&wf, clock.clone()) {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    let (prices, price_fetch) = start_prices(&wf, &clock, &store);
    absorb_lost_sessions(&store, clock.as_ref(), &prices);
    let metrics = seeded_metrics(&store);
    let workflow_path = wf.path.clone();
    let drain_budget = std::time::Duration::from_millis(wf.config.shutdown.drain_timeout_ms);
    let (mut orch, handle) = orchestrator::Orchestrator::new(orchestrator::OrchestratorDeps {
        workflow: Arc::new(wf),
        template: Arc::new(template),
        load_options,
        tracker,
        agent,
        store: store.clone(),
        clock: clock.clone(),
        metrics,
        prices,
    });

    // Before the server makes this process observable: a SIGTERM that arrives as soon as
    // `/livez` answers must drain, not kill the process with the default action.
    let inboxes: Inboxes = Arc::new(std::sync::Mutex::new(vec![handle.tx.clone()]));
    if let Err(e) = install_signal_handlers(inboxes.clone(), drain_budget) {
        return fail(format!("cannot install signal handlers: {e}"));
    }
    let server = match crate::http::start(&bind, handle.clone(), store.clone(), clock.clone()) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    orch.set_api_url(server.as_ref().map(|_| api_url(&bind)));

    start_feeds(&handle, &workflow_path);
    let essential_panicked = install_essential_panic_hook(inboxes);
    let orch_thread = match std::thread::Builder::new()
        .name("orch".into())
        .spawn(move || orch.run())
    {
        Ok(t) => t,
        Err(e) => return fail(format!("cannot start the orchestrator thread: {e}")),
    };
    log::info!("sortie started");
    // Wait for the orchestrator to finish, or for the HTTP accept loop to die (fatal: a
    // supervisor should restart sortie).
    if let Some(rx) = server.as_ref().map(|s| s.fatal_receiver()) {
        while !orch_thread.is_finished() {
            if let Ok(msg) = rx.recv_timeout(std::time::Duration::from_millis(200)) {
                log::error!(error:% = msg.to_string(); "http server stopped");
                let _ = handle.tx.send(orchestrator::OrchMsg::Shutdown);
                let _ = orch_thread.join();
                return 1;
            }
        }
    }
    let joined = orch_thread.join();
    price_fetch.stop();
    if let Some(s) = server {
        s.shutdown();
    }
    exit_code(
        joined.is_err(),
        essential_panicked.load(std::sync::atomic::Ordering::SeqCst),
    )
}

/// The database's lock: the one `held` when it guards `db_path`, else taken now; the exit
/// code after saying why it was not.
pub(super) fn lock_database(
    db_path: &Path,
    held: Option<crate::store::lock::DbLock>,
) -> Result<crate::store::lock::DbLock, i32> {
    let held = held.filter(|l| l.guards(db_path));
    held.map_or_else(|| crate::store::lock::acquire(db_path), Ok)
        .map_err(|e| {
            log::error!(
                db_path:% = db_path.display().to_string(),
                error:% = e.to_string();
                "database lock not acquired"
            );
            fail(e)
        })
}

/// Orphans of agents (a grandchild that escaped its group with `setsid`) are re-parented to
/// sortie rather than init, so they are reaped here and killed by their turn's token.
pub(super) fn adopt_orphans() {
    match crate::process_signal::orphans::become_subreaper() {
        Ok(()) => {
            if let Err(e) =
                crate::process_signal::orphans::spawn_reaper(std::time::Duration::from_secs(1))
            {
                log::warn!(error:% = e.to_string(); "reaper thread not started");
            }
        }
        Err(e) => log::warn!(error:% = e.to_string(); "not a child subreaper; orphans go to init"),
    }
}

/// The rates in force before anything is priced (the lost sessions first): the workflow's
/// token_rates, the table settings, then the copies kept by the previous process; and the
/// download thread, with the flag that stops it.
pub(super) fn start_prices(
    wf: &Workflow,
    clock: &Arc<dyn Clock>,
    store: &Arc<crate::store::Store>,
) -> (crate::pricing::PriceBoard, crate::pricing::fetch::StopFlag) {
    let prices = crate::pricing::PriceBoard::default();
    prices.set_token_rates(wf.config.token_rates.clone());
    prices.apply_settings(wf.config.price_table.clone(), clock.now_ms());
    let price_fetch = crate::pricing::fetch::StopFlag::default();
    if let Err(e) = crate::pricing::fetch::spawn(
        prices.clone(),
        clock.clone(),
        crate::store::PriceCache::new(store.writer()),
        price_fetch.clone(),
    ) {
        log::warn!(error:% = e.to_string(); "price table downloads not started");
    }
    (prices, price_fetch)
}

/// Sessions a killed process left running count toward the totals before anything reads them.
pub(super) fn absorb_lost_sessions(
    store: &crate::store::Store,
    clock: &dyn Clock,
    prices: &crate::pricing::PriceBoard,
) {
    match store
        .writer()
        .absorb_lost_sessions(clock.now_ms(), prices.current())
    {
        Ok(0) => {}
        Ok(n) => {
            log::warn!(
                count:% = n;
                "sessions lost with the previous process recorded in the totals"
            )
        }
        Err(e) => log::warn!(error:% = e.to_string(); "lost sessions not recorded"),
    }
}

/// Restart-surviving counters resume from the persisted aggregates (no cliff on restart).
pub(super) fn seeded_metrics(store: &crate::store::Store) -> Arc<crate::metrics::Metrics> {
    let seed = store
        .read_conn()
        .and_then(|r| r.aggregate_totals())
        .unwrap_or_else(|e| {
            log::warn!(
                error:% = e.to_string();
                "aggregate counters not read; metrics start at zero"
            );
            Default::default()
        });
    Arc::new(crate::metrics::Metrics::new(&seed))
}

/// The notification feed and the workflow watcher; either missing only warns.
pub(super) fn start_feeds(
    handle: &orchestrator::OrchestratorHandle,
    workflow_path: &std::path::Path,
) {
    if let Err(e) =
        crate::http::notify_feed::spawn(handle.clone(), crate::notify::Notifier::global().clone())
    {
        log::warn!(error:% = e.to_string(); "notification feed not started; no notifications");
    }
    if let Err(e) = orchestrator::watch::spawn(workflow_path, handle.tx.clone()) {
        log::warn!(
            error:% = e.to_string();
            "workflow watcher not started; relying on per-tick reload"
        );
    }
}

/// The base URL a local client reaches the server at: the bound address, or loopback when it
/// is bound to every address.
pub(super) fn api_url(bind: &ServerBind) -> String {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let host = match bind.host {
        IpAddr::V4(a) if a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(a) if a.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        other => other,
    };
    format!("http://{}", std::net::SocketAddr::new(host, bind.port))
}

/// Threads whose death leaves sortie unable to do its job: a panic in one of them shuts the
/// daemon down (agents stopped, runs recorded) and the process exits non-zero, so a service
/// manager's `Restart=on-failure` restarts it.
/// The HTTP accept loop reports its end through the server's fatal channel instead.
const ESSENTIAL_THREADS: &[&str] = &["orch", "db-writer", "tracker-ops", "watch", "agent-pipes"];

/// The process status after `orch` ended: 1 when it or another essential thread panicked
/// (the default panic exit would otherwise be a clean 0 from `main`), 0 after a drain.
pub(super) fn exit_code(orch_panicked: bool, essential_panicked: bool) -> i32 {
    if orch_panicked || essential_panicked {
        1
    } else {
        0
    }
}

/// Chains a panic hook that notices panics in [`ESSENTIAL_THREADS`]: it logs them, sets the
/// returned flag and asks `orch` to shut down. Other threads (a supervisor, an HTTP handler)
/// keep the default behaviour: their panic is printed and contained.
pub(super) fn install_essential_panic_hook(txs: Inboxes) -> Arc<std::sync::atomic::AtomicBool> {
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = flag.clone();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info);
        let current = std::thread::current();
        let Some(name) = current.name() else { return };
        if is_essential(name) {
            seen.store(true, std::sync::atomic::Ordering::SeqCst);
            log::error!(
                thread:% = name,
                panic:% = info.to_string();
                "essential thread panicked; shutting down"
            );
            tell_all(&txs, || orchestrator::OrchMsg::Shutdown);
        }
    }));
    flag
}

fn is_essential(thread_name: &str) -> bool {
    ESSENTIAL_THREADS.contains(&thread_name) || thread_name.starts_with(WORKFLOW_ORCH_PREFIX)
}

/// The orchestrator thread of one of several workflows is `orch-<name>` (one workflow's is
/// `orch`).
pub(super) const WORKFLOW_ORCH_PREFIX: &str = "orch-";

/// SIGTERM/SIGINT start a graceful shutdown; a second signal cuts the agents' SIGTERM grace
/// short (SIGKILL to every agent process group, runs still recorded, then exit); a third exits
/// at once, for an orchestrator that no longer answers.
/// The first signal also starts a watchdog that ends the process if the orchestrator has not
/// finished its drain `drain_budget` plus a margin later (for an orchestrator that never takes
/// the message; its own watchdog covers the budget it reads when it does).
pub(super) fn install_signal_handlers(
    txs: Inboxes,
    drain_budget: std::time::Duration,
) -> std::io::Result<()> {
    let send = move |msg: fn() -> orchestrator::OrchMsg| tell_all(&txs, msg);
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut seen = 0;
            for sig in signals.forever() {
                seen += 1;
                match seen {
                    1 => {
                        log::info!(
                            signal:% = sig,
                            pid:% = std::process::id();
                            "signal received, initiating shutdown"
                        );
                        send(|| orchestrator::OrchMsg::Shutdown);
                        // Never stood down: the whole process is shutting down.
                        let _ = orchestrator::spawn_shutdown_watchdog(
                            drain_budget + std::time::Duration::from_secs(10),
                        );
                    }
                    2 => {
                        log::warn!(
                            signal:% = sig;
                            "second signal received, killing agents and shutting down"
                        );
                        send(|| orchestrator::OrchMsg::ShutdownNow);
                    }
                    _ => {
                        log::warn!(signal:% = sig; "third signal received, exiting now");
                        std::process::exit(1);
                    }
                }
            }
        })?;
    Ok(())
}

/// The inboxes of the orchestrators running (one per workflow); workflows started or ended
/// while the daemon runs are added or dropped.
pub(super) type Inboxes =
    Arc<std::sync::Mutex<Vec<crossbeam_channel::Sender<orchestrator::OrchMsg>>>>;

/// Sends `msg()` to every orchestrator.
pub(super) fn tell_all(txs: &Inboxes, msg: impl Fn() -> orchestrator::OrchMsg) {
    let txs = txs.lock().unwrap_or_else(|p| p.into_inner());
    for tx in txs.iter() {
        let _ = tx.send(msg());
    }
}

/// The default workflow path.
pub fn default_workflow() -> PathBuf {
    Path::new("WORKFLOW.md").to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::{exit_code, is_essential};

    #[test]
    fn a_panic_in_an_essential_thread_exits_non_zero() {
        assert_eq!(exit_code(false, false), 0);
        assert_eq!(exit_code(true, false), 1);
        assert_eq!(exit_code(false, true), 1);
        assert_eq!(exit_code(true, true), 1);
    }

    #[test]
    fn the_hook_flags_an_essential_panic_and_asks_orch_to_shut_down() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let flag =
            super::install_essential_panic_hook(std::sync::Arc::new(std::sync::Mutex::new(vec![
                tx,
            ])));
        let panics_in = |name: &str| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(|| panic!("test panic"))
                .map(|h| h.join().is_err())
        };
        // A supervisor's panic is contained: no flag, no shutdown.
        assert!(matches!(panics_in("sup-X-1"), Ok(true)));
        assert!(!flag.load(std::sync::atomic::Ordering::SeqCst));
        assert!(rx.try_recv().is_err());
        assert!(matches!(panics_in("watch"), Ok(true)));
        assert!(flag.load(std::sync::atomic::Ordering::SeqCst));
        assert!(matches!(
            rx.try_recv(),
            Ok(crate::orchestrator::OrchMsg::Shutdown)
        ));
        let code = super::exit_code(false, flag.load(std::sync::atomic::Ordering::SeqCst));
        assert_eq!(code, 1);
    }

    #[test]
    fn the_api_url_names_a_reachable_address() {
        let bind = |host: &str| crate::config::ServerBind {
            host: host.parse().unwrap_or_else(|e| panic!("{e}")),
            port: 7678,
            explicit: false,
            allowed_hosts: Vec::new(),
            max_connections: None,
            max_connections_per_client: None,
        };
        assert_eq!(super::api_url(&bind("127.0.0.1")), "http://127.0.0.1:7678");
        assert_eq!(super::api_url(&bind("0.0.0.0")), "http://127.0.0.1:7678");
        assert_eq!(super::api_url(&bind("::")), "http://[::1]:7678");
        assert_eq!(super::api_url(&bind("10.1.2.3")), "http://10.1.2.3:7678");
    }

    #[test]
    fn essential_threads_are_named_exactly() {
        for name in ["orch", "db-writer", "tracker-ops", "watch", "agent-pipes"] {
            assert!(is_essential(name), "{name}");
        }
        for name in ["sup-orch", "evt-x", "http-0", "sse-1", "signals", "main"] {
            assert!(!is_essential(name), "{name}");
        }
    }
}
