//! `notifications` → [`NotificationsConfig`]: where operator notifications go and which events
//! each destination takes. URLs and signing secrets are secrets: `$VAR` is expanded anywhere in
//! them (like `tracker.api_key`), and both the values and what `$VAR` put in them are masked.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

use super::coerce::{sub_map, type_name};
use super::env::expand_env;
use super::error::{ConfigError, ConfigWarning};

/// Notices a destination's queue holds before the oldest is dropped (and counted).
pub const DEFAULT_QUEUE_CAPACITY: usize = 256;
/// `failures_threshold` when absent: a run failure is announced from the third in a row.
pub const DEFAULT_FAILURES_THRESHOLD: u32 = 3;
/// `rate_limit_per_minute` when absent.
pub const DEFAULT_RATE_PER_MINUTE: u32 = 30;

/// The keys one destination reads (for `unknown_key` warnings).
pub const DESTINATION_KEYS: &[&str] = &[
    "name",
    "kind",
    "url",
    "secret",
    "events",
    "failures_threshold",
    "rate_limit_per_minute",
];

/// What a destination speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DestinationKind {
    /// A Slack incoming webhook: `{"text": …, "blocks": […]}`.
    Slack,
    /// Any HTTP endpoint: sortie's JSON document, signed when a secret is set.
    Webhook,
}

impl DestinationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DestinationKind::Slack => "slack",
            DestinationKind::Webhook => "webhook",
        }
    }
}

/// The events a destination can subscribe to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NotifyEvent {
    /// A new attention item (anything that needs a person).
    AttentionRaised,
    /// A pull-request reaction escalated to a person.
    Escalation,
    /// An issue's budget or an instance-wide spend ceiling was reached.
    BudgetReached,
    /// An issue's runs failed `failures_threshold` times in a row.
    RunFailed,
    /// A successful run handed the issue off.
    Handoff,
    /// The pull request was merged.
    Merge,
    /// The agent asked for a person with the `notify_operator` tool.
    OperatorMessage,
}

impl NotifyEvent {
    pub const ALL: [NotifyEvent; 7] = [
        NotifyEvent::AttentionRaised,
        NotifyEvent::Escalation,
        NotifyEvent::BudgetReached,
        NotifyEvent::RunFailed,
        NotifyEvent::Handoff,
        NotifyEvent::Merge,
        NotifyEvent::OperatorMessage,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NotifyEvent::AttentionRaised => "attention_raised",
            NotifyEvent::Escalation => "escalation",
            NotifyEvent::BudgetReached => "budget_reached",
            NotifyEvent::RunFailed => "run_failed",
            NotifyEvent::Handoff => "handoff",
            NotifyEvent::Merge => "merge",
            NotifyEvent::OperatorMessage => "operator_message",
        }
    }

    pub fn parse(s: &str) -> Option<NotifyEvent> {
        NotifyEvent::ALL
            .into_iter()
            .find(|e| e.as_str() == s.trim().to_ascii_lowercase())
    }
}

/// One destination. `Debug` masks the URL and the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Destination {
    /// Unique among destinations: the metrics label, the health row and the attention item.
    pub name: String,
    pub kind: DestinationKind,
    pub url: String,
    /// Webhook only: the HMAC-SHA256 key of the `X-Sortie-Signature` header.
    pub secret: Option<String>,
    pub events: BTreeSet<NotifyEvent>,
    /// `run_failed` is sent from this many failed runs in a row on (≥ 1).
    pub failures_threshold: u32,
    /// Deliveries per minute (≥ 1); later notices wait in the queue for their turn.
    pub rate_limit_per_minute: u32,
    /// Why the destination takes no notices: its `url` or `secret` names a variable that is
    /// unset here. Not a load error, so `sortie mcp-server` (started with the session's
    /// environment only) still loads the workflow; the daemon warns and skips it.
    pub disabled: Option<String>,
}

impl fmt::Debug for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Destination")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("url", &crate::mask::REDACTED)
            .field(
                "secret",
                &self.secret.as_ref().map(|_| crate::mask::REDACTED),
            )
            .field("events", &self.events)
            .field("failures_threshold", &self.failures_threshold)
            .field("rate_limit_per_minute", &self.rate_limit_per_minute)
            .field("disabled", &self.disabled)
            .finish()
    }
}

/// `notifications`: every destination, in the order written.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NotificationsConfig {
    pub destinations: Vec<Destination>,
}

