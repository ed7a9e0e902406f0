//! `sortie validate [--format text|json] [WORKFLOW.md]`: load, typed config, template parse
//! and lint, config preflight (including whether this build has the named adapter kinds),
//! the tracker's data file, tracker and forge construction, workspace root writable. Never
//! opens the database or starts anything, so it is safe to run beside a live daemon.
//!
//! Text output, on stderr: misspelt and unknown keys first (a typo such as `agnet` is often
//! the cause of the errors below it), then the errors, then the other warnings, each once as
//! `<severity>: <check>: <message>`; on success a last line
//! `ok: <workflow> — tracker …, agent …, N warnings`.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::config::{LoadOptions, load_workflow};
use crate::prompt::PromptTemplate;

use super::args::ValidateArgs;

/// One diagnostic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub check: String,
    pub message: String,
}

/// All findings of one validation.
#[derive(Debug, Default)]
pub struct Report {
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
    /// What the workflow runs, when it loaded: `tracker …, agent …`.
    pub summary: Option<String>,
}

/// The warning check of a key this build does not know (often a typo).
const UNKNOWN_KEY_CHECK: &str = "unknown_key";

fn diag(check: impl Into<String>, message: impl Into<String>) -> Diagnostic {
    Diagnostic {
        check: check.into(),
        message: crate::mask::mask(&message.into()),
    }
}

/// Validates a workflow file (pure apart from reading files and probing the workspace root).
pub fn validate(path: &std::path::Path, opts: &LoadOptions) -> Report {
    let mut report = Report::default();
    let wf = match load_workflow(path, opts) {
        Ok(wf) => wf,
        Err(e) => {
            report.errors.push(diag(e.check(), e.detail()));
            for w in crate::config::key_warnings(path, opts) {
                report
                    .warnings
                    .push(diag(w.check.clone(), format!("{}: {}", w.field, w.message)));
            }
            return report;
        }
    };
    report.summary = Some(crate::mask::mask(&summary(&wf)));
    for w in &wf.warnings {
        report
            .warnings
            .push(diag(w.check.clone(), format!("{}: {}", w.field, w.message)));
    }
    match PromptTemplate::parse(
        &wf.prompt_template,
        &wf.path.display().to_string(),
        wf.prompt_line_offset,
    ) {
        Ok(t) => {
            if let Err(e) = t.check_render() {
                report.errors.push(diag("template_render", e.to_string()));
            }
            for w in crate::prompt::lint(&t) {
                report.warnings.push(diag(
                    w.kind.as_str(),
                    format!("line {}: {}", w.line, w.message),
                ));
            }
        }
        Err(e) => report.errors.push(diag("template_parse", e.to_string())),
    }
    for p in wf.config.preflight() {
        report.errors.push(diag(p.check, p.message));
    }
    if let Some(p) = wf.config.agent_command_problem() {
        report.errors.push(diag(p.check, p.message));
    }
    if let Some(p) = wf.config.sandbox_problem(true) {
        report.errors.push(diag(p.check, p.message));
    }
    if let Some(p) = wf.config.host_capacity_problem(true) {
        report.errors.push(diag(p.check, p.message));
    }
    if let Some(p) = wf.config.tracker_data_file_problem() {
        report.errors.push(diag(p.check, p.message));
    }
    // An unsupported kind is already reported by preflight; building is tried only for a kind
    // this build has, to catch what its constructor refuses.
    if crate::registry::tracker(&wf.config.tracker.kind).is_some()
        && let Err(e) = crate::orchestrator::adapters::build_tracker(
            &wf,
            std::sync::Arc::new(crate::clock::SystemClock),
        )
    {
        report.errors.push(diag("tracker_adapter", e.to_string()));
    }
    if let Some(settings) = wf.config.scm_settings()
        && crate::registry::scm(&settings.kind).is_some()
        && let Err(e) =
            crate::registry::build_scm(&settings, std::sync::Arc::new(crate::clock::SystemClock))
    {
        report.errors.push(diag("scm_adapter", e.to_string()));
    }
    let ws = crate::orchestrator::adapters::workspace_manager(&wf);
    if let Err(e) = ws.preflight_root_writable() {
        report
            .errors
            .push(diag("workspace.root_writable", e.to_string()));
    }
    report
}

