//! `worker`: the SSH hosts agents run on, the per-host session cap and how to connect.
//!
//! A host entry that is not a usable destination, a strictness that is not one of OpenSSH's
//! three, or an `ssh_config_file` that does not exist is a load error: a daemon that
//! silently ran remote work here, or connected with looser host-key checks than written, would
//! be worse than one that refuses to start. A cap that is not an integer is ignored with a
//! warning, as the original does; a cap of 0 or less means no per-host cap.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::coerce::{coerce_int, display_value, strict_string_field, type_name};
use super::env::expand_path;
use super::error::{ConfigError, ConfigWarning};
pub use super::schema::WorkerConfig;
use crate::ssh::{SshHost, SshOptions, SshTarget, StrictHostKeyChecking};

pub(crate) fn build_worker(
    m: &Map<String, Value>,
    home: Option<&Path>,
    env: &std::collections::BTreeMap<String, String>,
    workflow_dir: &Path,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<WorkerConfig, ConfigError> {
    let options = Arc::new(SshOptions {
        strict_host_key_checking: strictness(m)?,
        config_file: config_file(m, home, env, workflow_dir)?,
        ..SshOptions::default()
    });
    let mut hosts: Vec<SshHost> = Vec::new();
    for target in targets(m)? {
        if hosts
            .iter()
            .all(|h| h.target.as_written() != target.as_written())
        {
            hosts.push(SshHost {
                target,
                options: options.clone(),
            });
        }
    }
    let sandbox = super::sandbox::build_sandbox(
        m.get("sandbox"),
        &super::sandbox::SandboxInputs {
            home,
            env,
            workflow_dir,
        },
        warnings,
    )?;
    if sandbox.enabled() && !hosts.is_empty() {
        return Err(ConfigError::field(
            "worker.sandbox",
            "the sandbox runs sessions on this machine only; remove worker.ssh_hosts or set worker.sandbox to none",
        ));
    }
    Ok(WorkerConfig {
        hosts,
        max_per_host: max_per_host(m, warnings),
        options,
        sandbox,
        kubernetes: None,
    })
}

fn targets(m: &Map<String, Value>) -> Result<Vec<SshTarget>, ConfigError> {
    let items: Vec<&Value> = match m.get("ssh_hosts") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a.iter().collect(),
        Some(v) => {
            return Err(ConfigError::field(
                "worker.ssh_hosts",
                format!("expected a list of host names, got {}", type_name(v)),
            ));
        }
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let field = format!("worker.ssh_hosts[{i}]");
            let s = v.as_str().ok_or_else(|| {
                ConfigError::field(&field, format!("expected string, got {}", type_name(v)))
            })?;
            SshTarget::parse(s).map_err(|e| ConfigError::field(&field, e.to_string()))
        })
        .collect()
}

fn strictness(m: &Map<String, Value>) -> Result<StrictHostKeyChecking, ConfigError> {
    const FIELD: &str = "worker.ssh_strict_host_key_checking";
    match strict_string_field(m, "ssh_strict_host_key_checking", FIELD)? {
        None => Ok(StrictHostKeyChecking::default()),
        Some(s) if s.trim().is_empty() => Ok(StrictHostKeyChecking::default()),
        Some(s) => StrictHostKeyChecking::parse(&s).ok_or_else(|| {
            ConfigError::field(
                FIELD,
                format!("invalid value {s:?} (expected accept-new, yes or no)"),
            )
        }),
    }
}

fn config_file(
    m: &Map<String, Value>,
    home: Option<&Path>,
    env: &std::collections::BTreeMap<String, String>,
    workflow_dir: &Path,
) -> Result<Option<PathBuf>, ConfigError> {
    const FIELD: &str = "worker.ssh_config_file";
    let Some(raw) = strict_string_field(m, "ssh_config_file", FIELD)? else {
        return Ok(None);
    };
    if raw.trim().is_empty() {
        return Ok(None);
    }
    let expanded =
        expand_path(raw.trim(), home, true, env).map_err(|e| ConfigError::field(FIELD, e))?;
    let path = workflow_dir.join(expanded);
    if !path.is_file() {
        return Err(ConfigError::field(
            FIELD,
            format!("{} is not a file", path.display()),
        ));
    }
    Ok(Some(path))
}

fn max_per_host(m: &Map<String, Value>, warnings: &mut Vec<ConfigWarning>) -> Option<u32> {
    let v = m.get("max_concurrent_agents_per_host")?;
    if v.is_null() {
        return None;
    }
    match coerce_int(v) {
        Some(n) if n > 0 => Some(u32::try_from(n).unwrap_or(u32::MAX)),
        Some(_) => None,
        None => {
            warnings.push(ConfigWarning::new(
                "invalid_value",
                "worker.max_concurrent_agents_per_host",
                format!(
                    "invalid integer value: {}; no per-host cap applies",
                    display_value(v)
                ),
            ));
            None
        }
    }
}
