//! `reactions` and the deprecated `ci_feedback` → the typed settings of [`super::reactions`].
//!
//! A reaction block applies only when a source-control provider is named: `provider` on any
//! block (every block that names one must agree; the others use the agreed one). The provider
//! must be a kind this build has an adapter for. When it equals `tracker.kind` the tracker
//! block supplies its endpoint and token; otherwise (a Jira tracker with CI on GitHub) the
//! provider's own top-level block does (`config::build::scm_access`), as the original builds
//! its CI provider from the block `ci_feedback.kind` names. With no provider anywhere the
//! blocks are still checked but none applies, and a warning says so. `ci_feedback` is read as
//! `reactions.ci_failure` (its `kind` is the provider) unless `reactions.ci_failure` exists,
//! which wins.
//!
//! `triage: true` on `ci_failure`, `review_comments`, `bot_review` and `merge_conflicts` puts a
//! triage run before each fix the kind would dispatch (`orchestrator::reactions::triage`).

use std::str::FromStr;

use serde_json::{Map, Value};

use super::coerce::{int_field, strict_string_field, sub_map, type_name};
use super::error::{ConfigError, ConfigWarning};
use super::reactions::{
    AutoMergeConfig, BotReviewConfig, CiFailureConfig, DEFAULT_POLL_INTERVAL_MS,
    DEFAULT_WATCH_WINDOW_MS, Escalation, LabelCommandsConfig, MergeCompletionConfig,
    MergeConflictsConfig, ReactionsConfig, ReviewCommentsConfig,
};
use super::validate::{closest, unknown_message};
use crate::domain::EscalationMode;
use crate::registry;
use crate::scm::MergeStrategy;

/// The reaction kinds' keys under `reactions`, in the order they are read and served.
pub const REACTION_KEYS: &[&str] = &[
    "ci_failure",
    "review_comments",
    "bot_review",
    "merge_conflicts",
    "auto_merge",
    "merge_completion",
    "label_commands",
];

const ESCALATION_KEYS: &[&str] = &["escalation", "escalation_label", "watch_window_ms"];

/// Keys each block reads besides `provider` and the escalation members.
fn own_keys(kind: &str) -> &'static [&'static str] {
    match kind {
        "ci_failure" => &["max_retries", "max_log_lines", "triage"],
        "review_comments" => &[
            "max_continuation_turns",
            "debounce_ms",
            "poll_interval_ms",
            "triage",
        ],
        "bot_review" => &[
            "max_continuation_turns",
            "poll_interval_ms",
            "bot_usernames",
            "triage",
        ],
        "merge_conflicts" => &["max_retries", "poll_interval_ms", "triage"],
        "auto_merge" => &[
            "strategy",
            "require_ci",
            "delete_branch",
            "poll_interval_ms",
            "max_retries",
        ],
        "merge_completion" => &["target_state", "max_retries", "poll_interval_ms"],
        "label_commands" => &["review_label", "fix_label", "poll_interval_ms"],
        _ => &[],
    }
}

/// Default `max_retries` of every kind that has one.
const DEFAULT_MAX_RETRIES: u32 = 2;
/// Default `max_log_lines` of `ci_failure`.
const DEFAULT_MAX_LOG_LINES: u32 = 50;
/// Default `max_continuation_turns` of `review_comments` and `bot_review`.
const DEFAULT_CONTINUATION_TURNS: u32 = 3;
const DEFAULT_DEBOUNCE_MS: u64 = 60_000;
const DEFAULT_REVIEW_POLL_INTERVAL_MS: u64 = 120_000;
/// Reviews are read at most this often (each check reads several forge pages).
const MIN_REVIEW_POLL_INTERVAL_MS: u64 = 30_000;

/// A map of settings with the dotted prefix its errors name (`reactions.ci_failure`,
/// `ci_feedback`, `self_review`), and readers that apply the section's coercion rules.
pub(super) struct Section {
    pub(super) prefix: String,
    pub(super) map: Map<String, Value>,
}

impl Section {
    pub(super) fn field(&self, key: &str) -> String {
        format!("{}.{key}", self.prefix)
    }

    /// A count ≥ 0 where 0 is meaningful; absent reads `default`.
    pub(super) fn count(&self, key: &str, default: u32) -> Result<u32, ConfigError> {
        let field = self.field(key);
        match int_field(&self.map, key, &field)? {
            None => Ok(default),
            Some(n) if n < 0 => Err(ConfigError::field(field, "must be non-negative")),
            Some(n) => u32::try_from(n)
                .map_err(|_| ConfigError::field(field, format!("value out of range: {n}"))),
        }
    }

