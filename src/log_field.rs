//! Log field values for the shapes `Display` does not cover: an optional value is the value or
//! nothing (never Rust's `Some(…)`), a list is its items joined by `,`. The logger quotes and
//! escapes whatever these produce.

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

thread_local! {
    static WORKFLOW: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
}

/// Names the workflow this thread works for, when the daemon serves several: the logger adds
/// it to each of the thread's records as `workflow=` (one workflow's daemon sets nothing, so
/// its lines are as they were). A thread spawned for the workflow is handed it by its spawner
/// ([`thread_workflow`]), as thread-locals are not inherited.
pub fn set_thread_workflow(name: Option<Arc<str>>) {
    WORKFLOW.with(|w| *w.borrow_mut() = name);
}

/// The workflow [`set_thread_workflow`] named on this thread.
pub fn thread_workflow() -> Option<Arc<str>> {
    WORKFLOW.with(|w| w.borrow().clone())
}

/// An optional value as a log field: the value, or empty when absent.
pub struct Opt<'a, T>(&'a Option<T>);

/// `opt(&pid)`: see [`Opt`].
pub fn opt<T: fmt::Display>(v: &Option<T>) -> Opt<'_, T> {
    Opt(v)
}

impl<T: fmt::Display> fmt::Display for Opt<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(v) => v.fmt(f),
            None => Ok(()),
        }
    }
}

/// A list as a log field: its items joined by `,`.
pub struct List<'a, T>(&'a [T]);

/// `list(&labels)`: see [`List`].
pub fn list<T: fmt::Display>(v: &[T]) -> List<'_, T> {
    List(v)
}

impl<T: fmt::Display> fmt::Display for List<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, v) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            v.fmt(f)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_lists_render_without_rust_syntax() {
        assert_eq!(opt(&Some(42)).to_string(), "42");
        assert_eq!(opt::<u32>(&None).to_string(), "");
        assert_eq!(list(&["a", "b"]).to_string(), "a,b");
        assert_eq!(list::<u8>(&[]).to_string(), "");
    }
}
