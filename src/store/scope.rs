//! Which workflow's rows a handle reads and writes. One database serves every workflow of a
//! daemon: each row carries its workflow's name (`''` for the single workflow a daemon without
//! named workflows runs), and every query filters and inserts with its handle's name. Reads the
//! API aggregates may instead ask across every workflow; their rows then say which one they
//! belong to.

use std::sync::Arc;

/// The workflows a read covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Every workflow in the database.
    All,
    /// One workflow, by name.
    One(Arc<str>),
}

impl Scope {
    /// The single workflow of a daemon that names none (`''`).
    pub fn single() -> Scope {
        Scope::One(Arc::from(""))
    }

    pub fn one(name: &str) -> Scope {
        Scope::One(Arc::from(name))
    }

    /// The value bound for [`filter`]: the name, or NULL (every workflow).
    pub(crate) fn bound(&self) -> Option<&str> {
        match self {
            Scope::All => None,
            Scope::One(name) => Some(name),
        }
    }
}

/// The condition keeping `col`'s rows of the scope bound as parameter `?n`
/// ([`Scope::bound`]).
pub(crate) fn filter(col: &str, n: usize) -> String {
    format!("(?{n} IS NULL OR {col} = ?{n})")
}

/// A row of a read across workflows, with the workflow it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct InWorkflow<T> {
    pub workflow: String,
    pub row: T,
}

/// The rows without their workflow.
pub(crate) fn rows<T>(v: Vec<InWorkflow<T>>) -> Vec<T> {
    v.into_iter().map(|w| w.row).collect()
}

/// The workflow column of `table`, or `''` on a database migrated before workflows were
/// keyed (`sortie stats` reads a database read-only, never migrating it): all of its rows
/// belong to the single workflow.
pub(crate) fn column(
    conn: &rusqlite::Connection,
    table: &str,
) -> Result<&'static str, super::error::StoreError> {
    use super::error::SqlContext;
    let keyed: bool = conn
        .query_row(
            "SELECT EXISTS(SELECT 1 FROM pragma_table_info(?1) WHERE name = 'workflow')",
            [table],
            |r| r.get(0),
        )
        .ctx("look for the workflow column")?;
    Ok(if keyed { "workflow" } else { "''" })
}
