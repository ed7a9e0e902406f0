//! `sortie scrub [--env-file F] [WORKFLOW.md]`: every text value stored in the workflow's
//! database (`db_path`) rewritten through the secret masker with the secrets this process
//! knows, then the file rebuilt (`VACUUM`, so free pages keep no old text) and its WAL emptied.
//! The daemon masks what it stores and scrubs once what older builds stored; this command is
//! for a secret the daemon did not know when the text was stored (a variable added since, a
//! database copied from elsewhere). It takes the database's lock, so it refuses to run beside
//! a daemon.

use std::path::PathBuf;

use crate::clock::SystemClock;
use crate::config::{LoadOptions, load_workflow};
use crate::store::scrub::{Scrub, ScrubReport};
use crate::store::{StoreError, connection, lock, migrate};

use super::args::ScrubArgs;

fn fail(message: impl std::fmt::Display) -> i32 {
    eprintln!("sortie scrub: {message}");
    1
}

/// Runs the subcommand; returns the exit code.
pub fn run(args: ScrubArgs) -> i32 {
    let opts = LoadOptions::from_process(args.env_file.clone().map(PathBuf::from));
    let path = PathBuf::from(args.workflow.unwrap_or_else(|| "WORKFLOW.md".into()));
    let wf = match load_workflow(&path, &opts) {
        Ok(wf) => wf,
        Err(e) => return fail(e),
    };
    let db_path = &wf.config.db_path;
    if !db_path.is_file() {
        return fail(format!(
            "no database at {} (the workflow's db_path)",
            db_path.display()
        ));
    }
    let _lock = match lock::acquire(db_path) {
        Ok(l) => l,
        Err(e @ StoreError::Locked { .. }) => {
            return fail(format!("{e}; stop the daemon first"));
        }
        Err(e) => return fail(e),
    };
    let secrets = crate::mask::secrets().len();
    match scrub_file(db_path) {
        Ok((report, wal_truncated)) => {
            println!(
                "scrubbed {}: {} tables, {} rows read, {} rows rewritten, {} rows removed; secrets known: {secrets}; file rebuilt; WAL {}",
                db_path.display(),
                report.tables,
                report.rows_read,
                report.rows_rewritten,
                report.rows_removed,
                if wal_truncated {
                    "emptied"
                } else {
                    "kept by a reader"
                }
            );
            0
        }
        Err(e) => fail(e),
    }
}

/// Opens the database read-write (applying pending migrations, like a start), runs a whole
/// pass, rebuilds the file and truncates the WAL.
fn scrub_file(db_path: &std::path::Path) -> Result<(ScrubReport, bool), StoreError> {
    let mut conn = connection::open_read_write(db_path)?;
    migrate::apply(&mut conn, migrate::MIGRATIONS, &SystemClock)?;
    let mut pass = Scrub::start(&conn)?;
    while !pass.step(&conn)? {}
    let report = pass.report();
    let wal_truncated = pass.finish(&conn, true)?;
    Ok((report, wal_truncated))
}
