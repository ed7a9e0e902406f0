//! Log field values for the shapes `Display` does not cover: an optional value is the value or
//! nothing (never Rust's `Some(…)`), a list is its items joined by `,`. The logger quotes and
//! escapes whatever these produce.

use std::fmt;

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
