//! The texts of the review and fix turns.

use std::fmt::Write as _;

use super::diff::Diff;
use super::verdict::{Finding, Verdict, VerdictError};
use super::verify::CommandResult;
use crate::agent::text::cut_chars;
use crate::domain::Issue;

/// Longest issue description quoted, in chars.
const MAX_DESCRIPTION_CHARS: usize = 8_000;

/// Where a review turn is asked to be in the phase.
#[derive(Debug, Clone, Copy)]
pub struct Position {
    pub iteration: u32,
    pub max_iterations: u32,
}

/// The review turn: the task, the diff, the commands' results, and how to write the verdict.
pub fn review(issue: &Issue, diff: &Diff, commands: &[CommandResult], at: Position) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Self-review, iteration {} of {}\n",
        at.iteration, at.max_iterations
    );
    s.push_str(
        "Before this work is handed off, review your own changes: the workspace diff and the \
         results of the verification commands are below. Decide whether the work is ready, and \
         write your verdict to `.sortie/review_verdict.json`. Do not change code in this turn.\n\n",
    );
    let _ = writeln!(s, "## The task: {} {}\n", issue.identifier, issue.title);
    if !issue.description.trim().is_empty() {
        let _ = writeln!(
            s,
            "{}\n",
            cut_chars(issue.description.trim(), MAX_DESCRIPTION_CHARS)
        );
    }
    s.push_str("## Workspace diff\n\n");
    match diff {
        Diff::Changes {
            text,
            original_bytes,
            truncated,
        } => {
            if *truncated {
                let _ = writeln!(
                    s,
                    "(Only the first {} of {original_bytes} bytes are shown.)\n",
                    text.len()
                );
            }
            let _ = writeln!(s, "```diff\n{}\n```\n", text.trim_end());
        }
        Diff::Empty => s.push_str("(The work tree has no changes against HEAD.)\n\n"),
        Diff::Unavailable(reason) => {
            let _ = writeln!(s, "(No diff is available: {reason}.)\n");
        }
    }
    s.push_str("## Verification commands\n\n");
    if commands.is_empty() {
        s.push_str("(None ran.)\n\n");
    }
    for c in commands {
        command_section(&mut s, c);
    }
    if at.iteration > 1 {
        s.push_str(
            "Your previous review asked for changes and a fix turn followed; check that the \
             problems it named are solved.\n\n",
        );
    }
    s.push_str(VERDICT_INSTRUCTIONS);
    s
}

const VERDICT_INSTRUCTIONS: &str = "## Your verdict\n\n\
Write `.sortie/review_verdict.json` (replace it if it exists) with this JSON:\n\n\
```json\n\
{\n  \"verdict\": \"pass\",\n  \"summary\": \"one line\",\n  \"issues\": [\n    \
{\"file\": \"path/to/file\", \"line\": 42, \"severity\": \"error\", \"message\": \"what is wrong and how to fix it\"}\n  ]\n}\n\
```\n\n\
Use `\"pass\"` when the changes do the task correctly and every verification command passed; \
the work is then handed off. Use `\"iterate\"` when something must change: you get a turn to \
fix the issues you list. A failing verification command keeps the work from passing whatever \
the verdict says.\n\n\
In this phase the verdict file is how you report. Writing `blocked` to `.sortie/status` still \
ends the run, when you cannot carry the work further; other statuses are ignored here.\n";

fn command_section(s: &mut String, c: &CommandResult) {
    let _ = writeln!(
        s,
        "### `{}`: {} ({} ms)\n",
        c.command,
        c.outcome_words(),
        c.duration_ms
    );
    if !c.output.trim().is_empty() {
        let cut = if c.output_truncated {
            " (the end of it)"
        } else {
            ""
        };
        let _ = writeln!(s, "Output{cut}:\n\n```\n{}\n```\n", c.output.trim_end());
    }
}

