//! What this build is: the version string served by `--version`, the API description, the
//! dashboard and `sortie_build_info`. Kept at the bottom layer so every layer can name it.

/// The crate version, as released.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The Rust toolchain the crate declares (`rust-version`), for the `go_version` label that
/// existing dashboards read.
pub const RUST_VERSION: &str = concat!("rust", env!("CARGO_PKG_RUST_VERSION"));