    /// A count > 0; absent reads `default`.
    pub(super) fn positive(&self, key: &str, default: u32) -> Result<u32, ConfigError> {
        match self.count(key, default)? {
            0 => Err(ConfigError::field(self.field(key), "must be positive")),
            n => Ok(n),
        }
    }

    /// Milliseconds ≥ 0 where 0 is meaningful; absent reads `default`.
    pub(super) fn millis(&self, key: &str, default: u64) -> Result<u64, ConfigError> {
        let field = self.field(key);
        match int_field(&self.map, key, &field)? {
            None => Ok(default),
            Some(n) if n < 0 => Err(ConfigError::field(field, "must be non-negative")),
            Some(n) => Ok(n.unsigned_abs()),
        }
    }

    /// A value > 0; absent reads `default`.
    pub(super) fn positive_millis(&self, key: &str, default: u64) -> Result<u64, ConfigError> {
        let field = self.field(key);
        match int_field(&self.map, key, &field)? {
            None => Ok(default),
            Some(n) if n <= 0 => Err(ConfigError::field(field, "must be positive")),
            Some(n) => Ok(n.unsigned_abs()),
        }
    }

    /// A poll interval: absent or 0 reads `default`; below `min` is an error.
    pub(super) fn interval(&self, key: &str, default: u64, min: u64) -> Result<u64, ConfigError> {
        let n = match self.millis(key, default)? {
            0 => default,
            n => n,
        };
        if n < min {
            return Err(ConfigError::field(
                self.field(key),
                format!("must be at least {min}, got {n}"),
            ));
        }
        Ok(n)
    }

    /// A real YAML bool; absent reads `default`.
    pub(super) fn flag(&self, key: &str, default: bool) -> Result<bool, ConfigError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(ConfigError::field(
                self.field(key),
                format!("expected bool, got {}", type_name(v)),
            )),
        }
    }

    /// A trimmed string; absent, null and blank read `None`; any other type is an error.
    pub(super) fn text(&self, key: &str) -> Result<Option<String>, ConfigError> {
        let s = strict_string_field(&self.map, key, &self.field(key))?;
        Ok(s.map(|s| s.trim().to_string()).filter(|s| !s.is_empty()))
    }

    /// A list of non-blank strings (trimmed); absent or null reads empty.
    pub(super) fn strings(&self, key: &str) -> Result<Vec<String>, ConfigError> {
        let field = self.field(key);
        let items = match self.map.get(key) {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Array(items)) => items,
            Some(other) => {
                return Err(ConfigError::field(
                    field,
                    format!("expected list, got {}", type_name(other)),
                ));
            }
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
                Value::String(_) => Err(ConfigError::field(
                    &field,
                    format!("item {i} must not be empty"),
                )),
                other => Err(ConfigError::field(
                    &field,
                    format!("item {i}: expected string, got {}", type_name(other)),
                )),
            })
            .collect()
    }
}

/// One reaction block as written.
struct Block {
    /// The kind's key under `reactions` (`ci_feedback` reads as `ci_failure`).
    kind: &'static str,
    /// The key naming the provider: `provider`, or `kind` in `ci_feedback`.
    provider_key: &'static str,
    s: Section,
}

impl std::ops::Deref for Block {
    type Target = Section;

    fn deref(&self) -> &Section {
        &self.s
    }
}

impl Block {
    fn provider(&self) -> Result<Option<String>, ConfigError> {
        self.text(self.provider_key)
    }

    fn triage(&self) -> Result<bool, ConfigError> {
        self.flag("triage", false)
    }

    fn escalation(&self) -> Result<Escalation, ConfigError> {
        let mode = match self.text("escalation")? {
            None => EscalationMode::None,
            Some(s) => EscalationMode::from_str(&s).map_err(|_| {
                ConfigError::field(
                    self.field("escalation"),
                    format!("invalid value {s:?} (expected label, comment or none)"),
                )
            })?,
        };
        let defaults = Escalation::default();
        Ok(Escalation {
            mode,
            label: self.text("escalation_label")?.unwrap_or(defaults.label),
            watch_window_ms: self.millis("watch_window_ms", DEFAULT_WATCH_WINDOW_MS)?,
        })
    }

    fn unknown_keys(&self, warnings: &mut Vec<ConfigWarning>) {
        let escalation_keys: &[&str] = match self.kind {
            "label_commands" => &[],
            _ => ESCALATION_KEYS,
        };
        let known: Vec<&str> = own_keys(self.kind)
            .iter()
            .chain(escalation_keys)
            .copied()
            .chain([self.provider_key])
            .collect();
        for key in self.map.keys().filter(|k| !known.contains(&k.as_str())) {
            warnings.push(ConfigWarning::new(
                "unknown_key",
                self.field(key),
                unknown_message(
                    "not a key this reaction reads",
                    closest(key, known.iter().copied()),
                ),
            ));
        }
    }
}

