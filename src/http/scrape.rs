//! `GET /metrics`: the Prometheus text exposition. Counters come from [`crate::metrics`]; the
//! gauges are taken from the orchestrator's published snapshot (and the webhook body budget)
//! at scrape time, so a scrape never waits on the orchestrator.

use tiny_http::{Request, Response};

use super::AppState;
use super::respond::header;

pub fn serve(state: &AppState, req: Request) {
    let mut body = render(state);
    body.push_str(&crate::notify::status::render_metrics());
    respond(req, body);
}

/// One workflow's series.
fn render(state: &AppState) -> String {
    let snap = state.orch.snapshot();
    let gauges = snap.gauge_values(state.clock.now_ms());
    state.orch.metrics.set_spend(&snap.spend_gauges());
    state
        .orch
        .metrics
        .set_webhook_body_bytes(state.webhooks.body_bytes());
    state.orch.metrics.render(&gauges)
}

/// With several workflows: every family once, each workflow's series in it with a
/// `workflow` label (names are letters, digits, `-`, `_` and `.`, so they need no escaping).
/// The series the daemon keeps for itself (HTTP refusals, webhook bodies) are counted by the
/// first workflow.
pub fn serve_many(served: &super::workflows::Served, req: Request) {
    let mut families: Vec<(String, String, Vec<String>)> = Vec::new();
    for (name, _, state) in &served.workflows() {
        merge_labelled(&mut families, &render(state), name);
    }
    let mut body = String::new();
    for (_, head, samples) in families {
        body.push_str(&head);
        for line in samples {
            body.push_str(&line);
            body.push('\n');
        }
    }
    body.push_str(&crate::notify::status::render_metrics());
    respond(req, body);
}

/// Adds one workflow's exposition to `families` (name, HELP/TYPE lines, samples), in the
/// order families first appear.
fn merge_labelled(families: &mut Vec<(String, String, Vec<String>)>, text: &str, workflow: &str) {
    let mut current: Option<usize> = None;
    for line in text.lines() {
        if let Some(rest) = line
            .strip_prefix("# HELP ")
            .or_else(|| line.strip_prefix("# TYPE "))
        {
            let name = rest.split(' ').next().unwrap_or("");
            let at = match families.iter().position(|f| f.0 == name) {
                Some(i) => i,
                None => {
                    families.push((name.to_string(), String::new(), Vec::new()));
                    families.len() - 1
                }
            };
            if current != Some(at) || families[at].2.is_empty() {
                let head = &mut families[at].1;
                if !head.contains(line) {
                    head.push_str(line);
                    head.push('\n');
                }
            }
            current = Some(at);
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let labelled = with_label(line, workflow);
        match current {
            Some(i) => families[i].2.push(labelled),
            None => families.push((String::new(), String::new(), vec![labelled])),
        }
    }
}

/// `name{a="b"} 1` → `name{workflow="w",a="b"} 1`; `name 1` → `name{workflow="w"} 1`.
fn with_label(sample: &str, workflow: &str) -> String {
    let name_end = sample.find(['{', ' ']).unwrap_or(sample.len());
    let (name, rest) = sample.split_at(name_end);
    match rest.strip_prefix('{') {
        Some(labels) if labels.starts_with('}') => {
            format!("{name}{{workflow=\"{workflow}\"{labels}")
        }
        Some(labels) => format!("{name}{{workflow=\"{workflow}\",{labels}"),
        None => format!("{name}{{workflow=\"{workflow}\"}}{rest}"),
    }
}

fn respond(req: Request, body: String) {
    let mut resp = Response::from_data(body.into_bytes());
    for h in [
        header("Content-Type", crate::metrics::CONTENT_TYPE),
        header("Cache-Control", "no-store"),
        header("X-Content-Type-Options", "nosniff"),
    ]
    .into_iter()
    .flatten()
    {
        resp.add_header(h);
    }
    let _ = req.respond(resp);
}

#[cfg(test)]
mod tests {
    use super::{merge_labelled, with_label};

    #[test]
    fn samples_get_the_workflow_label() {
        assert_eq!(with_label("a_total 3", "w"), "a_total{workflow=\"w\"} 3");
        assert_eq!(
            with_label("a_bucket{le=\"1\"} 3", "w"),
            "a_bucket{workflow=\"w\",le=\"1\"} 3"
        );
        assert_eq!(with_label("a{} 3", "w"), "a{workflow=\"w\"} 3");
    }

    #[test]
    fn families_appear_once_with_every_workflow_in_them() {
        let text = "# HELP a_total A.\n# TYPE a_total counter\na_total 1\n# HELP b B.\n# TYPE b gauge\nb{k=\"v\"} 2\n";
        let mut f = Vec::new();
        merge_labelled(&mut f, text, "x");
        merge_labelled(&mut f, text, "y");
        let out: String = f
            .into_iter()
            .map(|(_, h, s)| format!("{h}{}\n", s.join("\n")))
            .collect();
        assert_eq!(
            out,
            "# HELP a_total A.\n# TYPE a_total counter\na_total{workflow=\"x\"} 1\na_total{workflow=\"y\"} 1\n# HELP b B.\n# TYPE b gauge\nb{workflow=\"x\",k=\"v\"} 2\nb{workflow=\"y\",k=\"v\"} 2\n"
        );
    }
}
