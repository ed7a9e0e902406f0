//! `match.title`: a literal phrase found in the title as whole words, ignoring letter case
//! and white-space differences.
//!
//! A word is a run of letters, digits and combining marks; every other character separates
//! words. Characters of scripts written without spaces (Han, Hiragana, Katakana, Thai, Lao,
//! Khmer, Myanmar) are words of their own. A phrase that starts or ends with a character that
//! is not part of a word is held to no word boundary on that side. Case folding is the
//! standard library's lowercase mapping, so a letter that only folds under full case folding
//! (`ß` and `ss`) stays distinct.

/// Whether `phrase` occurs in `title` as whole words.
pub fn title_has_phrase(title: &str, phrase: &str) -> bool {
    let t: Vec<char> = normalize(title);
    let p: Vec<char> = normalize(phrase);
    if t.is_empty() || p.is_empty() || p.len() > t.len() {
        return false;
    }
    (0..=t.len() - p.len()).any(|i| t[i..i + p.len()] == p[..] && whole_at(&t, &p, i))
}

fn whole_at(t: &[char], p: &[char], i: usize) -> bool {
    let before_ok = i == 0 || !joins(t[i - 1], p[0]);
    let end = i + p.len();
    let after_ok = end == t.len() || !joins(p[p.len() - 1], t[end]);
    before_ok && after_ok
}

/// Whether two adjacent characters belong to one word.
fn joins(a: char, b: char) -> bool {
    if is_mark(b) {
        return true;
    }
    is_word(a) && is_word(b) && !unspaced(a) && !unspaced(b)
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || is_mark(c)
}

/// Combining marks of the common blocks (the standard library has no general category).
fn is_mark(c: char) -> bool {
    matches!(c as u32,
        0x0300..=0x036F | 0x0483..=0x0489 | 0x0591..=0x05BD | 0x0610..=0x061A
        | 0x064B..=0x065F | 0x0900..=0x0903 | 0x093A..=0x094F | 0x0E31 | 0x0E34..=0x0E3A
        | 0x0E47..=0x0E4E | 0x0EB1 | 0x0EB4..=0x0EBC | 0x0EC8..=0x0ECD | 0x102B..=0x103E
        | 0x17B4..=0x17D3 | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF
        | 0x302A..=0x302F | 0x3099..=0x309A | 0xFE20..=0xFE2F)
}

fn unspaced(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x31F0..=0x31FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF
        | 0xF900..=0xFAFF | 0x20000..=0x2FA1F | 0x0E00..=0x0E7F | 0x0E80..=0x0EFF
        | 0x1780..=0x17FF | 0x1000..=0x109F | 0xFF66..=0xFF9F)
}

/// Lowercased, variation selectors dropped, white-space runs as one space, ends trimmed.
fn normalize(s: &str) -> Vec<char> {
    let mut out = Vec::new();
    let mut space = false;
    for c in s.chars().filter(|c| *c != '\u{FE0E}' && *c != '\u{FE0F}') {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if space && !out.is_empty() {
            out.push(' ');
        }
        space = false;
        out.extend(fold(c));
    }
    out
}

/// Simple case folding: lowercase, then once more through the uppercase form when both are
/// one character, so every case form of a letter folds alike (`ς`, `σ` and `Σ` to `σ`) while a
/// letter that only folds under full case folding (`ß`, whose uppercase is `SS`) stays itself.
fn fold(c: char) -> Vec<char> {
    let lower: Vec<char> = c.to_lowercase().collect();
    if let [l] = lower[..] {
        let upper: Vec<char> = l.to_uppercase().collect();
        if let [u] = upper[..] {
            let again: Vec<char> = u.to_lowercase().collect();
            if let [a] = again[..] {
                return vec![a];
            }
        }
    }
    lower
}

#[cfg(test)]
mod tests {
    use super::title_has_phrase as has;

    #[test]
    fn phrases_match_whole_words_only() {
        assert!(has("Fix login redirect", "fix"));
        assert!(!has("Add prefix to logs", "fix"));
        assert!(!has("Fixes typo in docs", "fix"));
        assert!(has("[INFRA] rotate keys", "[infra]"));
        assert!(!has("Improve infra docs", "[infra]"));
        assert!(has("Improve infra docs", "infra"));
        assert!(has("缓存设计文档", "设计"));
        assert!(has("ΣΟΦΙΑ report", "σοφια"));
        assert!(has("τελος", "ΤΕΛΟΣ") && has("ΤΕΛΟΣ", "τελος") && has("τελοσ", "τελος"));
        assert!(!has("strasse", "straße"));
        assert!(has("fix:   typo\tnow", "fix: typo"));
        assert!(!has("Café opening hours", "cafe"));
        assert!(has("Deploy ✅\u{FE0F} done", "✅ done"));
        assert!(!has("", "fix"));
    }
}
