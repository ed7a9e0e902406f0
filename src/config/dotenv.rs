//! The opt-in `.env` file: only `SORTIE_*` keys, no escapes, no
//! interpolation. Never auto-discovered; re-read on every load.

use std::collections::BTreeMap;
use std::path::Path;

use super::error::ConfigError;

/// Parses `.env` text. `path` only labels error messages.
pub fn parse_dotenv(text: &str, path: &Path) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut out = BTreeMap::new();
    for (idx, raw_line) in text.lines().enumerate() {
        let line_no = idx + 1;
        let line = raw_line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let field = || format!("dotenv {}:{line_no}", path.display());
        let Some((key, value)) = line.split_once('=') else {
            return Err(ConfigError::field(field(), "missing '=' in line"));
        };
        let key = key.trim();
        if !valid_key(key) {
            return Err(ConfigError::field(
                field(),
                format!("invalid key \"{key}\""),
            ));
        }
        if !key.starts_with("SORTIE_") {
            continue;
        }
        out.insert(key.to_string(), strip_quotes(value.trim()).to_string());
    }
    Ok(out)
}

/// `^[A-Za-z_][A-Za-z0-9_]*$` (so `export KEY=…` is rejected).
fn valid_key(key: &str) -> bool {
    let mut chars = key.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Strips one matching pair of outer `"` or `'`.
fn strip_quotes(v: &str) -> &str {
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return &v[1..v.len() - 1];
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> &'static Path {
        Path::new("/w/.env")
    }

    #[test]
    fn parses_keys_quotes_comments_and_filters_prefix() {
        let text = "# comment\n\n  SORTIE_A = one \nSORTIE_B=\"two = 2\"\nSORTIE_C='x'\nOTHER=skip\nSORTIE_D=\"unbalanced'\nSORTIE_E=a#b\r\n";
        let m = parse_dotenv(text, p()).unwrap();
        assert_eq!(m.get("SORTIE_A").map(String::as_str), Some("one"));
        assert_eq!(m.get("SORTIE_B").map(String::as_str), Some("two = 2"));
        assert_eq!(m.get("SORTIE_C").map(String::as_str), Some("x"));
        assert_eq!(m.get("SORTIE_D").map(String::as_str), Some("\"unbalanced'"));
        assert_eq!(m.get("SORTIE_E").map(String::as_str), Some("a#b"));
        assert!(!m.contains_key("OTHER"));
    }

    #[test]
    fn missing_equals_is_an_error_with_line() {
        let e = parse_dotenv("SORTIE_A=1\nnoequals\n", p()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "config: dotenv /w/.env:2: missing '=' in line"
        );
    }

    #[test]
    fn export_prefix_and_bad_keys_are_errors() {
        let e = parse_dotenv("export SORTIE_A=1", p()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "config: dotenv /w/.env:1: invalid key \"export SORTIE_A\""
        );
        let e = parse_dotenv("1A=1", p()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "config: dotenv /w/.env:1: invalid key \"1A\""
        );
        let e = parse_dotenv("=1", p()).unwrap_err();
        assert_eq!(e.to_string(), "config: dotenv /w/.env:1: invalid key \"\"");
    }
}
