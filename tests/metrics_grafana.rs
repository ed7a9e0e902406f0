//! The example Grafana dashboard queries only metric families the daemon exposes.

use std::collections::BTreeSet;

use sortie::domain::RunStatus;
use sortie::metrics::{GaugeValues, Metrics};
use sortie::store::AggregateTotals;

/// Family names (from `# TYPE` lines) plus the series names histograms add.
fn exposed_names() -> BTreeSet<String> {
    let m = Metrics::new(&AggregateTotals::default());
    // Families with free-form labels have no series until first used.
    m.tool_call("Read", "success");
    m.self_review_session("pass");
    m.self_review_verification("make test", 1.0);
    m.worker_exit(RunStatus::Succeeded, 1.0);
    let text = m.render(&GaugeValues::default());
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        if parts.next() == Some("#") && parts.next() == Some("TYPE") {
            let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
                continue;
            };
            names.insert(name.to_string());
            if kind == "histogram" {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
        }
    }
    names
}

fn exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr", serde_json::Value::String(s)) => out.push(s.clone()),
                    _ => exprs(v, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|i| exprs(i, out)),
        _ => {}
    }
}

#[test]
fn grafana_dashboard_uses_only_exposed_metrics() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/grafana/sortie.json");
    let text = std::fs::read_to_string(path).expect("read dashboard");
    let dash: serde_json::Value = serde_json::from_str(&text).expect("dashboard is JSON");
    let mut found = Vec::new();
    exprs(&dash, &mut found);
    assert!(
        found.len() >= 10,
        "dashboard has only {} queries",
        found.len()
    );
    let exposed = exposed_names();
    let mut used = BTreeSet::new();
    for e in &found {
        let bytes: Vec<char> = e.chars().collect();
        let mut i = 0;
        while i < bytes.len() {
            let rest: String = bytes[i..].iter().collect();
            if rest.starts_with("sortie_") && (i == 0 || !bytes[i - 1].is_alphanumeric()) {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                i += name.len();
                used.insert(name);
            } else {
                i += 1;
            }
        }
    }
    for name in &used {
        assert!(
            exposed.contains(name),
            "dashboard queries unknown metric {name}"
        );
    }
    // The core families are on the dashboard.
    for name in [
        "sortie_sessions_running",
        "sortie_tokens_total",
        "sortie_dispatches_total",
        "sortie_worker_exits_total",
        "sortie_retries_total",
        "sortie_poll_duration_seconds_bucket",
    ] {
        assert!(used.contains(name), "dashboard lacks {name}");
    }
}
