//! `$VAR` expansion with Go `os.ExpandEnv` semantics and `~` path expansion.
//!
//! Variables are looked up only in the injected process environment (`LoadOptions::env`), never
//! in the `.env` file: `.env` feeds `SORTIE_*` overrides only, as in Go.

use std::collections::BTreeMap;
use std::path::Path;

/// The result of an expansion: the text plus the values that replaced variables (so secret
/// fields can register each substituted value for masking).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Expanded {
    pub text: String,
    pub substituted: Vec<String>,
}

/// Go `os.Expand`: `$NAME`, `${NAME}`, and the one-character shell specials (`$1`, `$*`, …).
/// An unset variable becomes empty; a `$` that cannot start a name stays literal; `${}` and an
/// unterminated `${` are eaten, exactly like Go.
pub fn expand_env(s: &str, env: &BTreeMap<String, String>) -> Expanded {
    let bytes = s.as_bytes();
    let mut out = Expanded::default();
    let mut buf: Vec<u8> = Vec::with_capacity(s.len());
    let mut i = 0;
    let mut j = 0;
    while j < bytes.len() {
        if bytes[j] == b'$' && j + 1 < bytes.len() {
            buf.extend_from_slice(&bytes[i..j]);
            let (name, width) = shell_name(&s[j + 1..]);
            if name.is_empty() {
                if width == 0 {
                    buf.push(b'$');
                }
            } else {
                let value = env.get(name).cloned().unwrap_or_default();
                if !value.is_empty() {
                    out.substituted.push(value.clone());
                }
                buf.extend_from_slice(value.as_bytes());
            }
            j += width;
            i = j + 1;
        }
        j += 1;
    }
    if i < bytes.len() {
        buf.extend_from_slice(&bytes[i..]);
    }
    // Only ASCII bytes are ever split on, so the buffer stays valid UTF-8.
    out.text = String::from_utf8_lossy(&buf).into_owned();
    out
}

fn is_shell_special(c: u8) -> bool {
    matches!(
        c,
        b'*' | b'#' | b'$' | b'@' | b'!' | b'?' | b'-' | b'0'..=b'9'
    )
}

fn is_alnum(c: u8) -> bool {
    c == b'_' || c.is_ascii_alphanumeric()
}

/// Go `getShellName`: the variable name after a `$` and how many bytes it spans.
fn shell_name(s: &str) -> (&str, usize) {
    let b = s.as_bytes();
    if b[0] == b'{' {
        if b.len() > 2 && is_shell_special(b[1]) && b[2] == b'}' {
            return (&s[1..2], 3);
        }
        for i in 1..b.len() {
            if b[i] == b'}' {
                if i == 1 {
                    return ("", 2);
                }
                return (&s[1..i], i + 1);
            }
        }
        return ("", 1);
    }
    if is_shell_special(b[0]) {
        return (&s[0..1], 1);
    }
    let mut i = 0;
    while i < b.len() && is_alnum(b[i]) {
        i += 1;
    }
    (&s[..i], i)
}

/// Whole-value mode (`resolveEnvRef`): expand only when the trimmed value starts with `$`, so
/// URLs and filters that merely contain a `$` are left untouched.
pub fn resolve_env_ref(s: &str, env: &BTreeMap<String, String>) -> Expanded {
    let trimmed = s.trim();
    if trimmed.starts_with('$') {
        expand_env(trimmed, env)
    } else {
        Expanded {
            text: s.to_string(),
            substituted: Vec::new(),
        }
    }
}

/// A path starts with `~` while the home directory is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HomeUnknown;

impl std::fmt::Display for HomeUnknown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("cannot expand ~: home directory is unknown")
    }
}

impl std::error::Error for HomeUnknown {}

/// Config errors carry their message as text ([`super::error::ConfigError::field`]).
impl From<HomeUnknown> for String {
    fn from(e: HomeUnknown) -> String {
        e.to_string()
    }
}

/// Path mode (`expandPath`): a leading `~` or `~/` becomes the home directory, then (unless the
/// value came from a `SORTIE_*` override) `$VAR` is expanded anywhere.
pub fn expand_path(
    p: &str,
    home: Option<&Path>,
    expand_vars: bool,
    env: &BTreeMap<String, String>,
) -> Result<String, HomeUnknown> {
    if p.is_empty() {
        return Ok(String::new());
    }
    let mut p = p.to_string();
    if p == "~" || p.starts_with("~/") {
        let home = home.ok_or(HomeUnknown)?;
        let rest = p[1..].trim_start_matches('/');
        p = if rest.is_empty() {
            home.display().to_string()
        } else {
            home.join(rest).display().to_string()
        };
    }
    if expand_vars {
        Ok(expand_env(&p, env).text)
    } else {
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> BTreeMap<String, String> {
        [("HOME_X", "/h"), ("TOKEN", "s3cret"), ("A", "1")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn ex(s: &str) -> String {
        expand_env(s, &env()).text
    }

    #[test]
    fn expands_names_and_braces_anywhere() {
        assert_eq!(ex("x$TOKEN-y"), "xs3cret-y");
        assert_eq!(ex("x${TOKEN}y"), "xs3crety");
        assert_eq!(ex("$A$A"), "11");
    }

    #[test]
    fn unset_is_empty_and_specials_are_names() {
        assert_eq!(ex("a$UNSET_VAR-b"), "a-b");
        assert_eq!(ex("cost $5"), "cost ");
        assert_eq!(ex("${1}x"), "x");
    }

    #[test]
    fn literal_dollar_cases_follow_go() {
        assert_eq!(ex("price$"), "price$");
        assert_eq!(ex("a$/b"), "a$/b");
        assert_eq!(ex("a${}b"), "ab");
        assert_eq!(ex("a${TOKEN"), "aTOKEN");
        assert_eq!(ex("${A:-d}"), "");
    }

    #[test]
    fn utf8_survives() {
        assert_eq!(ex("é$A ü"), "é1 ü");
    }

    #[test]
    fn substituted_values_are_reported() {
        let e = expand_env("$TOKEN:$A", &env());
        assert_eq!(e.substituted, vec!["s3cret".to_string(), "1".to_string()]);
    }

    #[test]
    fn whole_value_mode_only_when_leading_dollar() {
        assert_eq!(resolve_env_ref("  $TOKEN ", &env()).text, "s3cret");
        assert_eq!(
            resolve_env_ref("https://x/$TOKEN", &env()).text,
            "https://x/$TOKEN"
        );
    }

    #[test]
    fn path_mode_tilde_then_vars() {
        let home = Path::new("/home/u");
        let e = env();
        assert_eq!(expand_path("~", Some(home), true, &e).unwrap(), "/home/u");
        assert_eq!(
            expand_path("~/w/$A", Some(home), true, &e).unwrap(),
            "/home/u/w/1"
        );
        assert_eq!(
            expand_path("~/w/$A", Some(home), false, &e).unwrap(),
            "/home/u/w/$A"
        );
        assert_eq!(
            expand_path("~user/x", Some(home), true, &e).unwrap(),
            "~user/x"
        );
        assert!(expand_path("~/x", None, true, &e).is_err());
    }
}