/// Builds `notifications`; secrets found go into `secrets`.
pub(super) fn build_notifications(
    raw: &Map<String, Value>,
    env: &BTreeMap<String, String>,
    secrets: &mut Vec<String>,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<NotificationsConfig, ConfigError> {
    let Some(m) = sub_map(raw, "notifications") else {
        return Ok(NotificationsConfig::default());
    };
    let list = match m.get("destinations") {
        None | Some(Value::Null) => return Ok(NotificationsConfig::default()),
        Some(Value::Array(a)) => a,
        Some(v) => {
            return Err(ConfigError::field(
                "notifications.destinations",
                format!("expected a list of destinations, got {}", type_name(v)),
            ));
        }
    };
    let mut out = NotificationsConfig::default();
    for (i, item) in list.iter().enumerate() {
        let field = format!("notifications.destinations[{i}]");
        let Some(d) = item.as_object() else {
            return Err(ConfigError::field(
                field,
                format!("expected a map, got {}", type_name(item)),
            ));
        };
        let dest = destination(d, &field, i, env, secrets)?;
        if let Some(why) = &dest.disabled {
            warnings.push(ConfigWarning::new(
                "notification_destination_disabled",
                field.clone(),
                format!("{why}; destination {:?} takes no notices", dest.name),
            ));
        }
        if out.destinations.iter().any(|o| o.name == dest.name) {
            return Err(ConfigError::field(
                format!("{field}.name"),
                format!("duplicate destination name {:?}", dest.name),
            ));
        }
        out.destinations.push(dest);
    }
    Ok(out)
}

fn destination(
    d: &Map<String, Value>,
    field: &str,
    index: usize,
    env: &BTreeMap<String, String>,
    secrets: &mut Vec<String>,
) -> Result<Destination, ConfigError> {
    let kind = match text(d, field, "kind")?.as_deref() {
        Some("slack") => DestinationKind::Slack,
        Some("webhook") => DestinationKind::Webhook,
        Some(other) => {
            return Err(ConfigError::field(
                format!("{field}.kind"),
                format!("unsupported kind {other:?} (supported: slack, webhook)"),
            ));
        }
        None => {
            return Err(ConfigError::field(
                format!("{field}.kind"),
                "is required (slack or webhook)",
            ));
        }
    };
    if text(d, field, "url")?.is_none() {
        return Err(ConfigError::field(format!("{field}.url"), "is required"));
    }
    let url = secret_text(d, field, "url", env, secrets)?.unwrap_or_default();
    let secret = secret_text(d, field, "secret", env, secrets)?;
    let disabled = if url.is_empty() {
        Some(format!("{field}.url is empty after $VAR expansion"))
    } else if secret.is_none() && text(d, field, "secret")?.is_some() {
        Some(format!("{field}.secret is empty after $VAR expansion"))
    } else {
        None
    };
    if disabled.is_none() && !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(ConfigError::field(
            format!("{field}.url"),
            "must be an http:// or https:// URL",
        ));
    }
    if text(d, field, "secret")?.is_some() && kind == DestinationKind::Slack {
        return Err(ConfigError::field(
            format!("{field}.secret"),
            "applies to kind webhook only (a Slack incoming webhook URL is its own secret)",
        ));
    }
    let name = text(d, field, "name")?.unwrap_or_else(|| format!("{}-{}", kind.as_str(), index));
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(ConfigError::field(
            format!("{field}.name"),
            format!("{name:?} may hold only letters, digits, '-', '_' and '.'"),
        ));
    }
    Ok(Destination {
        name,
        kind,
        url,
        secret,
        events: events(d, field)?,
        failures_threshold: positive(d, field, "failures_threshold", DEFAULT_FAILURES_THRESHOLD)?,
        rate_limit_per_minute: positive(
            d,
            field,
            "rate_limit_per_minute",
            DEFAULT_RATE_PER_MINUTE,
        )?,
        disabled,
    })
}

/// A trimmed string key; `None` when absent or blank.
fn text(d: &Map<String, Value>, field: &str, key: &str) -> Result<Option<String>, ConfigError> {
    match d.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string()).filter(|s| !s.is_empty())),
        Some(v) => Err(ConfigError::field(
            format!("{field}.{key}"),
            format!("expected string, got {}", type_name(v)),
        )),
    }
}

/// A string key with `$VAR` expanded anywhere; the value and every substitution are secrets.
fn secret_text(
    d: &Map<String, Value>,
    field: &str,
    key: &str,
    env: &BTreeMap<String, String>,
    secrets: &mut Vec<String>,
) -> Result<Option<String>, ConfigError> {
    let Some(raw) = text(d, field, key)? else {
        return Ok(None);
    };
    let e = expand_env(&raw, env);
    secrets.extend(e.substituted);
    let value = e.text.trim().to_string();
    if value.is_empty() {
        return Ok(None);
    }
    secrets.push(value.clone());
    Ok(Some(value))
}

