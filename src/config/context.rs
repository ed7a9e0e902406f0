//! What building the typed config needs besides the raw map: a leaf the section builders
//! share with [`super::build`].

use std::collections::BTreeMap;
use std::path::Path;

use super::overrides::Overridden;

/// What building needs besides the raw map: the injected environment and the two bases that
/// relative paths resolve against.
pub struct BuildContext<'a> {
    pub env: &'a BTreeMap<String, String>,
    pub home: Option<&'a Path>,
    pub cwd: &'a Path,
    pub workflow_dir: &'a Path,
    pub overridden: &'a Overridden,
}
