//! Command line (placeholder).

/// Entry point; returns the process exit code.
pub fn main() -> i32 {
    0
}
