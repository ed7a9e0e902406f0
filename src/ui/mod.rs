//! The dashboard under `/ui/` (seed "GET /ui/"): a vanilla ES-module single-page app embedded
//! in the binary. Every non-asset path below `/ui/` answers the same HTML so screens can be
//! bookmarked; assets carry content hashes in their names and are cached forever; the HTML is
//! revalidated (`no-cache` + ETag). The app reads only the JSON API and the event stream.

mod assets;
pub mod etag;

pub use assets::short_hash;

/// A response for the HTTP layer to send as is (for HEAD, without the body).
#[derive(Debug, Clone, PartialEq)]
pub struct UiResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Same-origin scripts, styles and connections only; no framing, no plugins, no forms
/// posting elsewhere.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; img-src 'self' data:; manifest-src 'self'; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const CACHE_IMMUTABLE: &str = "public, max-age=31536000, immutable";
const CACHE_REVALIDATE: &str = "no-cache";

/// Answers a dashboard path (`/ui`, `/ui/...`, `/favicon.ico`); `None` for any other path.
/// `path` excludes the query string; `if_none_match` is the request's header, if any.
pub fn serve(path: &str, if_none_match: Option<&str>) -> Option<UiResponse> {
    let path = path.split(['?', '#']).next().unwrap_or(path);
    let b = assets::bundle();
    if path == "/favicon.ico" {
        return Some(found(&b.favicon, "public, max-age=86400", if_none_match));
    }
    if path == "/ui" {
        return Some(respond(
            308,
            vec![("Location".into(), "/ui/".into())],
            Vec::new(),
        ));
    }
    let rest = path.strip_prefix("/ui/")?;
    if let Some(file) = rest.strip_prefix("assets/") {
        return Some(match b.assets.get(file) {
            Some(asset) => found(asset, CACHE_IMMUTABLE, if_none_match),
            None => not_found(),
        });
    }
    Some(found(&b.index, CACHE_REVALIDATE, if_none_match))
}

fn found(asset: &assets::Asset, cache: &str, if_none_match: Option<&str>) -> UiResponse {
    let mut headers = vec![
        ("Cache-Control".to_string(), cache.to_string()),
        ("ETag".to_string(), asset.etag.clone()),
    ];
    if if_none_match.is_some_and(|h| etag::matches(h, &asset.etag)) {
        return respond(304, headers, Vec::new());
    }
    headers.insert(0, ("Content-Type".into(), asset.content_type.into()));
    respond(200, headers, asset.body.clone())
}

fn not_found() -> UiResponse {
    respond(
        404,
        vec![
            ("Content-Type".into(), "text/plain; charset=utf-8".into()),
            ("Cache-Control".into(), CACHE_REVALIDATE.into()),
        ],
        b"not found\n".to_vec(),
    )
}

fn respond(status: u16, mut headers: Vec<(String, String)>, body: Vec<u8>) -> UiResponse {
    headers.push(("X-Content-Type-Options".into(), "nosniff".into()));
    headers.push((
        "Content-Security-Policy".into(),
        CONTENT_SECURITY_POLICY.into(),
    ));
    headers.push(("X-Frame-Options".into(), "DENY".into()));
    headers.push(("Referrer-Policy".into(), "same-origin".into()));
    UiResponse {
        status,
        headers,
        body,
    }
}

#[cfg(test)]
mod tests;
