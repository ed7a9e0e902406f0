//! Failures that will not heal by themselves, as a kind-neutral classification. Each adapter
//! recognises its own CLI's words ([`crate::agent::AgentDescriptor::classify_failure`]); the
//! words every CLI shares (the operating system's and the network stack's error names) are
//! recognised here. The orchestrator holds an issue whose run failed with a classified cause
//! at once instead of retrying it into the same wall.

use std::fmt;

/// Why a failed run cannot succeed until a person acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureClass {
    /// The CLI has no working login or key.
    NotLoggedIn,
    /// The CLI was given a credential of a type it refuses (e.g. a classic token).
    UnsupportedToken,
    /// No model provider is configured for the CLI.
    NoProvider,
    /// The model API cannot be reached: DNS failure, connection refused, network unreachable.
    Unreachable,
    /// The account's quota or billing stops every request.
    QuotaOrBilling,
    /// The image the agent runs in cannot be pulled (a session run as a Kubernetes Job).
    ImageUnavailable,
}

impl FailureClass {
    pub const ALL: [FailureClass; 6] = [
        FailureClass::NotLoggedIn,
        FailureClass::UnsupportedToken,
        FailureClass::NoProvider,
        FailureClass::Unreachable,
        FailureClass::QuotaOrBilling,
        FailureClass::ImageUnavailable,
    ];

    /// The stable snake_case code (stored with a hold, served as its `cause`).
    pub fn code(self) -> &'static str {
        match self {
            FailureClass::NotLoggedIn => "not_logged_in",
            FailureClass::UnsupportedToken => "unsupported_token",
            FailureClass::NoProvider => "no_provider",
            FailureClass::Unreachable => "provider_unreachable",
            FailureClass::QuotaOrBilling => "quota_or_billing",
            FailureClass::ImageUnavailable => "agent_image_unavailable",
        }
    }

    pub fn from_code(text: &str) -> Option<FailureClass> {
        Self::ALL.into_iter().find(|c| c.code() == text)
    }

    /// A short phrase for what went wrong.
    pub fn describe(self) -> &'static str {
        match self {
            FailureClass::NotLoggedIn => "the agent's CLI is not logged in",
            FailureClass::UnsupportedToken => {
                "the agent's CLI refuses the type of token it was given"
            }
            FailureClass::NoProvider => "the agent's CLI has no model provider configured",
            FailureClass::Unreachable => "the agent's CLI cannot reach its model API",
            FailureClass::QuotaOrBilling => {
                "the agent's account is out of quota or has a billing problem"
            }
            FailureClass::ImageUnavailable => "the agent's container image cannot be pulled",
        }
    }

    /// What a person does about it.
    pub fn what_to_do(self) -> &'static str {
        match self {
            FailureClass::NotLoggedIn => {
                "log the agent's CLI in (or give it a key through agent.env)"
            }
            FailureClass::UnsupportedToken => {
                "replace the token the agent gets with one of a supported type"
            }
            FailureClass::NoProvider => "configure a model provider for the agent's CLI",
            FailureClass::Unreachable => {
                "check the network, DNS and proxy settings between this host and the model API"
            }
            FailureClass::QuotaOrBilling => "check the account's quota, plan and billing",
            FailureClass::ImageUnavailable => {
                "check worker.kubernetes.image (or images), that it exists, and the cluster's pull credentials"
            }
        }
    }
}

impl fmt::Display for FailureClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// Network failure names from the operating system and the runtimes the CLIs are built on.
const UNREACHABLE_WORDS: &[&str] = &[
    "enotfound",
    "eai_again",
    "getaddrinfo",
    "econnrefused",
    "enetunreach",
    "ehostunreach",
    "network is unreachable",
    "no route to host",
    "temporary failure in name resolution",
    "name or service not known",
    "failed to lookup address",
    "dns error",
    "connection refused",
    "could not resolve host",
];

const QUOTA_WORDS: &[&str] = &[
    "insufficient_quota",
    "exceeded your current quota",
    "billing",
    "credit balance is too low",
    "payment required",
];

/// What the Kubernetes relay says when a session's image cannot be pulled.
const IMAGE_WORDS: &[&str] = &["agent image cannot be pulled"];

/// The kind-neutral recogniser: an image that cannot be pulled, network failure names and
/// common quota/billing words, in any case, anywhere in `text`.
pub fn classify_common(text: &str) -> Option<FailureClass> {
    let t = text.to_ascii_lowercase();
    if IMAGE_WORDS.iter().any(|w| t.contains(w)) {
        return Some(FailureClass::ImageUnavailable);
    }
    if UNREACHABLE_WORDS.iter().any(|w| t.contains(w)) {
        return Some(FailureClass::Unreachable);
    }
    if QUOTA_WORDS.iter().any(|w| t.contains(w)) {
        return Some(FailureClass::QuotaOrBilling);
    }
    None
}

