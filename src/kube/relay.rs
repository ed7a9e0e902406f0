//! The relay: the local process that stands for an agent running as a Job. Sortie starts it in
//! place of the agent CLI (the sortie binary in a hidden mode, `<exe> __sortie-kube-run
//! <settings> -- <argv>`), so the turn loop, stall detection, cancel and the keeper treat it
//! as they treat a local agent: it creates the session's Job and Secret from its argv, stdin
//! (the prompt) and environment (the session's), copies the pod log to its stdout, ends with
//! the container's exit status, and on SIGTERM/SIGINT/SIGHUP deletes the Job (foreground
//! propagation) before it exits. A pod that cannot run ends it with a message on stderr.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::claims;
use super::client::{Group, KubeClient};
use super::error::{KubeError, RelayError};
use super::objects::{self, SessionJob};
use super::pod::{self, PodEnd};
use super::settings::{KubeSettings, WorkspaceVolume};

/// The hidden first argument of the relay mode.
pub const ARG: &str = "__sortie-kube-run";
/// The longest prompt a Secret carries (a Secret holds at most 1 MiB in all).
pub const MAX_STDIN_BYTES: u64 = 768 << 10;
/// The relay's own failure: the pod never ran the agent to an end.
pub const EXIT_RELAY_FAILED: i32 = 125;

/// What the relay's command line carries besides the argv.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RelayArgs {
    pub settings: KubeSettings,
    pub kind: String,
    pub image: String,
}

impl RelayArgs {
    /// The one argument carrying `self` (base64url JSON: no space, so `agent.command` splitting
    /// leaves it whole).
    pub fn encode(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        data_encoding::BASE64URL_NOPAD.encode(&json)
    }

    fn decode(arg: &str) -> Option<RelayArgs> {
        let bytes = data_encoding::BASE64URL_NOPAD.decode(arg.as_bytes()).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// Runs the relay when `args` start with [`ARG`]; the exit status to end with.
pub fn run_hidden(args: &[OsString]) -> Option<i32> {
    if args.first().map(|a| a.as_os_str()) != Some(ARG.as_ref()) {
        return None;
    }
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    Some(match parse(&args) {
        Some((relay, argv)) => run(&relay, argv),
        None => fail("usage: __sortie-kube-run <settings> -- <program> [args]"),
    })
}

fn parse(args: &[String]) -> Option<(RelayArgs, &[String])> {
    let relay = RelayArgs::decode(args.get(1)?)?;
    (args.get(2).map(String::as_str) == Some("--") && args.len() > 3).then(|| (relay, &args[3..]))
}

fn fail(message: &str) -> i32 {
    eprintln!("sortie-kube: error: {message}");
    EXIT_RELAY_FAILED
}

/// The variables the agent gets: the session's, without this machine's basics (the image has
/// its own) and sortie's process token; the workspace is the pod's.
fn session_env() -> Vec<(String, String)> {
    std::env::vars()
        .filter(|(k, _)| {
            !crate::child_env::is_basic(k)
                && k != crate::process_signal::orphans::TOKEN_ENV
                && objects::env_name_ok(k)
        })
        .map(|(k, v)| {
            if k == "SORTIE_WORKSPACE" {
                (k, objects::WORKSPACE_MOUNT.to_string())
            } else {
                (k, v)
            }
        })
        .collect()
}

fn read_stdin() -> Result<Option<String>, RelayError> {
    let mut buf = Vec::new();
    std::io::stdin()
        .take(MAX_STDIN_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("reading the prompt: {e}"))?;
    if buf.len() as u64 > MAX_STDIN_BYTES {
        return Err(RelayError::from(
            "the prompt is larger than a Secret can carry (768 KiB)",
        ));
    }
    Ok((!buf.is_empty()).then(|| String::from_utf8_lossy(&buf).into_owned()))
}

fn run(relay: &RelayArgs, argv: &[String]) -> i32 {
    let stdin = match read_stdin() {
        Ok(s) => s,
        Err(e) => return fail(&e.to_string()),
    };
    let client = match KubeClient::new(&relay.settings) {
        Ok(c) => Arc::new(c),
        Err(e) => return fail(&format!("kubernetes: {e}")),
    };
    if let Err(e) = room_in_namespace(&client, &relay.settings) {
        return fail(&e.to_string());
    }
    let env = session_env();
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let (issue_id, identifier, attempt) = (
        var("SORTIE_ISSUE_ID"),
        var("SORTIE_ISSUE_IDENTIFIER"),
        var("SORTIE_ATTEMPT"),
    );
    let mut job = SessionJob {
        name: objects::job_name(&identifier, attempt_or(&attempt), &suffix()),
        image: &relay.image,
        kind: &relay.kind,
        argv,
        env: &env,
        stdin: stdin.as_deref(),
        issue_id: &issue_id,
        issue_identifier: &identifier,
        attempt: attempt_or(&attempt),
        claim: None,
    };
    if relay.settings.workspace == WorkspaceVolume::Pvc {
        match claims::ensure(&client, &relay.settings, &job, &workspace_key()) {
            Ok(name) => job.claim = Some(name),
            Err(e) => return fail(&e.to_string()),
        }
    }
    let created = Arc::new(Mutex::new(Created::default()));
    watch_signals(Arc::clone(&client), Arc::clone(&created));
    match start(&client, &relay.settings, &job, &created) {
        Ok(()) => {}
        Err(e) => {
            delete_job(&client, &job.name);
            return fail(&e.to_string());
        }
    }
    let end = pod::follow(&client, &relay.settings, &job.name, &mut std::io::stdout());
    let _ = std::io::stdout().flush();
    match end {
        PodEnd::Exited(code) => code,
        PodEnd::Failed(message) => {
            delete_job(&client, &job.name);
            fail(&message)
        }
    }
}

/// The name of the issue's workspace directory on sortie's machine (the relay runs in it):
/// the key its claim is named from, as the workspace removal names it.
fn workspace_key() -> String {
    let dir = std::env::var_os("SORTIE_WORKSPACE")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default();
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| std::env::var("SORTIE_ISSUE_IDENTIFIER").unwrap_or_default())
}

fn attempt_or(a: &str) -> &str {
    if a.is_empty() { "0" } else { a }
}

#[derive(Default)]
struct Created {
    job: Option<String>,
    stopping: bool,
}

/// Creates the Job, then its Secret owned by it; a stop signal that came meanwhile deletes
/// the Job at once.
fn start(
    client: &KubeClient,
    settings: &KubeSettings,
    job: &SessionJob<'_>,
    created: &Mutex<Created>,
) -> Result<(), RelayError> {
    let jobs = client.path(Group::Batch, "jobs", None);
    let made = client
        .create(&jobs, &objects::job(settings, job))
        .map_err(|e| format!("creating the Job: {e}"))?;
    {
        let mut c = created.lock().unwrap_or_else(|p| p.into_inner());
        c.job = Some(job.name.clone());
        if c.stopping {
            delete_job(client, &job.name);
            std::process::exit(143);
        }
    }
    let uid = made
        .pointer("/metadata/uid")
        .and_then(serde_json::Value::as_str)
        .ok_or("the created Job has no uid")?;
    let secrets = client.path(Group::Core, "secrets", None);
    client
        .create(&secrets, &objects::secret(settings, job, uid))
        .map_err(|e| format!("creating the Secret: {e}"))?;
    eprintln!("sortie-kube: job {} created", job.name);
    Ok(())
}

fn delete_job(client: &KubeClient, name: &str) {
    if let Err(e) = client.delete(&client.path(Group::Batch, "jobs", Some(name))) {
        eprintln!("sortie-kube: error: deleting Job {name}: {e}");
    }
}

/// On a stop signal: delete the Job (if created) and exit as a signalled process would.
fn watch_signals(client: Arc<KubeClient>, created: Arc<Mutex<Created>>) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP]) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            let job = {
                let mut c = created.lock().unwrap_or_else(|p| p.into_inner());
                c.stopping = true;
                c.job.clone()
            };
            if let Some(name) = job {
                delete_job(&client, &name);
            }
            std::process::exit(128 + sig);
        }
    });
}

