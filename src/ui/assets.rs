//! The dashboard's files, embedded in the binary, and their content-hashed names.
//!
//! The scripts are ES modules that import each other by plain relative names (`./api.js`).
//! Hashing happens once per process: leaves first, each module's imports are rewritten to
//! their dependencies' hashed names before the module itself is hashed, so a change in any
//! module changes the names of everything that imports it and stale caches are impossible
//! even with `immutable`. No build step, no bundler.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

/// A source file: logical name, contents, content type.
struct Source {
    name: &'static str,
    body: &'static [u8],
    content_type: &'static str,
}

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// Dependencies before their importers (checked by a test).
const SOURCES: &[Source] = &[
    Source {
        name: "app.css",
        body: include_bytes!("../../assets/app.css"),
        content_type: CSS,
    },
    Source {
        name: "workflow.js",
        body: include_bytes!("../../assets/workflow.js"),
        content_type: JS,
    },
    Source {
        name: "dom.js",
        body: include_bytes!("../../assets/dom.js"),
        content_type: JS,
    },
    Source {
        name: "api.js",
        body: include_bytes!("../../assets/api.js"),
        content_type: JS,
    },
    Source {
        name: "stream.js",
        body: include_bytes!("../../assets/stream.js"),
        content_type: JS,
    },
    Source {
        name: "reactions.js",
        body: include_bytes!("../../assets/reactions.js"),
        content_type: JS,
    },
    Source {
        name: "stages.js",
        body: include_bytes!("../../assets/stages.js"),
        content_type: JS,
    },
    Source {
        name: "charts.js",
        body: include_bytes!("../../assets/charts.js"),
        content_type: JS,
    },
    Source {
        name: "overview.js",
        body: include_bytes!("../../assets/overview.js"),
        content_type: JS,
    },
    Source {
        name: "issue.js",
        body: include_bytes!("../../assets/issue.js"),
        content_type: JS,
    },
    Source {
        name: "runs.js",
        body: include_bytes!("../../assets/runs.js"),
        content_type: JS,
    },
    Source {
        name: "health.js",
        body: include_bytes!("../../assets/health.js"),
        content_type: JS,
    },
    Source {
        name: "prices.js",
        body: include_bytes!("../../assets/prices.js"),
        content_type: JS,
    },
    Source {
        name: "workflows.js",
        body: include_bytes!("../../assets/workflows.js"),
        content_type: JS,
    },
    Source {
        name: "app.js",
        body: include_bytes!("../../assets/app.js"),
        content_type: JS,
    },
];

const INDEX_TEMPLATE: &str = include_str!("../../assets/index.html");
pub const FAVICON: &[u8] = include_bytes!("../../assets/favicon.ico");

/// One servable asset.
#[derive(Debug)]
pub struct Asset {
    pub body: Vec<u8>,
    pub content_type: &'static str,
    /// Quoted strong ETag.
    pub etag: String,
}

/// The hashed asset table plus the rendered index document.
#[derive(Debug)]
pub struct Bundle {
    /// Hashed file name (`app.1a2b3c4d5e.js`) → asset.
    pub assets: BTreeMap<String, Asset>,
    /// Logical name → hashed file name (read by the tests).
    #[cfg_attr(not(test), allow(dead_code))]
    pub names: BTreeMap<&'static str, String>,
    pub index: Asset,
    pub favicon: Asset,
}

/// First 10 hex digits of SHA-256: enough to tell versions of one file apart.
pub fn short_hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    data_encoding::HEXLOWER.encode(&digest[..5])
}

fn hashed_name(name: &str, hash: &str) -> String {
    match name.rsplit_once('.') {
        Some((stem, ext)) => format!("{stem}.{hash}.{ext}"),
        None => format!("{name}.{hash}"),
    }
}

/// Rewrites `"./dep.js"` / `'./dep.js'` specifiers to the hashed names known so far.
fn rewrite_imports(body: &[u8], names: &BTreeMap<&'static str, String>) -> Vec<u8> {
    let mut text = String::from_utf8_lossy(body).into_owned();
    for (logical, hashed) in names {
        if !logical.ends_with(".js") {
            continue;
        }
        for q in ['"', '\''] {
            text = text.replace(&format!("{q}./{logical}{q}"), &format!("{q}./{hashed}{q}"));
        }
    }
    text.into_bytes()
}

fn build() -> Bundle {
    let mut names = BTreeMap::new();
    let mut assets = BTreeMap::new();
    for s in SOURCES {
        let body = if s.content_type == JS {
            rewrite_imports(s.body, &names)
        } else {
            s.body.to_vec()
        };
        let hash = short_hash(&body);
        let file = hashed_name(s.name, &hash);
        names.insert(s.name, file.clone());
        assets.insert(
            file,
            Asset {
                body,
                content_type: s.content_type,
                etag: format!("\"{hash}\""),
            },
        );
    }
    let mut html = INDEX_TEMPLATE.to_string();
    for (logical, hashed) in &names {
        html = html.replace(
            &format!("{{{{{logical}}}}}"),
            &format!("/ui/assets/{hashed}"),
        );
    }
    html = html.replace("{{version}}", crate::build_info::VERSION);
    let index_hash = short_hash(html.as_bytes());
    Bundle {
        assets,
        names,
        index: Asset {
            body: html.into_bytes(),
            content_type: "text/html; charset=utf-8",
            etag: format!("\"{index_hash}\""),
        },
        favicon: Asset {
            body: FAVICON.to_vec(),
            content_type: "image/x-icon",
            etag: format!("\"{}\"", short_hash(FAVICON)),
        },
    }
}

/// The bundle, built on first use.
pub fn bundle() -> &'static Bundle {
    static BUNDLE: OnceLock<Bundle> = OnceLock::new();
    BUNDLE.get_or_init(build)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every relative import in every module names a hashed sibling that exists.
    #[test]
    fn every_import_resolves_to_a_hashed_asset() {
        let b = bundle();
        for (file, asset) in &b.assets {
            if asset.content_type != JS {
                continue;
            }
            let text = String::from_utf8_lossy(&asset.body);
            for spec in text.split("from ").skip(1) {
                let spec = spec.trim_start();
                let Some(q) = spec.chars().next().filter(|c| *c == '"' || *c == '\'') else {
                    continue;
                };
                let Some(end) = spec[1..].find(q) else {
                    continue;
                };
                let target = &spec[1..1 + end];
                let target = target.trim_start_matches("./");
                assert!(
                    b.assets.contains_key(target),
                    "{file} imports {target}, which is not a hashed asset (list order?)"
                );
            }
        }
    }

    #[test]
    fn index_names_the_hashed_entry_points() {
        let b = bundle();
        let html = String::from_utf8_lossy(&b.index.body);
        assert!(!html.contains("{{"), "unreplaced placeholder in index.html");
        assert!(html.contains(&format!("/ui/assets/{}", b.names["app.js"])));
        assert!(html.contains(&format!("/ui/assets/{}", b.names["app.css"])));
    }

    #[test]
    fn an_importer_hash_follows_its_dependency() {
        let mut names = BTreeMap::new();
        names.insert("dom.js", "dom.aaaa.js".to_string());
        let a = rewrite_imports(b"import { h } from \"./dom.js\";", &names);
        names.insert("dom.js", "dom.bbbb.js".to_string());
        let b = rewrite_imports(b"import { h } from \"./dom.js\";", &names);
        assert_ne!(short_hash(&a), short_hash(&b));
        assert_eq!(a, b"import { h } from \"./dom.aaaa.js\";");
    }
}