/// The fix turn: what the review found, or why it gave no verdict, and the failing commands.
pub fn fix(
    verdict: &Result<Verdict, VerdictError>,
    commands: &[CommandResult],
    at: Position,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Self-review fix, iteration {} of {}\n",
        at.iteration, at.max_iterations
    );
    s.push_str("The review did not pass. Fix what it found, then stop: verification and review run again.\n\n");
    match verdict {
        Ok(v) => {
            if !v.summary.is_empty() {
                let _ = writeln!(s, "Review summary: {}\n", v.summary);
            }
            if v.findings.is_empty() {
                s.push_str("Fix the problems your review described above.\n\n");
            } else {
                s.push_str("## Findings\n\n");
                for f in &v.findings {
                    let _ = writeln!(s, "- {}", finding_line(f));
                }
                s.push('\n');
            }
        }
        Err(reason) => {
            let _ = writeln!(
                s,
                "Your review left no usable verdict ({reason}). Next time write \
                 `.sortie/review_verdict.json` as asked. Meanwhile fix what your review found.\n"
            );
        }
    }
    let failing: Vec<&CommandResult> = commands.iter().filter(|c| !c.passed()).collect();
    if !failing.is_empty() {
        s.push_str("## Failing verification commands\n\n");
        for c in failing {
            command_section(&mut s, c);
        }
    }
    s
}

fn finding_line(f: &Finding) -> String {
    let place = match (f.file.as_str(), f.line) {
        ("", _) => String::new(),
        (file, Some(line)) => format!("{file}:{line}: "),
        (file, None) => format!("{file}: "),
    };
    let severity = if f.severity.is_empty() {
        String::new()
    } else {
        format!("[{}] ", f.severity)
    };
    format!("{severity}{place}{}", f.message)
}

#[cfg(test)]
mod tests {
    use super::super::verdict::VerdictWord;
    use super::*;

    fn issue() -> Issue {
        Issue {
            identifier: "PROJ-7".into(),
            title: "Fix the parser".into(),
            description: "It drops the last line.".into(),
            ..Issue::default()
        }
    }

    fn failing() -> CommandResult {
        CommandResult {
            command: "make test".into(),
            exit_code: Some(2),
            timed_out: false,
            error: None,
            duration_ms: 12,
            output: "assertion failed\n".into(),
            output_truncated: false,
        }
    }

    #[test]
    fn the_review_prompt_carries_diff_commands_and_the_verdict_format() {
        let diff = Diff::Changes {
            text: "+line".into(),
            original_bytes: 900,
            truncated: true,
        };
        let at = Position {
            iteration: 2,
            max_iterations: 3,
        };
        let p = review(&issue(), &diff, &[failing()], at);
        for part in [
            "iteration 2 of 3",
            "PROJ-7 Fix the parser",
            "It drops the last line.",
            "```diff\n+line\n```",
            "first 5 of 900 bytes",
            "`make test`: failed (exit 2)",
            "assertion failed",
            ".sortie/review_verdict.json",
            "previous review",
        ] {
            assert!(p.contains(part), "{part:?} missing from:\n{p}");
        }
        let unavailable = review(
            &issue(),
            &Diff::Unavailable("the workspace is not a git repository".into()),
            &[],
            Position {
                iteration: 1,
                max_iterations: 1,
            },
        );
        assert!(
            unavailable.contains("No diff is available: the workspace is not a git repository")
        );
        assert!(!unavailable.contains("previous review"));
    }

    #[test]
    fn the_fix_prompt_carries_findings_or_the_missing_verdict() {
        let at = Position {
            iteration: 1,
            max_iterations: 3,
        };
        let v = Ok(Verdict {
            word: VerdictWord::Iterate,
            summary: "two problems".into(),
            findings: vec![Finding {
                file: "src/a.rs".into(),
                line: Some(4),
                severity: "error".into(),
                message: "off by one".into(),
            }],
        });
        let p = fix(&v, &[failing()], at);
        assert!(p.contains("[error] src/a.rs:4: off by one"), "{p}");
        assert!(
            p.contains("two problems") && p.contains("assertion failed"),
            "{p}"
        );
        let p = fix(&Err(VerdictError::NotWritten), &[], at);
        assert!(
            p.contains("no usable verdict (no .sortie/review_verdict.json"),
            "{p}"
        );
        assert!(!p.contains("Failing verification"), "{p}");
    }
}
