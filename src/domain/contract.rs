//! Where an adapter kind's contract tests run, declared in its descriptor so a test can fail
//! when a registered kind has none.

/// The test that holds a kind to its family's contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contract {
    /// The instantiation `<family>_contract!(<name>, …)` of the shared suite in
    /// `tests/<family>_contract.rs`.
    Suite(&'static str),
    /// A test file under `tests/` that runs the contract through the real binary instead,
    /// for a kind whose CLI the shared suite cannot drive in-process.
    File(&'static str),
}
