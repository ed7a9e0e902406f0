//! Agent sessions as Kubernetes Jobs (`worker.kubernetes`): the settings, a small synchronous
//! API client, the Job and Secret a session creates, the per-issue workspace claim, the pod log follower, and the relay
//! process that stands for the agent on this machine.

pub mod auth;
pub mod claims;
pub mod client;
pub mod error;
pub mod logs;
pub mod objects;
pub mod pod;
pub mod relay;
pub mod settings;

pub use client::KubeClient;
pub use error::{KubeError, KubeErrorKind, RelayError};
pub use settings::{ClaimSettings, KubeAuth, KubeSettings, KubeWorker, Resources, WorkspaceVolume};
