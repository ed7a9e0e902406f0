//! Reading every page of a list: by `Link: <…>; rel="next"` URLs, or by an opaque cursor.
//! A next link is only ever sent to the configured server's origin: one naming another origin
//! (a self-hosted forge whose configured public URL differs from the address sortie uses, or
//! a hostile answer) is followed at the configured origin with its path and query, so the
//! credentials never leave for a host the operator did not name. Both stop at a page cap with a warning and the partial result, so a huge
//! backlog cannot stall a poll.

use super::client::HttpClient;
use super::error::{ErrorClass, HttpError};
use super::request::{Request, Response};

/// The `rel="next"` target of a `Link` header, as given (GitHub sends absolute URLs).
pub fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let mut pieces = part.split(';');
        let target = pieces.next()?.trim();
        let is_next = pieces.any(|p| {
            let p = p.trim();
            p == "rel=\"next\"" || p == "rel=next"
        });
        let url = target.strip_prefix('<')?.strip_suffix('>')?;
        (is_next && !url.is_empty()).then(|| url.to_string())
    })
}

/// `scheme://authority` of an absolute URL.
fn origin(url: &str) -> Option<&str> {
    let scheme_end = url.find("://")? + 3;
    let rest = &url[scheme_end..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some(&url[..scheme_end + end])
}

/// `link` with the origin of `base`: its path and query kept, a relative link made absolute.
fn at_origin_of(base: &str, link: &str) -> String {
    let Some(home) = origin(base) else {
        return link.to_string();
    };
    match origin(link) {
        Some(o) if o.eq_ignore_ascii_case(home) => link.to_string(),
        Some(o) => {
            log::debug!(
                link_origin:% = o,
                origin:% = home;
                "next page link names another origin; following it at the configured one"
            );
            format!("{home}{}", &link[o.len()..])
        }
        None => format!("{home}/{}", link.trim_start_matches('/')),
    }
}

/// Sends `first`, then follows `rel="next"` links until none is left or `cap` pages were read
/// (then warns, naming `what`). `items` turns one page into its elements.
pub fn collect_link_pages<T>(
    client: &HttpClient,
    first: Request,
    cap: usize,
    what: &str,
    mut items: impl FnMut(&Response) -> Result<Vec<T>, HttpError>,
) -> Result<Vec<T>, HttpError> {
    let mut out = Vec::new();
    let mut request = first;
    for page in 1..=cap.max(1) {
        let response = client.send(request.clone())?;
        out.extend(items(&response)?);
        let Some(next) = response.header("link").and_then(next_link) else {
            return Ok(out);
        };
        if page == cap.max(1) {
            warn_cap(what, cap, out.len());
            return Ok(out);
        }
        let next = at_origin_of(client.base_url(), &next);
        request = Request {
            url: next,
            query: Vec::new(),
            ..request
        };
    }
    Ok(out)
}

/// One page read by cursor.
pub struct CursorPage<T> {
    pub items: Vec<T>,
    /// The cursor of the next page, when the server gave one.
    pub next: Option<String>,
    /// Whether the server says more pages follow.
    pub has_more: bool,
}

/// Reads pages by cursor: `fetch(None)` first, then `fetch(Some(cursor))`, until a page says
/// no more follow or `cap` pages were read (then warns). A page that says more follow but
/// gives no cursor is a [`ErrorClass::MissingEndCursor`] error.
pub fn collect_cursor_pages<T>(
    cap: usize,
    what: &str,
    mut fetch: impl FnMut(Option<&str>) -> Result<CursorPage<T>, HttpError>,
) -> Result<Vec<T>, HttpError> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 1..=cap.max(1) {
        let p = fetch(cursor.as_deref())?;
        out.extend(p.items);
        if !p.has_more {
            return Ok(out);
        }
        let Some(next) = p.next.filter(|c| !c.is_empty()) else {
            return Err(HttpError::new(
                ErrorClass::MissingEndCursor,
                "GET",
                what,
                format!("page {page} says more follow but gives no cursor"),
            ));
        };
        if page == cap.max(1) {
            warn_cap(what, cap, out.len());
            return Ok(out);
        }
        cursor = Some(next);
    }
    Ok(out)
}

fn warn_cap(what: &str, cap: usize, items: usize) {
    log::warn!(
        list:% = what,
        page_cap:% = cap,
        items_read:% = items;
        "page cap reached, result is partial"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_link_finds_the_next_target_among_others() {
        let link = "<https://h/r?page=1>; rel=\"prev\", <https://h/r?page=3>; rel=\"next\", <https://h/r?page=9>; rel=\"last\"";
        assert_eq!(next_link(link).as_deref(), Some("https://h/r?page=3"));
        assert_eq!(next_link("<https://h/r?page=1>; rel=\"prev\""), None);
        assert_eq!(next_link("garbage"), None);
    }

    #[test]
    fn next_links_stay_on_the_configured_origin() {
        let base = "https://git.example.com:3000/api/v1";
        let same = "https://git.example.com:3000/api/v1/repos/o/r/issues?page=2";
        assert_eq!(at_origin_of(base, same), same);
        assert_eq!(
            at_origin_of(
                base,
                "http://gitea.internal/api/v1/repos/o/r/issues?page=2&limit=50"
            ),
            "https://git.example.com:3000/api/v1/repos/o/r/issues?page=2&limit=50"
        );
        assert_eq!(
            at_origin_of(base, "https://evil.example?page=2"),
            "https://git.example.com:3000?page=2"
        );
        assert_eq!(
            at_origin_of(base, "/api/v1/repos/o/r/issues?page=3"),
            "https://git.example.com:3000/api/v1/repos/o/r/issues?page=3"
        );
        assert_eq!(origin("https://h"), Some("https://h"));
    }

    fn pages(n: usize, cap: usize) -> Result<Vec<usize>, HttpError> {
        let mut calls = 0;
        collect_cursor_pages(cap, "things", |c| {
            calls += 1;
            assert_eq!(c.is_some(), calls > 1);
            Ok(CursorPage {
                items: vec![calls],
                next: Some(format!("c{calls}")),
                has_more: calls < n,
            })
        })
    }

    #[test]
    fn cursor_pages_stop_at_the_end_or_the_cap() {
        assert_eq!(pages(1, 5).ok(), Some(vec![1]));
        assert_eq!(pages(3, 5).ok(), Some(vec![1, 2, 3]));
        assert_eq!(pages(9, 2).ok(), Some(vec![1, 2]));
    }

    #[test]
    fn a_lost_cursor_is_its_own_error() {
        let r: Result<Vec<u8>, _> = collect_cursor_pages(5, "things", |_| {
            Ok(CursorPage {
                items: vec![],
                next: None,
                has_more: true,
            })
        });
        assert_eq!(r.err().map(|e| e.class), Some(ErrorClass::MissingEndCursor));
    }
}
