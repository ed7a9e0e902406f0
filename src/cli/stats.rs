//! `sortie stats [--since X] [--until Y] [--format table|json] [WORKFLOW.md]`: the run
//! statistics report read straight from the database the workflow names (`db_path`, default
//! `.sortie.db` beside the workflow), with no daemon running. `--format json` prints the body
//! of `GET /api/v1/stats` for the same range, from the same aggregation; the table is a
//! reading of that report. The file is opened read-only and never created.

use std::path::PathBuf;

use crate::clock::{Clock, SystemClock};
use crate::config::{LoadOptions, load_workflow};
use crate::store::stats::{self, Range, RangeError, StatsRequest};

use super::args::StatsArgs;

const FORMATS: &[&str] = &["table", "json"];

fn fail(message: impl std::fmt::Display) -> i32 {
    eprintln!("sortie stats: {message}");
    1
}

/// The command's wording of a refused range (the route words its own).
fn range_message(e: RangeError, args: &StatsArgs) -> String {
    match e {
        RangeError::Malformed(name) => {
            let value = if name == "since" {
                &args.since
            } else {
                &args.until
            };
            format!(
                "invalid --{name} value {:?}: expected an RFC 3339 timestamp with an offset (2026-07-01T00:00:00Z), a date (2026-07-01), or a positive duration in h, m, s, ms, us or ns (24h, 1h30m); days such as 7d are not a unit",
                value.as_deref().unwrap_or_default()
            )
        }
        RangeError::Misordered => format!(
            "--since ({}) must be before --until ({})",
            args.since.as_deref().unwrap_or_default(),
            args.until.as_deref().unwrap_or_default()
        ),
    }
}

/// Runs the subcommand; returns the exit code.
pub fn run(args: StatsArgs) -> i32 {
    let format = args.format.to_ascii_lowercase();
    if !FORMATS.contains(&format.as_str()) {
        return fail(format!(
            "invalid --format value {:?}: must be \"table\" or \"json\"",
            args.format
        ));
    }
    let now_ms = SystemClock.now_ms();
    let range = match Range::resolve(args.since.as_deref(), args.until.as_deref(), now_ms) {
        Ok(r) => r,
        Err(e) => return fail(range_message(e, &args)),
    };
    let opts = LoadOptions::from_process(args.env_file.clone().map(PathBuf::from));
    let path = PathBuf::from(
        args.workflow
            .clone()
            .unwrap_or_else(|| "WORKFLOW.md".into()),
    );
    let wf = match load_workflow(&path, &opts) {
        Ok(wf) => wf,
        Err(e) => return fail(e),
    };
    let db_path = &wf.config.db_path;
    if !db_path.is_file() {
        return fail(format!(
            "no run history database at {} (the workflow's db_path); sortie creates it when it first runs this workflow",
            db_path.display()
        ));
    }
    let workflow_path = wf.path.display().to_string();
    let chains = wf.config.dispatch.chains();
    let report = match stats::build(&StatsRequest {
        db_path,
        workflow_path: &workflow_path,
        now_ms,
        range,
        chains: &chains,
    }) {
        Ok(r) => r,
        Err(e) => {
            return fail(format!(
                "cannot read the run history database {}: {e}",
                db_path.display()
            ));
        }
    };
    if format == "json" {
        match serde_json::to_string(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => return fail(format!("report not serialized: {e}")),
        }
    } else {
        print!("{}", super::stats_table::render(&report));
    }
    0
}
