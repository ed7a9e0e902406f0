//! Secret masking. Every configured credential and `$VAR`-resolved secret is registered here
//! once; every string that could leak one (log lines, API fields, events) passes through
//! [`mask`], which replaces each occurrence with `[redacted]`.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// The replacement text for a masked secret.
pub const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are not masked: masking "a" or "1" would shred ordinary text.
const MIN_SECRET_LEN: usize = 4;

static SECRETS: RwLock<Vec<Arc<str>>> = RwLock::new(Vec::new());

/// How many secrets are registered; bumped after each registration. Zero lets [`mask_cow`]
/// return without taking the lock, and a change tells a cache of masked text to rebuild.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Changes whenever the set of registered secrets grows; text masked under one generation
/// is still correctly masked while the generation stays the same.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// Registers a secret to be masked from now on. Short or blank values are ignored, and so is
/// a value found inside `[redacted]` itself: masking it would grow text each time masked text
/// is masked again (a stored row rewritten, a database scrubbed twice).
pub fn register_secret(secret: &str) {
    let secret = secret.trim();
    if secret.len() < MIN_SECRET_LEN || REDACTED.contains(secret) {
        return;
    }
    let mut list = SECRETS.write().unwrap_or_else(|p| p.into_inner());
    if !list.iter().any(|s| &**s == secret) {
        list.push(Arc::from(secret));
        // Longest first so a secret that contains another is masked whole.
        list.sort_by_key(|s| std::cmp::Reverse(s.len()));
        GENERATION.fetch_add(1, Ordering::AcqRel);
    }
}

/// Name fragments that make an environment variable secret-looking (matched case-insensitively
/// anywhere in the name): `GITHUB_TOKEN`, `SORTIE_TRACKER_API_KEY`, `db_password`, ….
const SECRET_NAME_PARTS: &[&str] = &["TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"];

/// Whether an environment variable's name says its value is a secret.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAME_PARTS.iter().any(|p| upper.contains(p))
}

/// Registers the value of every secret-looking variable in `vars` ([`is_secret_name`]),
/// whether or not WORKFLOW.md references it, so a hook or agent that prints one cannot get it
/// into a log line, the API or the database.
pub fn register_env_secrets<I, K, V>(vars: I)
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<std::ffi::OsStr>,
    V: AsRef<std::ffi::OsStr>,
{
    for (k, v) in vars {
        if let (Some(k), Some(v)) = (k.as_ref().to_str(), v.as_ref().to_str())
            && is_secret_entry(k, v)
        {
            register_secret(v);
        }
    }
}

/// Whether a `NAME=value` entry (environment, `.env`) holds a secret: a secret-looking name
/// ([`is_secret_name`]) with a value that is not a switch word.
pub fn is_secret_entry(name: &str, value: &str) -> bool {
    is_secret_name(name) && !is_flag_word(value)
}

/// A switch value (`SKIP_KEYCHAIN=true`) is no secret, and masking it would shred ordinary
/// log text such as `created_now=true`.
fn is_flag_word(v: &str) -> bool {
    ["true", "false", "none", "null", "unset"]
        .iter()
        .any(|w| v.trim().eq_ignore_ascii_case(w))
}

/// Replaces every registered secret in `text` with `[redacted]`.
pub fn mask(text: &str) -> String {
    mask_cow(text).into_owned()
}

/// [`mask`] without a copy when nothing matches: with no secret registered it does not even
/// take the lock, so masking every string of a response costs nothing in the common case.
pub fn mask_cow(text: &str) -> Cow<'_, str> {
    if generation() == 0 {
        return Cow::Borrowed(text);
    }
    let list = SECRETS.read().unwrap_or_else(|p| p.into_inner());
    mask_with_cow(text, &list)
}

/// The registered secrets (longest first), for callers that mask many strings under one lock.
pub fn secrets() -> Vec<Arc<str>> {
    if generation() == 0 {
        return Vec::new();
    }
    SECRETS.read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Masking against an explicit list (pure; used by [`mask`] and by tests).
pub fn mask_with(text: &str, secrets: &[Arc<str>]) -> String {
    mask_with_cow(text, secrets).into_owned()
}

/// [`mask_with`], borrowing `text` when no secret occurs in it.
pub fn mask_with_cow<'a>(text: &'a str, secrets: &[Arc<str>]) -> Cow<'a, str> {
    let mut out = Cow::Borrowed(text);
    for s in secrets {
        if s.len() >= MIN_SECRET_LEN && out.contains(&**s) {
            out = Cow::Owned(out.replace(&**s, REDACTED));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_every_occurrence_longest_first() {
        let secrets: Vec<Arc<str>> = vec![Arc::from("tok-abcdef-long"), Arc::from("tok-abc")];
        assert_eq!(
            mask_with("a tok-abcdef-long b tok-abc", &secrets),
            "a [redacted] b [redacted]"
        );
    }

    #[test]
    fn secret_names_are_recognised_case_insensitively() {
        for name in [
            "GITHUB_TOKEN",
            "SORTIE_TRACKER_API_KEY",
            "db_password",
            "MY_PASSWD",
            "Client_Secret",
            "AWS_CREDENTIALS",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["PATH", "HOME", "SORTIE_LOG_LEVEL", "LANG"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn unmatched_text_is_borrowed() {
        let secrets: Vec<Arc<str>> = vec![Arc::from("tok-abcdef")];
        assert!(matches!(
            mask_with_cow("nothing here", &secrets),
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            mask_with_cow("a tok-abcdef", &secrets),
            Cow::Owned(_)
        ));
    }

    #[test]
    fn registering_a_new_secret_moves_the_generation() {
        let before = generation();
        register_secret("generation-probe-secret");
        assert!(generation() > before);
        let again = generation();
        register_secret("generation-probe-secret");
        assert_eq!(generation(), again);
    }

    #[test]
    fn masking_masked_text_changes_nothing() {
        let before = generation();
        register_secret("dacted");
        assert_eq!(
            generation(),
            before,
            "a piece of the replacement is no secret"
        );
        register_secret("idempotence-probe-secret");
        let once = mask("x idempotence-probe-secret y");
        assert_eq!(mask(&once), once);
    }

    #[test]
    fn short_values_are_not_masked() {
        let secrets: Vec<Arc<str>> = vec![Arc::from("ab")];
        assert_eq!(mask_with("abc", &secrets), "abc");
    }
}
