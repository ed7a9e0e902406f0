//! `worker.kubernetes` as built: where sessions run as Jobs and how sortie reaches the API.
//! It crosses from the daemon to the relay process (`kube::relay`) as JSON on its command line,
//! so it holds no secret: credentials stay in the files it names.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How sortie authenticates to the API server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum KubeAuth {
    /// The pod's service account: `server` is the in-cluster address, the token file is read
    /// again before every request (the kubelet rotates it), the CA bundle verifies the server.
    InCluster {
        server: String,
        token_file: PathBuf,
        ca_file: PathBuf,
    },
    /// A kubeconfig file: its current context's server, CA and bearer token (inline or
    /// `tokenFile`), read when a client is built.
    Kubeconfig { path: PathBuf },
}

/// Where a session's workspace lives in its pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceVolume {
    /// An `emptyDir`: the files live as long as the pod.
    #[default]
    EmptyDir,
    /// A per-issue PersistentVolumeClaim, so continuation turns keep their files.
    Pvc,
}

/// The per-issue PersistentVolumeClaim of `workspace: pvc`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimSettings {
    /// `storageClassName`; `None` takes the cluster's default class.
    pub storage_class: Option<String>,
    /// The storage requested, a quantity (`10Gi`).
    pub size: String,
}

/// `pvc.size` when absent.
pub const DEFAULT_CLAIM_SIZE: &str = "10Gi";

impl Default for ClaimSettings {
    fn default() -> ClaimSettings {
        ClaimSettings {
            storage_class: None,
            size: DEFAULT_CLAIM_SIZE.into(),
        }
    }
}

/// Container resources, as Kubernetes quantities (`cpu: "1"`, `memory: 2Gi`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Resources {
    pub requests: BTreeMap<String, String>,
    pub limits: BTreeMap<String, String>,
}

/// The typed block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubeSettings {
    pub namespace: String,
    pub auth: KubeAuth,
    /// The image each agent kind runs, by kind; [`KubeSettings::default_image`] for the rest.
    pub images: BTreeMap<String, String>,
    /// `image`: the image of a kind not in `images` (`{kind}` and `{version}` are replaced).
    pub image: String,
    pub resources: Resources,
    /// How long a pod may stay unscheduled before its run fails.
    pub pending_timeout_ms: u64,
    pub ttl_seconds_after_finished: u32,
    /// The Job's `activeDeadlineSeconds` (the turn timeout plus the stop grace); `None` when
    /// turns have no deadline.
    pub active_deadline_seconds: Option<u64>,
    pub workspace: WorkspaceVolume,
    /// The claim of `workspace: pvc` (unused with `emptydir`).
    #[serde(default)]
    pub claim: ClaimSettings,
    /// Most sortie Jobs active at once in the namespace, every daemon's counted.
    pub max_jobs_per_namespace: Option<u32>,
    /// The `sortie.dev/daemon` label value naming this daemon's Jobs.
    pub daemon: String,
    /// The non-root user the agent container runs as.
    pub run_as_user: i64,
    /// `hooks.after_create`: run by an init container in the pod's workspace before the agent.
    pub after_create: Option<String>,
}

/// The image the block's default names for `kind` before substitution.
pub const DEFAULT_IMAGE: &str = "ghcr.io/sortie-rs/sortie-{kind}:{version}";
/// `pending_timeout_ms` when absent.
pub const DEFAULT_PENDING_TIMEOUT_MS: u64 = 300_000;
/// `ttl_seconds_after_finished` when absent.
pub const DEFAULT_TTL_SECONDS: u32 = 3_600;
/// The user the agent images run as (the sortie image's own user).
pub const DEFAULT_RUN_AS_USER: i64 = 10_001;

impl KubeSettings {
    /// The image a session of `kind` runs.
    pub fn image_for(&self, kind: &str) -> String {
        match self.images.get(kind) {
            Some(i) => i.clone(),
            None => self
                .image
                .replace("{kind}", kind)
                .replace("{version}", crate::build_info::VERSION),
        }
    }
}

/// `worker.kubernetes` as built: the settings the relay gets and the command each kind runs
/// in its image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeWorker {
    pub settings: KubeSettings,
    /// `commands`: the command line a kind's image runs, by kind (`agent.command` for the
    /// workflow's kind when absent).
    pub commands: BTreeMap<String, String>,
    /// This binary, which the relay runs as.
    pub relay_exe: PathBuf,
}
