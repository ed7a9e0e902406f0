//! Per-rule template files: relative to the WORKFLOW.md directory and inside it (symlinks and
//! `..` resolved), no front matter, parsed with the prompt template parser. Each path is read
//! once and kept under the path as written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::super::dispatch::{DispatchConfig, RuleTemplate};
use super::super::error::ConfigError;
use super::super::workflow_file::{self, FileReadError, MAX_WORKFLOW_BYTES};
use crate::prompt::PromptTemplate;

/// Every template a rule or the default names, with the field that names it first.
pub(super) fn read_templates(
    cfg: &DispatchConfig,
    workflow_dir: &Path,
) -> Result<BTreeMap<String, RuleTemplate>, ConfigError> {
    let named = cfg
        .rules
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            r.selection
                .template
                .as_ref()
                .map(|t| (format!("dispatch.rules[{i}].template"), t))
        })
        .chain(
            cfg.default
                .template
                .as_ref()
                .map(|t| ("dispatch.default.template".to_string(), t)),
        );
    let mut out = BTreeMap::new();
    for (field, written) in named {
        if out.contains_key(written) {
            continue;
        }
        let template = read_template(written, workflow_dir)
            .map_err(|e| ConfigError::field(field, e.to_string()))?;
        out.insert(written.clone(), template);
    }
    Ok(out)
}

/// Why a per-rule template file is refused; each reads as one line naming the path as written.
#[derive(Debug)]
enum TemplateFileError {
    /// `~/…`, which is not expanded.
    HomeRelative(String),
    Absolute(String),
    /// Outside the WORKFLOW.md directory tree, lexically or through a link.
    Outside(String),
    /// The WORKFLOW.md directory itself cannot be resolved.
    DirUnresolved(PathBuf, std::io::Error),
    NotFound(String, String),
    Unreadable(String, String),
    FrontMatter(String),
    Unparsable(String, String),
}

impl std::fmt::Display for TemplateFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use TemplateFileError as E;
        match self {
            E::HomeRelative(w) => write!(
                f,
                "template path {w:?} must be relative to the WORKFLOW.md directory; \"~\" is not expanded"
            ),
            E::Absolute(w) => write!(
                f,
                "template path {w:?} must be relative to the WORKFLOW.md directory, not absolute"
            ),
            E::Outside(w) => write!(
                f,
                "template path {w:?} resolves outside the WORKFLOW.md directory"
            ),
            E::DirUnresolved(dir, e) => write!(
                f,
                "cannot resolve the WORKFLOW.md directory {}: {e}",
                dir.display()
            ),
            E::NotFound(w, r) => write!(f, "template file {w:?} not found: {r}"),
            E::Unreadable(w, r) => write!(f, "cannot read template file {w:?}: {r}"),
            E::FrontMatter(w) => write!(
                f,
                "template file {w:?} begins with \"---\"; a per-rule template carries no front matter"
            ),
            E::Unparsable(w, e) => write!(f, "template file {w:?} does not parse: {e}"),
        }
    }
}

fn read_template(written: &str, workflow_dir: &Path) -> Result<RuleTemplate, TemplateFileError> {
    use TemplateFileError as E;
    let path = resolve(written, workflow_dir)?;
    let w = || written.to_string();
    let bytes =
        workflow_file::read_regular_file(&path, MAX_WORKFLOW_BYTES).map_err(|e| match e {
            FileReadError::NotFound(r) => E::NotFound(w(), r),
            FileReadError::Unreadable(r) => E::Unreadable(w(), r),
        })?;
    let text = workflow_file::decode_text(&bytes).map_err(|r| E::Unreadable(w(), r.to_string()))?;
    if text.lines().next().is_some_and(|l| l.trim_end() == "---") {
        return Err(E::FrontMatter(w()));
    }
    PromptTemplate::parse(&text, &path.display().to_string(), 0)
        .map_err(|e| E::Unparsable(w(), e.to_string()))?;
    Ok(RuleTemplate { path, text })
}

/// The file inside the WORKFLOW.md directory tree, or why the path is refused.
fn resolve(written: &str, workflow_dir: &Path) -> Result<PathBuf, TemplateFileError> {
    use TemplateFileError as E;
    let w = || written.to_string();
    if written.starts_with('~') {
        return Err(E::HomeRelative(w()));
    }
    if Path::new(written).is_absolute() {
        return Err(E::Absolute(w()));
    }
    if escapes_lexically(written) {
        return Err(E::Outside(w()));
    }
    let dir = workflow_dir
        .canonicalize()
        .map_err(|e| E::DirUnresolved(workflow_dir.to_path_buf(), e))?;
    let path = dir
        .join(written)
        .canonicalize()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => E::NotFound(w(), e.to_string()),
            _ => E::Unreadable(w(), e.to_string()),
        })?;
    if !path.starts_with(&dir) {
        return Err(E::Outside(w()));
    }
    Ok(path)
}

/// Whether `..` components climb above the directory before any file is looked at.
fn escapes_lexically(written: &str) -> bool {
    let mut depth: i64 = 0;
    for c in Path::new(written).components() {
        match c {
            std::path::Component::ParentDir => depth -= 1,
            std::path::Component::Normal(_) => depth += 1,
            _ => {}
        }
        if depth < 0 {
            return true;
        }
    }
    false
}
