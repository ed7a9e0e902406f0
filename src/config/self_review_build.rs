//! `self_review` → [`SelfReviewConfig`]. When `enabled` is not `true` nothing else is read or
//! checked, so a disabled block never fails a load.

use serde_json::{Map, Value};

use super::coerce::{sub_map, type_name};
use super::error::{ConfigError, ConfigWarning};
use super::reactions::SelfReviewConfig;
use super::reactions_build::Section;

/// The typed `self_review`. When `enabled` is not `true` nothing else is read.
pub(super) fn build_self_review(
    raw: &Map<String, Value>,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<SelfReviewConfig, ConfigError> {
    let defaults = SelfReviewConfig::default();
    let Some(m) = sub_map(raw, "self_review") else {
        return Ok(defaults);
    };
    let enabled = match m.get("enabled") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            warnings.push(ConfigWarning::new(
                "type_mismatch",
                "self_review.enabled",
                format!("expected bool, got {}; read as false", type_name(v)),
            ));
            false
        }
    };
    if !enabled {
        return Ok(defaults);
    }
    let s = Section {
        prefix: "self_review".into(),
        map: m.clone(),
    };
    let max_iterations = s.count("max_iterations", defaults.max_iterations)?;
    if !(1..=10).contains(&max_iterations) {
        return Err(ConfigError::field(
            s.field("max_iterations"),
            format!("must be between 1 and 10, got {max_iterations}"),
        ));
    }
    let verification_commands = s.strings("verification_commands")?;
    if verification_commands.is_empty() {
        return Err(ConfigError::field(
            s.field("verification_commands"),
            "is required (a non-empty list of commands) when self_review.enabled is true",
        ));
    }
    let reviewer = s.text("reviewer")?.unwrap_or(defaults.reviewer);
    if reviewer != "same" {
        return Err(ConfigError::field(
            s.field("reviewer"),
            format!("unsupported reviewer {reviewer:?} (only \"same\" is supported)"),
        ));
    }
    let max_diff_bytes = s.positive_millis("max_diff_bytes", defaults.max_diff_bytes as u64)?;
    Ok(SelfReviewConfig {
        enabled,
        max_iterations,
        verification_commands,
        verification_timeout_ms: s
            .positive_millis("verification_timeout_ms", defaults.verification_timeout_ms)?,
        max_diff_bytes: usize::try_from(max_diff_bytes).unwrap_or(usize::MAX),
        reviewer,
    })
}