/// The typed `reactions` (with `ci_feedback` folded in), and the field that names the applied
/// provider (for errors about reaching it). Warnings for ignored or deprecated settings are
/// appended to `warnings`.
pub(super) fn build_reactions(
    raw: &Map<String, Value>,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<(ReactionsConfig, Option<String>), ConfigError> {
    let blocks = collect_blocks(raw, warnings);
    let provider = agreed_provider(&blocks)?;
    if let Some((p, field)) = &provider {
        check_provider(p, field)?;
    }
    let mut cfg = ReactionsConfig::default();
    for b in &blocks {
        b.unknown_keys(warnings);
        read_block(b, &mut cfg)?;
    }
    let mut provider_field = None;
    match provider {
        Some((p, field)) => {
            cfg.provider = Some(p);
            provider_field = Some(field);
        }
        None if !blocks.is_empty() => {
            warnings.push(ConfigWarning::new(
                "reactions_ignored",
                "reactions",
                "no reaction block names a source-control provider (for example \
                 `provider: github`); the reaction blocks are ignored",
            ));
            cfg = ReactionsConfig::default();
        }
        None => {}
    }
    Ok((cfg, provider_field))
}

/// The blocks present, in [`REACTION_KEYS`] order, `ci_feedback` standing in for a missing
/// `ci_failure`. A block that is not a map is skipped with a warning; a null one reads as empty.
fn collect_blocks(raw: &Map<String, Value>, warnings: &mut Vec<ConfigWarning>) -> Vec<Block> {
    let empty = Map::new();
    let reactions = sub_map(raw, "reactions").unwrap_or(&empty);
    for key in reactions.keys() {
        if !REACTION_KEYS.contains(&key.as_str()) {
            warnings.push(ConfigWarning::new(
                "unknown_key",
                format!("reactions.{key}"),
                unknown_message(
                    "not a reaction kind this build has",
                    closest(key, REACTION_KEYS.iter().copied()),
                ),
            ));
        }
    }
    let mut blocks = Vec::new();
    for kind in REACTION_KEYS {
        let prefix = format!("reactions.{kind}");
        if let Some(map) = block_map(reactions.get(*kind), &prefix, warnings) {
            blocks.push(Block {
                kind,
                provider_key: "provider",
                s: Section { prefix, map },
            });
        }
    }
    if let Some(map) = block_map(raw.get("ci_feedback"), "ci_feedback", warnings) {
        let superseded = blocks.iter().any(|b| b.kind == "ci_failure");
        let message = if superseded {
            "deprecated and superseded by reactions.ci_failure; ignored"
        } else {
            "deprecated; read as reactions.ci_failure (its `kind` is the provider)"
        };
        warnings.push(ConfigWarning::new("deprecated_key", "ci_feedback", message));
        if !superseded {
            blocks.insert(
                0,
                Block {
                    kind: "ci_failure",
                    provider_key: "kind",
                    s: Section {
                        prefix: "ci_feedback".into(),
                        map,
                    },
                },
            );
        }
    }
    blocks
}

fn block_map(
    v: Option<&Value>,
    prefix: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> Option<Map<String, Value>> {
    match v? {
        Value::Object(m) => Some(m.clone()),
        Value::Null => Some(Map::new()),
        other => {
            warnings.push(ConfigWarning::new(
                "type_mismatch",
                prefix,
                format!("expected map, got {}; block ignored", type_name(other)),
            ));
            None
        }
    }
}

/// The provider every block that names one agrees on, with the field of its first naming.
fn agreed_provider(blocks: &[Block]) -> Result<Option<(String, String)>, ConfigError> {
    let mut agreed: Option<(String, String)> = None;
    for b in blocks {
        let Some(p) = b.provider()? else {
            continue;
        };
        let field = b.field(b.provider_key);
        match &agreed {
            None => agreed = Some((p, field)),
            Some((first, first_field)) if *first != p => {
                return Err(ConfigError::field(
                    field,
                    format!(
                        "{p:?} disagrees with {first_field} {first:?}; every reaction block \
                         that names a provider must name the same one"
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    Ok(agreed)
}

fn check_provider(p: &str, field: &str) -> Result<(), ConfigError> {
    match registry::scm(p) {
        Some(_) => Ok(()),
        None => Err(ConfigError::field(field, registry::unsupported_scm(p))),
    }
}

fn read_block(b: &Block, cfg: &mut ReactionsConfig) -> Result<(), ConfigError> {
    match b.kind {
        "ci_failure" => cfg.ci_failure = Some(ci_failure(b)?),
        "review_comments" => cfg.review_comments = Some(review_comments(b)?),
        "bot_review" => cfg.bot_review = Some(bot_review(b)?),
        "merge_conflicts" => cfg.merge_conflicts = Some(merge_conflicts(b)?),
        "auto_merge" => cfg.auto_merge = Some(auto_merge(b)?),
        "merge_completion" => cfg.merge_completion = Some(merge_completion(b)?),
        "label_commands" => cfg.label_commands = Some(label_commands(b)?),
        _ => {}
    }
    Ok(())
}

fn ci_failure(b: &Block) -> Result<CiFailureConfig, ConfigError> {
    Ok(CiFailureConfig {
        max_retries: b.count("max_retries", DEFAULT_MAX_RETRIES)?,
        max_log_lines: b.count("max_log_lines", DEFAULT_MAX_LOG_LINES)? as usize,
        triage: b.triage()?,
        escalation: b.escalation()?,
    })
}

fn review_comments(b: &Block) -> Result<ReviewCommentsConfig, ConfigError> {
    Ok(ReviewCommentsConfig {
        max_continuation_turns: b.positive("max_continuation_turns", DEFAULT_CONTINUATION_TURNS)?,
        debounce_ms: b.millis("debounce_ms", DEFAULT_DEBOUNCE_MS)?,
        poll_interval_ms: b.interval(
            "poll_interval_ms",
            DEFAULT_REVIEW_POLL_INTERVAL_MS,
            MIN_REVIEW_POLL_INTERVAL_MS,
        )?,
        triage: b.triage()?,
        escalation: b.escalation()?,
    })
}

fn bot_review(b: &Block) -> Result<BotReviewConfig, ConfigError> {
    Ok(BotReviewConfig {
        max_continuation_turns: b.positive("max_continuation_turns", DEFAULT_CONTINUATION_TURNS)?,
        poll_interval_ms: b.interval("poll_interval_ms", DEFAULT_POLL_INTERVAL_MS, 1)?,
        bot_usernames: b.strings("bot_usernames")?,
        triage: b.triage()?,
        escalation: b.escalation()?,
    })
}

fn merge_conflicts(b: &Block) -> Result<MergeConflictsConfig, ConfigError> {
    Ok(MergeConflictsConfig {
        max_retries: b.count("max_retries", DEFAULT_MAX_RETRIES)?,
        poll_interval_ms: b.interval("poll_interval_ms", DEFAULT_POLL_INTERVAL_MS, 1)?,
        triage: b.triage()?,
        escalation: b.escalation()?,
    })
}

fn auto_merge(b: &Block) -> Result<AutoMergeConfig, ConfigError> {
    let strategy = match b.text("strategy")? {
        None => MergeStrategy::default(),
        Some(s) => MergeStrategy::ALL
            .iter()
            .copied()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| {
                ConfigError::field(
                    b.field("strategy"),
                    format!("invalid value {s:?} (expected merge, squash or rebase)"),
                )
            })?,
    };
    Ok(AutoMergeConfig {
        strategy,
        require_ci: b.flag("require_ci", true)?,
        delete_branch: b.flag("delete_branch", false)?,
        poll_interval_ms: b.interval("poll_interval_ms", DEFAULT_POLL_INTERVAL_MS, 1)?,
        max_retries: b.count("max_retries", DEFAULT_MAX_RETRIES)?,
        escalation: b.escalation()?,
    })
}

fn merge_completion(b: &Block) -> Result<MergeCompletionConfig, ConfigError> {
    let target_state = b.text("target_state")?.ok_or_else(|| {
        ConfigError::field(
            b.field("target_state"),
            format!("is required when {} is set", b.prefix),
        )
    })?;
    Ok(MergeCompletionConfig {
        target_state,
        max_retries: b.count("max_retries", DEFAULT_MAX_RETRIES)?,
        poll_interval_ms: b.interval("poll_interval_ms", DEFAULT_POLL_INTERVAL_MS, 1)?,
        escalation: b.escalation()?,
    })
}

fn label_commands(b: &Block) -> Result<LabelCommandsConfig, ConfigError> {
    let review_label = b.text("review_label")?;
    let fix_label = b.text("fix_label")?;
    if review_label.is_none() && fix_label.is_none() {
        return Err(ConfigError::field(
            &b.prefix,
            "needs review_label or fix_label (or both)",
        ));
    }
    if review_label.is_some() && review_label == fix_label {
        return Err(ConfigError::field(
            b.field("fix_label"),
            "must differ from review_label",
        ));
    }
    Ok(LabelCommandsConfig {
        review_label,
        fix_label,
        poll_interval_ms: b.interval("poll_interval_ms", DEFAULT_POLL_INTERVAL_MS, 1)?,
    })
}
