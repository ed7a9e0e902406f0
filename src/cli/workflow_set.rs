//! The workflows a daemon of several runs, while it runs: each one's orchestrator thread,
//! built over its scope of the shared database and put under the shared boards (the agent
//! cap, the spend ceilings). Workflow files added to a `--workflows` folder are started,
//! removed ones drained (`cli::workflow_dir`); a finished orchestrator is joined and no longer
//! served.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};

use crate::clock::Clock;
use crate::config::daemon::{self, WorkflowSource};
use crate::config::{LoadOptions, ServerBind, Workflow, load_workflow};
use crate::http::workflows::Served;
use crate::orchestrator::core::slots::{DaemonSlots, SlotBroker};
use crate::orchestrator::features::spend::daemon::DaemonSpend;
use crate::orchestrator::{self, OrchMsg, adapters};
use crate::prompt::PromptTemplate;

use super::run as single;
use super::workflow_dir::FolderChange;

/// One workflow ready to run: loaded, named, its prompt parsed and its preflight passed.
pub struct Loaded {
    pub source: WorkflowSource,
    pub workflow: Workflow,
    pub template: PromptTemplate,
}

/// One workflow: loaded, named, prompt parsed, preflight passed. On failure, the name when
/// it is known and the error.
pub fn load_one(
    path: &std::path::Path,
    load_options: &LoadOptions,
) -> Result<Loaded, (Option<String>, String)> {
    let wf = load_workflow(path, load_options).map_err(|e| (None, e.to_string()))?;
    let name = daemon::workflow_name(&wf).map_err(|e| (None, e.to_string()))?;
    let named = |e: String| (Some(name.clone()), e);
    let template = PromptTemplate::parse(
        &wf.prompt_template,
        &wf.path.display().to_string(),
        wf.prompt_line_offset,
    )
    .map_err(|e| named(e.to_string()))?;
    let mut report = super::validate::validate(&wf.path, load_options);
    single::log_held_back_problems(&mut report);
    if !report.errors.is_empty() {
        let joined: Vec<String> = report.errors.iter().map(|d| d.message.clone()).collect();
        return Err(named(format!(
            "dispatch preflight failed: {}",
            joined.join("; ")
        )));
    }
    Ok(Loaded {
        source: WorkflowSource {
            name: name.clone(),
            path: wf.path.clone(),
        },
        workflow: wf,
        template,
    })
}

/// Why a workflow could not be started.
#[derive(Debug)]
pub enum StartError {
    /// Its tracker or agent adapter could not be built.
    Adapter { workflow: String, message: String },
    /// Its orchestrator thread could not be started.
    Thread {
        workflow: String,
        error: std::io::Error,
    },
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Adapter { workflow, message } => {
                write!(f, "workflow {workflow}: {message}")
            }
            StartError::Thread { workflow, error } => {
                write!(
                    f,
                    "cannot start the orchestrator thread of {workflow}: {error}"
                )
            }
        }
    }
}

impl std::error::Error for StartError {}

/// How often the loop looks for orchestrators that ended.
const REAP_EVERY: Duration = Duration::from_millis(200);

/// What every workflow is built with.
pub struct Context {
    /// A handle on the shared database; each workflow gets its own scope of it.
    pub store: crate::store::Store,
    pub clock: Arc<dyn Clock>,
    pub load_options: LoadOptions,
    pub broker: Option<SlotBroker>,
    pub spend: Option<DaemonSpend>,
    pub bind: ServerBind,
}

/// A workflow's orchestrator, built, not started.
pub struct Built {
    pub name: String,
    pub path: PathBuf,
    pub orch: orchestrator::Orchestrator,
    pub handle: orchestrator::OrchestratorHandle,
    pub store: Arc<crate::store::Store>,
    price_fetch: crate::pricing::fetch::StopFlag,
}

impl Built {
    /// What the HTTP server needs of it.
    pub fn served(&self) -> crate::http::ServedWorkflow {
        crate::http::ServedWorkflow {
            name: self.name.clone(),
            path: self.path.display().to_string(),
            orch: self.handle.clone(),
            store: self.store.clone(),
        }
    }
}

/// One workflow's running orchestrator.
struct Running {
    name: String,
    path: PathBuf,
    tx: Sender<OrchMsg>,
    thread: std::thread::JoinHandle<()>,
    price_fetch: crate::pricing::fetch::StopFlag,
    /// Its file left the folder: it is draining.
    draining: bool,
}

/// How the daemon ended.
pub struct Ended {
    pub http_died: bool,
    pub panicked: bool,
}