/// Refuses a new Job while the namespace holds `max_jobs_per_namespace` active sortie Jobs.
fn room_in_namespace(client: &KubeClient, settings: &KubeSettings) -> Result<(), RelayError> {
    let Some(cap) = settings.max_jobs_per_namespace else {
        return Ok(());
    };
    let selector = format!("{}={}", objects::MANAGED_BY, objects::MANAGED_BY_VALUE);
    let jobs = client
        .list(&client.path(Group::Batch, "jobs", None), &selector)
        .map_err(|e: KubeError| format!("listing Jobs: {e}"))?;
    let active = jobs.iter().filter(|j| pod::job_active(j)).count();
    if active >= cap as usize {
        return Err(RelayError(format!(
            "namespace {} already runs {active} sortie Jobs (worker.kubernetes.max_jobs_per_namespace: {cap}); the run is retried later",
            settings.namespace
        )));
    }
    Ok(())
}

fn suffix() -> String {
    let mut b = [0u8; 3];
    if getrandom::fill(&mut b).is_err() {
        let n = std::process::id().to_le_bytes();
        b.copy_from_slice(&n[..3]);
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Deletes this daemon's Jobs left by an earlier process (and their pods and Secrets); the
/// names deleted.
pub fn delete_orphans(settings: &KubeSettings) -> Result<Vec<String>, KubeError> {
    let client = KubeClient::new(settings)?;
    let selector = format!(
        "{}={},{}={}",
        objects::MANAGED_BY,
        objects::MANAGED_BY_VALUE,
        objects::DAEMON_LABEL,
        objects::label_value(&settings.daemon)
    );
    let jobs = client.list(&client.path(Group::Batch, "jobs", None), &selector)?;
    let mut deleted = Vec::new();
    for j in jobs {
        let Some(name) = j
            .pointer("/metadata/name")
            .and_then(serde_json::Value::as_str)
        else {
            continue;
        };
        client.delete(&client.path(Group::Batch, "jobs", Some(name)))?;
        deleted.push(name.to_string());
    }
    Ok(deleted)
}

impl super::settings::KubeWorker {
    /// The `agent.command` a session of `kind` runs here: the relay, then the image's command.
    /// `image` is a dispatch rule's own image for its sessions; `None` takes the kind's.
    pub fn relay_command(
        &self,
        kind: &str,
        image: Option<&str>,
        workflow_command: Option<&str>,
    ) -> Option<String> {
        let inner = self
            .commands
            .get(kind)
            .map(String::as_str)
            .or(workflow_command)?;
        let args = RelayArgs {
            settings: self.settings.clone(),
            kind: kind.to_string(),
            image: image
                .map(str::to_string)
                .unwrap_or_else(|| self.settings.image_for(kind)),
        };
        Some(format!(
            "{} {} {} -- {inner}",
            self.relay_exe.display(),
            ARG,
            args.encode()
        ))
    }
}