/// `events`: absent means every event.
fn events(d: &Map<String, Value>, field: &str) -> Result<BTreeSet<NotifyEvent>, ConfigError> {
    let list = match d.get("events") {
        None | Some(Value::Null) => return Ok(NotifyEvent::ALL.into_iter().collect()),
        Some(Value::Array(a)) => a,
        Some(v) => {
            return Err(ConfigError::field(
                format!("{field}.events"),
                format!("expected a list of event names, got {}", type_name(v)),
            ));
        }
    };
    let names: Vec<&str> = NotifyEvent::ALL.iter().map(|e| e.as_str()).collect();
    list.iter()
        .map(|v| {
            v.as_str().and_then(NotifyEvent::parse).ok_or_else(|| {
                ConfigError::field(
                    format!("{field}.events"),
                    format!("unknown event {v} (known: {})", names.join(", ")),
                )
            })
        })
        .collect()
}

fn positive(
    d: &Map<String, Value>,
    field: &str,
    key: &str,
    default: u32,
) -> Result<u32, ConfigError> {
    match d.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=u64::from(u32::MAX)).contains(n))
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| {
                ConfigError::field(
                    format!("{field}.{key}"),
                    format!("must be a positive integer, got {v}"),
                )
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn build(
        v: Value,
        env: &[(&str, &str)],
    ) -> (Result<NotificationsConfig, ConfigError>, Vec<String>) {
        let raw = json!({ "notifications": v });
        let env: BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut secrets = Vec::new();
        let r = build_notifications(
            raw.as_object().unwrap_or(&Map::new()),
            &env,
            &mut secrets,
            &mut Vec::new(),
        );
        (r, secrets)
    }

    #[test]
    fn destinations_resolve_secrets_and_default_their_events() {
        let (r, secrets) = build(
            json!({"destinations": [
                {"kind": "slack", "url": "$SLACK_URL"},
                {"name": "ops", "kind": "webhook", "url": "http://h/x", "secret": "${SIGN}",
                 "events": ["handoff", "run_failed"], "failures_threshold": 2,
                 "rate_limit_per_minute": 5}
            ]}),
            &[
                ("SLACK_URL", "https://hooks.example/T/B/xyz"),
                ("SIGN", "s3cr3t-key"),
            ],
        );
        let cfg = r.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg.destinations[0].name, "slack-0");
        assert_eq!(cfg.destinations[0].events.len(), NotifyEvent::ALL.len());
        assert_eq!(cfg.destinations[1].secret.as_deref(), Some("s3cr3t-key"));
        assert_eq!(cfg.destinations[1].failures_threshold, 2);
        assert!(secrets.contains(&"https://hooks.example/T/B/xyz".to_string()));
        assert!(secrets.contains(&"s3cr3t-key".to_string()));
        assert!(!format!("{cfg:?}").contains("xyz"));
        let (r, _) = build(
            json!({"destinations": [{"kind": "webhook", "url": "$UNSET_URL"},
                {"kind": "webhook", "url": "http://h/x", "secret": "$UNSET_SECRET"}]}),
            &[],
        );
        let cfg = r.unwrap_or_else(|e| panic!("{e}"));
        assert!(
            cfg.destinations.iter().all(|d| d.disabled.is_some()),
            "{cfg:?}"
        );
    }

    #[test]
    fn bad_destinations_are_refused_with_their_field() {
        for (v, field) in [
            (
                json!({"destinations": [{"kind": "email", "url": "http://x"}]}),
                "kind",
            ),
            (json!({"destinations": [{"kind": "slack"}]}), "url"),
            (
                json!({"destinations": [{"kind": "slack", "url": ""}]}),
                "url",
            ),
            (
                json!({"destinations": [{"kind": "slack", "url": "ftp://x"}]}),
                "url",
            ),
            (
                json!({"destinations": [{"kind": "slack", "url": "http://x", "secret": "abcd"}]}),
                "secret",
            ),
            (
                json!({"destinations": [{"kind": "webhook", "url": "http://x", "events": ["nope"]}]}),
                "events",
            ),
            (
                json!({"destinations": [{"kind": "webhook", "url": "http://x", "rate_limit_per_minute": 0}]}),
                "rate_limit_per_minute",
            ),
            (
                json!({"destinations": [{"kind": "webhook", "url": "http://x"}, {"kind": "webhook", "url": "http://y", "name": "webhook-0"}]}),
                "name",
            ),
        ] {
            let (r, _) = build(v, &[]);
            let e = r.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains(field), "{field}: {e}");
        }
    }
}
