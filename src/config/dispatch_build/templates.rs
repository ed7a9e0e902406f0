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
        let template =
            read_template(written, workflow_dir).map_err(|m| ConfigError::field(field, m))?;
        out.insert(written.clone(), template);
    }
    Ok(out)
}

fn read_template(written: &str, workflow_dir: &Path) -> Result<RuleTemplate, String> {
    let path = resolve(written, workflow_dir)?;
    let bytes =
        workflow_file::read_regular_file(&path, MAX_WORKFLOW_BYTES).map_err(|e| match e {
            FileReadError::NotFound(r) => format!("template file {written:?} not found: {r}"),
            FileReadError::Unreadable(r) => format!("cannot read template file {written:?}: {r}"),
        })?;
    let text = workflow_file::decode_text(&bytes)
        .map_err(|r| format!("cannot read template file {written:?}: {r}"))?;
    if text.lines().next().is_some_and(|l| l.trim_end() == "---") {
        return Err(format!(
            "template file {written:?} begins with \"---\"; a per-rule template carries no front matter"
        ));
    }
    PromptTemplate::parse(&text, &path.display().to_string(), 0)
        .map_err(|e| format!("template file {written:?} does not parse: {e}"))?;
    Ok(RuleTemplate { path, text })
}

/// The file inside the WORKFLOW.md directory tree, or why the path is refused.
fn resolve(written: &str, workflow_dir: &Path) -> Result<PathBuf, String> {
    if written.starts_with('~') {
        return Err(format!(
            "template path {written:?} must be relative to the WORKFLOW.md directory; \"~\" is not expanded"
        ));
    }
    if Path::new(written).is_absolute() {
        return Err(format!(
            "template path {written:?} must be relative to the WORKFLOW.md directory, not absolute"
        ));
    }
    if escapes_lexically(written) {
        return Err(format!(
            "template path {written:?} resolves outside the WORKFLOW.md directory"
        ));
    }
    let dir = workflow_dir.canonicalize().map_err(|e| {
        format!(
            "cannot resolve the WORKFLOW.md directory {}: {e}",
            workflow_dir.display()
        )
    })?;
    let path = dir
        .join(written)
        .canonicalize()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!("template file {written:?} not found: {e}"),
            _ => format!("cannot read template file {written:?}: {e}"),
        })?;
    if !path.starts_with(&dir) {
        return Err(format!(
            "template path {written:?} resolves outside the WORKFLOW.md directory"
        ));
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