/// Runs the subcommand; returns the exit code.
pub fn run(args: ValidateArgs) -> i32 {
    let format = args.format.to_ascii_lowercase();
    if format != "text" && format != "json" {
        eprintln!(
            "sortie validate: invalid --format value {:?}: must be \"text\" or \"json\"",
            args.format
        );
        return 1;
    }
    let opts = LoadOptions::from_process(args.env_file.map(PathBuf::from));
    let path = PathBuf::from(args.workflow.unwrap_or_else(|| "WORKFLOW.md".into()));
    let report = validate(&path, &opts);
    if format == "json" {
        let item = |sev: &str, d: &Diagnostic| json!({"severity": sev, "check": d.check, "message": d.message});
        let out = json!({
            "valid": report.errors.is_empty(),
            "errors": report.errors.iter().map(|d| item("error", d)).collect::<Vec<_>>(),
            "warnings": report.warnings.iter().map(|d| item("warning", d)).collect::<Vec<_>>(),
        });
        println!("{out}");
    } else {
        let mut stderr = std::io::stderr().lock();
        // A failed write to stderr leaves nothing to report it to.
        let _ = write_text(&report, &path, &mut stderr);
    }
    if report.errors.is_empty() { 0 } else { 1 }
}

/// The text report: unknown keys first, then errors, then the other warnings, then the `ok:`
/// line when nothing failed.
fn write_text(report: &Report, path: &Path, out: &mut impl Write) -> std::io::Result<()> {
    let (keys, other): (Vec<&Diagnostic>, Vec<&Diagnostic>) = report
        .warnings
        .iter()
        .partition(|d| d.check == UNKNOWN_KEY_CHECK);
    for d in &keys {
        writeln!(out, "warning: {}: {}", d.check, d.message)?;
    }
    for d in &report.errors {
        writeln!(out, "error: {}: {}", d.check, d.message)?;
    }
    for d in &other {
        writeln!(out, "warning: {}: {}", d.check, d.message)?;
    }
    if report.errors.is_empty() {
        let n = report.warnings.len();
        writeln!(
            out,
            "ok: {} — {}, {n} warning{}",
            path.display(),
            report.summary.as_deref().unwrap_or("loaded"),
            if n == 1 { "" } else { "s" }
        )?;
    }
    Ok(())
}

/// `tracker <kind> (<project or data file>), agent <kind> (<command>)`, and the reactions'
/// provider when one applies.
fn summary(wf: &crate::config::Workflow) -> String {
    let c = &wf.config;
    let t = &c.tracker;
    let mut out = match (&c.tracker_path, &t.project) {
        (Some(p), _) => format!(
            "tracker {} ({})",
            t.kind,
            p.components().collect::<PathBuf>().display()
        ),
        (None, Some(project)) => format!("tracker {} ({project})", t.kind),
        (None, None) => format!("tracker {}", t.kind),
    };
    out.push_str(&format!(", agent {}", c.agent.kind));
    if let Some(cmd) = &c.agent.command {
        out.push_str(&format!(" ({cmd})"));
    }
    if let Some(p) = &c.reactions.provider {
        out.push_str(&format!(", pull-request reactions on {p}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report_for(front_matter: &str) -> Result<Report, std::io::Error> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("WORKFLOW.md");
        std::fs::write(
            &path,
            format!("---\n{front_matter}\n---\nDo {{{{ .issue.title }}}}\n"),
        )?;
        let opts = LoadOptions {
            cwd: dir.path().to_path_buf(),
            ..LoadOptions::default()
        };
        Ok(validate(&path, &opts))
    }

    #[test]
    fn a_kind_this_build_lacks_is_reported_as_unsupported() -> Result<(), std::io::Error> {
        let report = report_for(
            "tracker: {kind: redmine, active_states: [open]}\nagent: {kind: aider}\nworkspace: {root: ws}",
        )?;
        let errors: Vec<(&str, &str)> = report
            .errors
            .iter()
            .map(|d| (d.check.as_str(), d.message.as_str()))
            .collect();
        assert_eq!(
            errors,
            [
                (
                    "tracker_adapter",
                    "tracker kind \"redmine\" is not supported by this build (supported: file, gitea, github, gitlab, jira, linear)"
                ),
                (
                    "agent_adapter",
                    "agent kind \"aider\" is not supported by this build (supported: agent-client-protocol, claude-code, codex, copilot-cli, kiro, mock, opencode)"
                ),
            ]
        );
        Ok(())
    }

    #[test]
    fn preflight_diagnostics_carry_their_check_ids() -> Result<(), std::io::Error> {
        let report = report_for(
            "tracker: {kind: file, active_states: [To Do]}\nworkspace: {root: ws}\nclaude-code: {permission_mode: acceptEdits}",
        )?;
        let checks: Vec<&str> = report.errors.iter().map(|d| d.check.as_str()).collect();
        assert_eq!(
            checks,
            [
                "config.file.path",
                "config.agent.command",
                "tracker_adapter"
            ]
        );
        Ok(())
    }
}