/// The running workflows.
pub struct WorkflowSet {
    ctx: Context,
    running: Vec<Running>,
    /// Files that did not load → the name they were listed under.
    left_out: BTreeMap<PathBuf, String>,
    served: Option<Arc<Served>>,
    inboxes: single::Inboxes,
    panicked: bool,
}

impl WorkflowSet {
    pub fn new(
        ctx: Context,
        served: Option<Arc<Served>>,
        inboxes: single::Inboxes,
        left_out: BTreeMap<PathBuf, String>,
    ) -> WorkflowSet {
        WorkflowSet {
            ctx,
            running: Vec::new(),
            left_out,
            served,
            inboxes,
            panicked: false,
        }
    }

    /// Builds one workflow's orchestrator over its scope of the shared database. The threads
    /// started on the way (tracker lanes, price fetch) log under the workflow's name.
    pub fn build(ctx: &Context, l: Loaded) -> Result<Built, StartError> {
        crate::log_field::set_thread_workflow(Some(l.source.name.as_str().into()));
        let built = Self::build_named(ctx, l);
        crate::log_field::set_thread_workflow(None);
        built
    }

    fn build_named(ctx: &Context, l: Loaded) -> Result<Built, StartError> {
        let name = l.source.name.clone();
        let in_workflow = |e: &dyn std::fmt::Display| StartError::Adapter {
            workflow: name.clone(),
            message: e.to_string(),
        };
        let store = Arc::new(ctx.store.scoped(&name));
        let tracker =
            adapters::build_tracker(&l.workflow, ctx.clock.clone()).map_err(|e| in_workflow(&e))?;
        let agent =
            adapters::build_agent(&l.workflow, ctx.clock.clone()).map_err(|e| in_workflow(&e))?;
        let (prices, price_fetch) = single::start_prices(&l.workflow, &ctx.clock, &store);
        single::absorb_lost_sessions(&store, ctx.clock.as_ref(), &prices);
        let metrics = single::seeded_metrics(&store);
        let path = l.workflow.path.clone();
        let (mut orch, handle) = orchestrator::Orchestrator::new(orchestrator::OrchestratorDeps {
            workflow: Arc::new(l.workflow),
            template: Arc::new(l.template),
            load_options: ctx.load_options.clone(),
            tracker,
            agent,
            store: store.clone(),
            clock: ctx.clock.clone(),
            metrics,
            prices,
        });
        orch.set_store_shared();
        if let Some(s) = &ctx.spend {
            orch.set_daemon_spend(s.for_workflow(&name));
        }
        if let Some(b) = &ctx.broker {
            orch.set_daemon_slots(DaemonSlots {
                broker: b.clone(),
                workflow: name.clone(),
            });
        }
        Ok(Built {
            name,
            path,
            orch,
            handle,
            store,
            price_fetch,
        })
    }

    /// Starts a built workflow's watcher and orchestrator thread (already served when
    /// `announced`).
    pub fn launch(&mut self, b: Built, announced: bool) -> Result<(), StartError> {
        let Built {
            name,
            path,
            mut orch,
            handle,
            store,
            price_fetch,
        } = b;
        orch.set_api_url(
            self.served
                .is_some()
                .then(|| single::api_url(&self.ctx.bind)),
        );
        if let Err(e) = orchestrator::watch::spawn(&path, handle.tx.clone()) {
            log::warn!(
                workflow:% = name,
                error:% = e.to_string();
                "workflow watcher not started; relying on per-tick reload"
            );
        }
        let tx = handle.tx.clone();
        let thread = std::thread::Builder::new()
            .name(format!("{}{}", single::WORKFLOW_ORCH_PREFIX, name))
            .spawn({
                let workflow = Some(name.as_str().into());
                move || {
                    crate::log_field::set_thread_workflow(workflow);
                    orch.run()
                }
            })
            .map_err(|error| StartError::Thread {
                workflow: name.clone(),
                error,
            })?;
        if !announced {
            self.inboxes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(tx.clone());
            if let Some(s) = &self.served {
                s.add(crate::http::ServedWorkflow {
                    name: name.clone(),
                    path: path.display().to_string(),
                    orch: handle,
                    store,
                });
            }
        }
        self.running.push(Running {
            name,
            path,
            tx,
            thread,
            price_fetch,
            draining: false,
        });
        Ok(())
    }

