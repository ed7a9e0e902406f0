//! Where the HTTP server binds: the `--port`/`--host` flags over `server.port`/`server.host`
//! over the defaults. Resolved here, below both the command line that reads the flags and the
//! server that binds, so neither has to import the other.

use std::net::IpAddr;

use super::ServerConfig;

/// Default HTTP port.
pub const DEFAULT_PORT: u16 = 7678;

/// The resolved bind address, and whether the port was chosen explicitly (an explicit port
/// that cannot be bound is an error; the busy default port only disables the server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerBind {
    pub host: IpAddr,
    pub port: u16,
    pub explicit: bool,
    /// `server.allowed_hosts` (lower case, without port).
    pub allowed_hosts: Vec<String>,
    /// `server.max_connections`; `None` is the server's default.
    pub max_connections: Option<usize>,
    /// `server.max_connections_per_client`; `None` is the server's default.
    pub max_connections_per_client: Option<usize>,
}

/// A `--port` or `--host` flag that does not parse, as typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindFlagError {
    Port(String),
    Host(String),
}

impl std::fmt::Display for BindFlagError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BindFlagError::Port(p) => {
                write!(f, "invalid port {p:?}: must be an integer from 0 to 65535")
            }
            BindFlagError::Host(h) => write!(f, "invalid host {h:?}: must be an IP address"),
        }
    }
}

impl std::error::Error for BindFlagError {}

impl ServerBind {
    /// Flags (raw text, as typed) win over the workflow's `server` block, which wins over the
    /// defaults (127.0.0.1:7678). A flag that does not parse is an error naming it.
    pub fn resolve(
        flag_port: Option<&str>,
        flag_host: Option<&str>,
        server: &ServerConfig,
    ) -> Result<ServerBind, BindFlagError> {
        let flag_port = flag_port
            .map(|p| {
                p.trim()
                    .parse::<u16>()
                    .map_err(|_| BindFlagError::Port(p.to_string()))
            })
            .transpose()?;
        let flag_host = flag_host
            .map(|h| {
                h.trim()
                    .parse::<IpAddr>()
                    .map_err(|_| BindFlagError::Host(h.to_string()))
            })
            .transpose()?;
        Ok(ServerBind {
            host: flag_host
                .or(server.host)
                .unwrap_or(IpAddr::from([127, 0, 0, 1])),
            port: flag_port.or(server.port).unwrap_or(DEFAULT_PORT),
            explicit: flag_port.is_some() || server.port.is_some(),
            allowed_hosts: server.allowed_hosts.clone(),
            max_connections: server.max_connections,
            max_connections_per_client: server.max_connections_per_client,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_over_the_workflow_which_wins_over_defaults() {
        let none = ServerConfig::default();
        let d = ServerBind::resolve(None, None, &none).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((d.port, d.explicit), (DEFAULT_PORT, false));
        assert_eq!(d.host, IpAddr::from([127, 0, 0, 1]));
        let wf = ServerConfig {
            port: Some(9000),
            host: Some(IpAddr::from([0, 0, 0, 0])),
            ..ServerConfig::default()
        };
        let w = ServerBind::resolve(None, None, &wf).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((w.port, w.explicit), (9000, true));
        let f =
            ServerBind::resolve(Some(" 9090 "), Some("::1"), &wf).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((f.port, f.host.to_string().as_str()), (9090, "::1"));
    }

    #[test]
    fn bad_flags_name_the_value() {
        let none = ServerConfig::default();
        let e = ServerBind::resolve(Some("70000"), None, &none).err();
        assert!(e.is_some_and(|e| e.to_string().contains("\"70000\"")));
        let e = ServerBind::resolve(None, Some("localhost"), &none).err();
        assert!(e.is_some_and(|e| e.to_string().contains("must be an IP address")));
    }

    fn server_block(yaml: &str) -> Result<ServerConfig, String> {
        let text = format!(
            "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\nserver: {yaml}\n---\nHello\n"
        );
        let opts = crate::config::LoadOptions {
            env_file: None,
            env: Default::default(),
            cwd: std::path::PathBuf::from("/run/cwd"),
            home: None,
        };
        crate::config::parse_workflow(&text, std::path::Path::new("/run/cwd/WORKFLOW.md"), &opts)
            .map(|w| w.config.server)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn allowed_hosts_and_max_connections_are_read_and_checked() {
        let s = server_block(
            "{allowed_hosts: [Sortie.Internal, '10.0.0.5', '[::1]'], max_connections: 64}",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.allowed_hosts, ["sortie.internal", "10.0.0.5", "[::1]"]);
        assert_eq!(s.max_connections, Some(64));
        let b = ServerBind::resolve(None, None, &s).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(b.allowed_hosts, s.allowed_hosts);
        assert_eq!(b.max_connections, Some(64));
        for (yaml, want) in [
            (
                "{allowed_hosts: 'a.example'}",
                "server.allowed_hosts: must be a list",
            ),
            (
                "{allowed_hosts: ['a.example:80']}",
                "server.allowed_hosts: invalid host name",
            ),
            (
                "{allowed_hosts: [3]}",
                "server.allowed_hosts: invalid host name",
            ),
            (
                "{max_connections: 0}",
                "server.max_connections: invalid value: 0",
            ),
            (
                "{max_connections: '9'}",
                "server.max_connections: invalid value",
            ),
            (
                "{max_connections_per_client: 0}",
                "server.max_connections_per_client: invalid value: 0 (must be an integer from 1 to 100000)",
            ),
            (
                "{max_connections_per_client: [3]}",
                "server.max_connections_per_client: invalid value",
            ),
            (
                "{max_connections: 64, max_connections_per_client: 65}",
                "server.max_connections_per_client: 65 is more than server.max_connections (64)",
            ),
        ] {
            let e = server_block(yaml).err().unwrap_or_default();
            assert!(e.contains(want), "{yaml}: {e}");
        }
    }
}
