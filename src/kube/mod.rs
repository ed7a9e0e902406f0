//! Agent sessions as Kubernetes Jobs (`worker.kubernetes`): the settings, a small synchronous
//! API client, the Job and Secret a session creates, the pod log follower, and the relay
//! process that stands for the agent on this machine.

pub mod auth;
pub mod client;
pub mod logs;
pub mod objects;
pub mod pod;
pub mod relay;
pub mod settings;

pub use client::{KubeClient, KubeError, KubeErrorKind};
pub use settings::{KubeAuth, KubeSettings, Resources, WorkspaceVolume};