    /// Runs until every orchestrator has ended (after a signal, or the HTTP accept loop's
    /// death), applying the folder's changes meanwhile.
    pub fn supervise(
        mut self,
        fatal: Option<Receiver<String>>,
        folder: Option<Receiver<FolderChange>>,
    ) -> Ended {
        let fatal = fatal.unwrap_or_else(crossbeam_channel::never);
        let mut folder = folder.unwrap_or_else(crossbeam_channel::never);
        let mut http_died = false;
        loop {
            self.reap();
            if self.running.is_empty() {
                break;
            }
            crossbeam_channel::select! {
                recv(fatal) -> msg => if let Ok(msg) = msg {
                    log::error!(error:% = msg; "http server stopped");
                    http_died = true;
                    single::tell_all(&self.inboxes, || OrchMsg::Shutdown);
                },
                recv(folder) -> change => match change {
                    Ok(c) if !http_died => self.apply(c),
                    Ok(_) => {}
                    Err(_) => folder = crossbeam_channel::never(),
                },
                default(REAP_EVERY) => {}
            }
        }
        Ended {
            http_died,
            panicked: self.panicked,
        }
    }

    fn apply(&mut self, change: FolderChange) {
        match change {
            FolderChange::Added(p) => self.start_file(&p),
            FolderChange::Removed(p) => self.drain_file(&p),
            FolderChange::Changed(p) if self.left_out.contains_key(&p) => self.start_file(&p),
            FolderChange::Changed(_) => {}
        }
    }

    /// Loads and starts a workflow file; one that does not load is listed with its reason.
    fn start_file(&mut self, path: &Path) {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let outcome = load_one(path, &self.ctx.load_options)
            .and_then(|l| self.check_free(l))
            .and_then(|l| Self::build(&self.ctx, l).map_err(|e| (None, e.to_string())))
            .and_then(|b| {
                let name = b.name.clone();
                self.launch(b, false)
                    .map(|()| name)
                    .map_err(|e| (None, e.to_string()))
            });
        match outcome {
            Ok(name) => {
                self.left_out.remove(path);
                log::info!(workflow:% = name, workflow_path:% = path.display(); "workflow added");
            }
            Err((name, error)) => {
                let name = name.unwrap_or(stem);
                log::error!(
                    workflow:% = name,
                    workflow_path:% = path.display(),
                    error:% = error;
                    "workflow not loaded; the others run"
                );
                self.left_out.insert(path.to_path_buf(), name.clone());
                if let Some(s) = &self.served {
                    s.set_left_out(crate::http::LeftOutWorkflow {
                        name,
                        path: path.display().to_string(),
                        error,
                    });
                }
            }
        }
    }

    /// Refuses a name another running workflow has.
    fn check_free(&self, l: Loaded) -> Result<Loaded, (Option<String>, String)> {
        match self.running.iter().find(|r| r.name == l.source.name) {
            Some(r) => Err((
                Some(l.source.name.clone()),
                format!(
                    "{}",
                    crate::config::daemon::DaemonConfigError::DuplicateName {
                        name: l.source.name.clone(),
                        first: r.path.clone(),
                        second: l.source.path.clone(),
                    }
                ),
            )),
            None => Ok(l),
        }
    }

    /// A workflow file left the folder: its orchestrator drains (its sessions are stopped and
    /// recorded, as at shutdown). The last workflow is kept.
    fn drain_file(&mut self, path: &Path) {
        if let Some(name) = self.left_out.remove(path) {
            if let Some(s) = &self.served {
                s.remove(&name);
            }
            return;
        }
        let live = self.running.iter().filter(|r| !r.draining).count();
        let Some(r) = self
            .running
            .iter_mut()
            .find(|r| r.path == path && !r.draining)
        else {
            return;
        };
        if live <= 1 {
            log::warn!(
                workflow:% = r.name;
                "the last workflow's file was removed; it keeps running until sortie stops"
            );
            return;
        }
        log::info!(workflow:% = r.name; "workflow file removed; draining the workflow");
        r.draining = true;
        let _ = r.tx.send(OrchMsg::Shutdown);
    }

    /// Joins the orchestrators that ended and stops serving them.
    fn reap(&mut self) {
        let (done, live): (Vec<Running>, Vec<Running>) = std::mem::take(&mut self.running)
            .into_iter()
            .partition(|r| r.thread.is_finished());
        self.running = live;
        for r in done {
            self.panicked |= r.thread.join().is_err();
            r.price_fetch.stop();
            self.inboxes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|tx| !tx.same_channel(&r.tx));
            // At shutdown every workflow stays served until the server stops.
            if r.draining {
                if let Some(s) = &self.served {
                    s.remove(&r.name);
                }
                if let Some(spend) = &self.ctx.spend {
                    spend.forget(&r.name);
                }
                log::info!(workflow:% = r.name; "workflow drained and removed");
            }
        }
    }
}
