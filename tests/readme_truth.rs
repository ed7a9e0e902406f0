//! The README's statements about what this build has, checked against the build: the tracker
//! and agent kinds the configuration table lists are the ones the binary supports; the
//! prompt's status-file section the README documents is what `--dry-run` shows is sent; the
//! examples the Agents table names exist and run that kind; the tested agent CLI versions are
//! the ones the install script pins, and the Node.js versions the README states are the ones
//! the installed packages declare.

mod common;

use common::{Setup, issues, mock_workflow};

const README: &str = include_str!("../README.md");

/// The backticked words of the README line that starts with `prefix`.
fn backticked(prefix: &str) -> Vec<String> {
    let line = README
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("README has no line starting {prefix:?}"));
    let rest = &line[prefix.len()..];
    rest.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The kinds a `validate` error lists after "(supported: …)".
fn supported(stderr: &str, what: &str) -> Vec<String> {
    let line = stderr
        .lines()
        .find(|l| l.contains(&format!("{what} kind \"nope\" is not supported")))
        .unwrap_or_else(|| panic!("{stderr}"));
    let list = line
        .split("(supported: ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .unwrap_or_default();
    let mut kinds: Vec<String> = list.split(", ").map(str::to_string).collect();
    kinds.sort();
    kinds
}

#[test]
fn the_configuration_table_lists_the_kinds_this_build_has() {
    let s = Setup::new(
        "---\ntracker: {kind: nope, active_states: [To Do]}\nagent: {kind: nope}\n---\nWork.\n",
        "[]",
    );
    let out = common::sortie_command()
        .current_dir(s.path())
        .args(["validate", "WORKFLOW.md"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut trackers = backticked("| `tracker.kind` | required |");
    trackers.sort();
    assert_eq!(
        trackers,
        supported(&stderr, "tracker"),
        "README tracker.kind row"
    );
    let mut agents = backticked("| `agent.kind` | `claude-code` |");
    agents.sort();
    agents.dedup();
    assert_eq!(agents, supported(&stderr, "agent"), "README agent.kind row");
}

#[test]
fn the_documented_prompt_section_is_what_the_first_turn_sends() {
    let s = Setup::new(&mock_workflow("", ""), &issues(&[("1", "T-1", "To Do")]));
    let out = common::sortie_command()
        .current_dir(s.path())
        .args(["--dry-run", "WORKFLOW.md"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("## Stopping early: the `.sortie/status` file"),
        "{stdout}"
    );
    assert!(README.contains("`## Stopping early: the .sortie/status file`"));
    let section = README
        .split("### What each turn's prompt is")
        .nth(1)
        .and_then(|s| s.split("\n### ").next())
        .unwrap_or_else(|| panic!("README has no prompt section"));
    for token in ["blocked", "needs-human-review", "no-change-needed"] {
        assert!(stdout.contains(&format!("`{token}`")), "{token}: {stdout}");
        assert!(section.contains(&format!("`{token}`")), "{token}");
    }
}

#[test]
fn the_agents_table_names_an_example_of_each_kind() {
    let table = README
        .split("| kind | runs | continuity | token figures | example |")
        .nth(1)
        .unwrap_or_else(|| panic!("README has no agents table"));
    let rows: Vec<&str> = table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    assert_eq!(rows.len(), sortie::registry::AGENTS.len(), "{rows:?}");
    for row in rows {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let kind = cells[1].trim_matches('`');
        let example = cells[5]
            .split('`')
            .nth(1)
            .unwrap_or_else(|| panic!("{row}"));
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(example);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{example}: {e}"));
        let front = text.split("---").nth(1).unwrap_or_default();
        let doc: serde_yaml::Value = serde_yaml::from_str(front).unwrap();
        assert_eq!(doc["agent"]["kind"].as_str(), Some(kind), "{example}");
        if doc["tracker"]["kind"].as_str() == Some("file") {
            let dir = path.parent().unwrap();
            assert!(
                dir.join("issues.json").is_file(),
                "{example} has no issues.json"
            );
        }
    }
}

/// `"<package>@<version>"` pins of the install script.
fn pins() -> Vec<(String, String)> {
    include_str!("../scripts/agent-clis-install.sh")
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix('"')?
                .strip_suffix('"')
                .map(str::to_string)
        })
        .filter_map(|p| {
            let at = p.rfind('@').filter(|i| *i > 0)?;
            Some((p[..at].to_string(), p[at + 1..].to_string()))
        })
        .collect()
}

#[test]
fn the_tested_cli_versions_and_node_requirements_match_the_packages() {
    let pins = pins();
    assert_eq!(pins.len(), 5, "{pins:?}");
    let modules =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/agent-clis/node_modules");
    for (package, version) in &pins {
        let row = README
            .lines()
            .find(|l| l.starts_with('|') && l.contains(&format!("`{package}@{version}`")))
            .unwrap_or_else(|| panic!("README's Node table has no row for {package}@{version}"));
        let flowing = README.replace('\n', " ");
        assert!(
            flowing.contains(&format!("{version} (`{package}`)")),
            "{package}"
        );
        let manifest = modules.join(package).join("package.json");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            assert!(std::env::var_os("CI").is_none(), "{package} not installed");
            eprintln!("SKIP engines of {package}: not installed (scripts/agent-clis-install.sh)");
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["version"], version.as_str(), "{package}");
        let node = row.split('|').map(str::trim).nth(3).unwrap_or_default();
        match v["engines"]["node"].as_str() {
            Some(range) => {
                let major = range
                    .trim_start_matches(">=")
                    .split('.')
                    .next()
                    .unwrap_or_default()
                    .to_string();
                assert!(
                    node.starts_with(&format!("≥ {major}")),
                    "{package}: {range} vs {row}"
                );
            }
            None => assert!(node.starts_with("none declared"), "{package}: {row}"),
        }
    }
}
