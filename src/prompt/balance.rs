//! Block balance check: gotmpl 0.6.1 silently accepts an unclosed `{{if}}`/`{{range}}`/
//! `{{with}}`/`{{define}}`/`{{block}}` and stops at a stray `{{end}}` or `{{else}}`, dropping
//! the rest of the prompt. Go reports these as parse errors, so the source is scanned here
//! (after gotmpl accepted its syntax) and the first imbalance is returned with its line.

/// `(template line, message)` of the first block imbalance, if any.
pub(crate) fn block_imbalance(source: &str) -> Option<(usize, String)> {
    let mut open: Vec<(usize, &str)> = Vec::new();
    let mut rest = source;
    let mut line = 1;
    while let Some(start) = rest.find("{{") {
        line += rest[..start].matches('\n').count();
        let action_start = &rest[start + 2..];
        let len = action_len(action_start);
        let action = &action_start[..len];
        let keyword = first_word(action);
        match keyword {
            "if" | "range" | "with" | "define" | "block" => open.push((line, keyword)),
            "else" if open.is_empty() => return Some((line, "unexpected {{else}}".to_string())),
            "end" if open.pop().is_none() => {
                return Some((line, "unexpected {{end}}".to_string()));
            }
            _ => {}
        }
        line += action.matches('\n').count();
        rest = action_start.get(len + 2..).unwrap_or("");
    }
    open.pop().map(|(opened, keyword)| {
        (
            opened,
            format!("unexpected EOF: {{{{{keyword}}}}} is never closed with {{{{end}}}}"),
        )
    })
}

/// The action's keyword, after an optional `-` trim marker.
fn first_word(action: &str) -> &str {
    let body = action.strip_prefix('-').unwrap_or(action).trim_start();
    let end = body
        .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .unwrap_or(body.len());
    &body[..end]
}

/// Byte length of the action text before its closing `}}`: skips comments and quoted or raw
/// strings, which may contain `}}`.
fn action_len(action: &str) -> usize {
    let trimmed = action.strip_prefix('-').map_or(0, |_| 1);
    let lead = action[trimmed..].len() - action[trimmed..].trim_start().len();
    if action[trimmed + lead..].starts_with("/*") {
        let from = trimmed + lead + 2;
        return match action[from..].find("*/") {
            Some(i) => match action[from + i + 2..].find("}}") {
                Some(j) => from + i + 2 + j,
                None => action.len(),
            },
            None => action.len(),
        };
    }
    let bytes = action.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'}' if bytes.get(i + 1) == Some(&b'}') => return i,
            quote @ (b'"' | b'\'') => {
                i += 1;
                while i < bytes.len() && bytes[i] != quote {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'`' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'`' {
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    action.len()
}

#[cfg(test)]
mod tests {
    use super::block_imbalance;

    #[test]
    fn balanced_templates_pass() {
        let src = "{{- if .a -}}{{ \"}}{{end}}\" }}{{ `{{if` }}{{/* {{if}} }} */}}\n{{ else if .b }}{{ range .c }}{{ end }}{{ end }}{{ define \"x\" }}{{ end }}{{ block \"y\" . }}{{ end }}";
        assert_eq!(block_imbalance(src), None);
    }

    #[test]
    fn unclosed_and_stray_blocks_are_found_with_lines() {
        assert_eq!(
            block_imbalance("a\n{{ if .x }}\nb"),
            Some((
                2,
                "unexpected EOF: {{if}} is never closed with {{end}}".to_string()
            ))
        );
        assert_eq!(
            block_imbalance("a\n\n{{- end }}"),
            Some((3, "unexpected {{end}}".to_string()))
        );
        assert_eq!(
            block_imbalance("{{ `multi\nline` }}\n{{else}}"),
            Some((3, "unexpected {{else}}".to_string()))
        );
    }
}
