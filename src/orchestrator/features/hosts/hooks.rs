//! Placing a dispatch on an SSH host, and what a session's end says about its host
//! (`hosts::pool`).

use crate::orchestrator::core::orchestrator::*;
use crate::ssh::SshHost;

/// Where a dispatch runs.
pub(crate) enum Placement {
    /// No SSH host is configured.
    Here,
    Host(SshHost),
    /// Hosts are configured and none has room (the pass's room count said otherwise).
    NoRoom,
}

impl Orchestrator {
    pub(crate) fn place(&mut self, issue: &Issue) -> Placement {
        let worker = &self.workflow.config.worker;
        if !worker.remote() {
            return Placement::Here;
        }
        let usage = self.state.host_usage();
        let pool = &mut self.features.hosts.pool;
        let store = &self.store;
        let last_host =
            || match persist::last_ssh_host(store, crate::store::IssueKey::Id, &issue.id) {
                Ok(h) => h,
                Err(e) => {
                    log::warn!(
                        issue_id:% = issue.id,
                        issue_identifier:% = issue.identifier,
                        error:% = e.to_string();
                        "last ssh host unknown"
                    );
                    None
                }
            };
        let now = self.clock.now_ms();
        let picked = pool
            .pick(worker, &usage, &issue.id, last_host, now)
            .cloned();
        match picked {
            Some(h) => {
                pool.stick(&issue.id, h.name());
                Placement::Host(h)
            }
            None => Placement::NoRoom,
        }
    }

    /// The configured host of that name ([`host_named_in`]).
    pub(crate) fn host_named(&self, name: Option<&str>) -> Option<SshHost> {
        host_named_in(&self.workflow.config.worker, name)
    }
}

/// The configured host of that name. A host no longer configured is reached with the current
/// options, so its workspaces can still be removed.
pub(crate) fn host_named_in(
    worker: &crate::config::worker::WorkerConfig,
    name: Option<&str>,
) -> Option<SshHost> {
    let name = name?;
    if let Some(h) = worker.host(name) {
        return Some(h.clone());
    }
    match crate::ssh::SshTarget::parse(name) {
        Ok(target) => Some(SshHost {
            target,
            options: worker.options.clone(),
        }),
        Err(e) => {
            log::warn!(ssh_host:% = name, error:% = e.to_string(); "ssh host unusable");
            None
        }
    }
}

/// The host an identifier's workspace lives on, from its newest run (read from the store, so
/// callable off `orch`).
pub(crate) fn workspace_host_in(
    store: &Store,
    worker: &crate::config::worker::WorkerConfig,
    identifier: &str,
) -> Option<SshHost> {
    let key = crate::store::IssueKey::Identifier;
    match persist::last_ssh_host(store, key, identifier) {
        Ok(name) => host_named_in(worker, name.as_deref()),
        Err(e) => {
            log::warn!(
                issue_identifier:% = identifier,
                error:% = e.to_string();
                "last ssh host unknown"
            );
            None
        }
    }
}
