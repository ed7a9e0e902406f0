//! Static analysis for `sortie validate`: warnings, never errors, about
//! references the data contract cannot satisfy. Only the prompt body is checked: the dot of a
//! `{{define}}` body depends on its callers.

use gotmpl::parse::{Expr, ListNode, Node, PipeNode, SmolStr};

use super::PromptTemplate;
use super::data::{CI_FAILURE_KEYS, ISSUE_KEYS, PARENT_KEYS, ROOT_KEYS, RUN_KEYS};

/// The check that produced a warning; `as_str` is the code `sortie validate` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarningKind {
    /// A root key (`.issue`, `.attempt`, `.run`…) read where dot is a `range`/`with` value.
    DotContext,
    /// A top-level name outside the data contract.
    UnknownVar,
    /// An unknown sub-field of `issue`, `run`, `issue.parent`, `ci_failure`, or any of `attempt`.
    UnknownField,
}

impl WarningKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WarningKind::DotContext => "dot_context",
            WarningKind::UnknownVar => "unknown_var",
            WarningKind::UnknownField => "unknown_field",
        }
    }
}

/// One finding; `line` is a line of the workflow file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptWarning {
    pub kind: WarningKind,
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for PromptWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (line {}): {}",
            self.kind.as_str(),
            self.line,
            self.message
        )
    }
}

/// Warnings for the template's body, in source order.
pub fn lint(t: &PromptTemplate) -> Vec<PromptWarning> {
    let mut linter = Linter {
        offset: t.line_offset(),
        warnings: Vec::new(),
    };
    linter.list(t.parsed(), true);
    linter.warnings
}

struct Linter {
    offset: usize,
    warnings: Vec<PromptWarning>,
}

fn dotted(chain: &[SmolStr]) -> String {
    chain.iter().map(|k| format!(".{k}")).collect()
}

impl Linter {
    fn warn(&mut self, kind: WarningKind, line: usize, message: String) {
        self.warnings.push(PromptWarning {
            kind,
            line: line + self.offset,
            message,
        });
    }

    fn list(&mut self, list: &ListNode, dot_is_root: bool) {
        for node in &list.nodes {
            match node {
                Node::List(l) => self.list(l, dot_is_root),
                Node::Action(a) => self.pipe(&a.pipe, dot_is_root),
                Node::If(b) => {
                    self.pipe(&b.pipe, dot_is_root);
                    self.list(&b.body, dot_is_root);
                    if let Some(e) = &b.else_body {
                        self.list(e, dot_is_root);
                    }
                }
                Node::Range(b) | Node::With(b) => {
                    self.pipe(&b.pipe, dot_is_root);
                    self.list(&b.body, false);
                    if let Some(e) = &b.else_body {
                        self.list(e, dot_is_root);
                    }
                }
                Node::Template(t) => {
                    if let Some(p) = &t.pipe {
                        self.pipe(p, dot_is_root);
                    }
                }
                Node::Define(_) | Node::Text(_) | Node::Break(_) | Node::Continue(_) => {}
            }
        }
    }

    fn pipe(&mut self, pipe: &PipeNode, dot_is_root: bool) {
        for cmd in &pipe.commands {
            for arg in &cmd.args {
                self.expr(arg, dot_is_root);
            }
        }
    }

    fn expr(&mut self, expr: &Expr, dot_is_root: bool) {
        match expr {
            Expr::Field(pos, chain) if dot_is_root => self.root_path(pos.line, "", chain),
            Expr::Field(pos, chain) => {
                if let Some(first) = chain.first()
                    && ROOT_KEYS.contains(&first.as_str())
                {
                    let path = dotted(chain);
                    self.warn(
                        WarningKind::DotContext,
                        pos.line,
                        format!(
                            "{path} inside range/with reads the current element, not the root; use ${path}"
                        ),
                    );
                }
            }
            Expr::Variable(pos, name, chain) if name.as_str() == "$" => {
                self.root_path(pos.line, "$", chain)
            }
            Expr::Pipe(_, p) => self.pipe(p, dot_is_root),
            Expr::Chain(_, inner, _) => self.expr(inner, dot_is_root),
            _ => {}
        }
    }

    fn root_path(&mut self, line: usize, prefix: &str, chain: &[SmolStr]) {
        let Some(top) = chain.first() else { return };
        let path = format!("{prefix}{}", dotted(chain));
        if !ROOT_KEYS.contains(&top.as_str()) {
            self.warn(
                WarningKind::UnknownVar,
                line,
                format!(
                    "{path}: \"{top}\" is not a template variable (known: {})",
                    ROOT_KEYS.join(", ")
                ),
            );
            return;
        }
        let Some(field) = chain.get(1) else { return };
        let known: &[&str] = match top.as_str() {
            "issue" => ISSUE_KEYS,
            "run" => RUN_KEYS,
            "ci_failure" => CI_FAILURE_KEYS,
            "attempt" => &[],
            _ => return,
        };
        if !known.contains(&field.as_str()) {
            let message = if known.is_empty() {
                format!("{path}: {top} is an integer and has no fields")
            } else {
                format!(
                    "{path}: {top} has no field \"{field}\" (known: {})",
                    known.join(", ")
                )
            };
            self.warn(WarningKind::UnknownField, line, message);
            return;
        }
        if top.as_str() == "issue"
            && field.as_str() == "parent"
            && let Some(sub) = chain.get(2)
            && !PARENT_KEYS.contains(&sub.as_str())
        {
            self.warn(
                WarningKind::UnknownField,
                line,
                format!(
                    "{path}: issue.parent has no field \"{sub}\" (known: {})",
                    PARENT_KEYS.join(", ")
                ),
            );
        }
    }
}