/// For a kind whose CLI has no words of its own to recognise.
pub fn no_kind_words(text: &str) -> Option<FailureClass> {
    classify_common(text)
}

/// Words that make a stderr line worth quoting in a failure's message.
const INFORMATIVE_WORDS: &[&str] = &[
    "error",
    "denied",
    "unauthorized",
    "unauthorised",
    "forbidden",
    "not supported",
    "not logged in",
    "not authenticated",
    "login",
    "invalid",
    "token",
    "api key",
    "quota",
    "billing",
    "credit",
    "limit",
    "provider",
    "failed",
    "refused",
    "unreachable",
    "network",
    "enotfound",
    "eai_again",
    "getaddrinfo",
    "econnrefused",
    "timed out",
];

/// The most informative lines of an agent's stderr: those naming an error, a refusal, a
/// credential, a provider or the network, in order and without repeats; at most `max_lines`,
/// and at most `max_chars` in all (each line is cut to fit). Falls back to the last non-blank
/// line when none qualifies. Lines are cleaned of ANSI codes and bullets, not masked.
pub fn informative_lines(stderr: &str, max_lines: usize, max_chars: usize) -> Vec<String> {
    let lines: Vec<String> = stderr
        .lines()
        .map(|l| {
            let l = crate::agent::text::strip_ansi(l);
            let l = l.trim();
            // A list bullet ("• ", "- ", "* ", "> ") is not part of the words.
            let mut chars = l.chars();
            match (chars.next(), chars.next()) {
                (Some('•' | '-' | '*' | '>'), Some(c)) if c.is_whitespace() => {
                    chars.as_str().trim().to_string()
                }
                _ => l.to_string(),
            }
        })
        .filter(|l| !l.is_empty() && !l.starts_with("... ("))
        .collect();
    let mut picked: Vec<String> = Vec::new();
    for l in &lines {
        let low = l.to_ascii_lowercase();
        if INFORMATIVE_WORDS.iter().any(|w| low.contains(w)) && !picked.contains(l) {
            picked.push(l.clone());
        }
        if picked.len() == max_lines {
            break;
        }
    }
    if picked.is_empty()
        && let Some(last) = lines.last()
    {
        picked.push(last.clone());
    }
    let mut left = max_chars;
    let mut out = Vec::new();
    for l in picked {
        if left == 0 {
            break;
        }
        let cut = crate::agent::text::cut_chars(&l, left);
        left = left.saturating_sub(cut.chars().count() + 3);
        out.push(cut);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_read_back() {
        for c in FailureClass::ALL {
            assert_eq!(FailureClass::from_code(c.code()), Some(c));
        }
    }

    #[test]
    fn network_and_billing_words_are_recognised_in_any_case() {
        assert_eq!(
            classify_common("Error: getaddrinfo ENOTFOUND api.example.com"),
            Some(FailureClass::Unreachable)
        );
        assert_eq!(
            classify_common("connect ECONNREFUSED 127.0.0.1:443"),
            Some(FailureClass::Unreachable)
        );
        assert_eq!(
            classify_common("You exceeded your current quota"),
            Some(FailureClass::QuotaOrBilling)
        );
        assert_eq!(classify_common("error: the tests failed"), None);
    }

    #[test]
    fn the_informative_lines_are_picked_before_the_last_one() {
        let stderr = "starting\nError: Classic Personal Access Tokens (ghp_) are not supported by Copilot.\n\nPlease use a Fine-Grained Personal Access Token.\n  • Unset COPILOT_GITHUB_TOKEN and run 'gh auth login'\n";
        let got = informative_lines(stderr, 3, 400);
        assert_eq!(
            got,
            vec![
                "Error: Classic Personal Access Tokens (ghp_) are not supported by Copilot.",
                "Please use a Fine-Grained Personal Access Token.",
                "Unset COPILOT_GITHUB_TOKEN and run 'gh auth login'",
            ]
        );
        assert_eq!(informative_lines("a\nb\n  \n", 3, 400), vec!["b"]);
        assert_eq!(
            informative_lines("--flag cannot be used here", 3, 400),
            vec!["--flag cannot be used here"]
        );
        assert!(informative_lines("", 3, 400).is_empty());
        let long = format!("error {}\nerror two", "x".repeat(500));
        let got = informative_lines(&long, 3, 100);
        assert_eq!(got.len(), 1);
        assert!(got[0].chars().count() <= 101);
    }
}
