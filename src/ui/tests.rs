use super::*;

fn header<'a>(r: &'a UiResponse, name: &str) -> Option<&'a str> {
    r.headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn app_js_path() -> String {
    format!("/ui/assets/{}", assets::bundle().names["app.js"])
}

#[test]
fn every_screen_path_answers_the_same_revalidated_html() {
    let root = serve("/ui/", None).expect("ui path");
    assert_eq!(root.status, 200);
    assert_eq!(
        header(&root, "Content-Type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(header(&root, "Cache-Control"), Some("no-cache"));
    for p in [
        "/ui/issues/MT-649",
        "/ui/runs",
        "/ui/health",
        "/ui/a/b/c?x=1",
    ] {
        let r = serve(p, None).expect("ui path");
        assert_eq!(r.status, 200, "{p}");
        assert_eq!(r.body, root.body, "{p}");
        assert_eq!(header(&r, "ETag"), header(&root, "ETag"));
    }
    let html = String::from_utf8_lossy(&root.body);
    assert!(html.contains(&app_js_path()));
}

#[test]
fn matching_if_none_match_answers_304_without_body() {
    let first = serve("/ui/", None).expect("ui path");
    let tag = header(&first, "ETag").expect("etag").to_string();
    let again = serve("/ui/issues/X-1", Some(&tag)).expect("ui path");
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());
    assert_eq!(header(&again, "ETag"), Some(tag.as_str()));
    let stale = serve("/ui/", Some("\"0000000000\"")).expect("ui path");
    assert_eq!(stale.status, 200);
    let js = serve(&app_js_path(), None).expect("asset");
    let js_tag = header(&js, "ETag").expect("etag").to_string();
    assert_eq!(
        serve(&app_js_path(), Some(&js_tag)).map(|r| r.status),
        Some(304)
    );
}

#[test]
fn hashed_assets_are_immutable_and_typed() {
    let b = assets::bundle();
    for file in b.assets.keys() {
        let r = serve(&format!("/ui/assets/{file}"), None).expect("asset");
        assert_eq!(r.status, 200, "{file}");
        assert_eq!(
            header(&r, "Cache-Control"),
            Some("public, max-age=31536000, immutable")
        );
        let ct = header(&r, "Content-Type").unwrap_or_default();
        if file.ends_with(".js") {
            assert_eq!(ct, "text/javascript; charset=utf-8");
        } else {
            assert_eq!(ct, "text/css; charset=utf-8", "{file}");
        }
    }
}

#[test]
fn unknown_or_unhashed_assets_are_404() {
    for p in [
        "/ui/assets/app.js",
        "/ui/assets/app.css",
        "/ui/assets/app.0000000000.js",
        "/ui/assets/favicon.ico",
        "/ui/assets/",
        "/ui/assets/../index.html",
    ] {
        let r = serve(p, None).expect("ui path");
        assert_eq!(r.status, 404, "{p}");
        assert_eq!(header(&r, "X-Content-Type-Options"), Some("nosniff"));
    }
}

#[test]
fn every_response_has_nosniff_and_the_same_origin_csp() {
    for p in [
        "/ui/",
        "/ui",
        "/favicon.ico",
        "/ui/assets/nope.js",
        &app_js_path(),
    ] {
        let r = serve(p, None).expect("ui path");
        assert_eq!(header(&r, "X-Content-Type-Options"), Some("nosniff"), "{p}");
        let csp = header(&r, "Content-Security-Policy").unwrap_or_default();
        for d in [
            "script-src 'self'",
            "style-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(d), "{p}: {csp}");
        }
    }
}

#[test]
fn ui_without_slash_redirects_and_other_paths_are_not_ours() {
    let r = serve("/ui", None).expect("ui path");
    assert_eq!(r.status, 308);
    assert_eq!(header(&r, "Location"), Some("/ui/"));
    for p in ["/", "/api/v1/state", "/uix", "/metrics", "/livez"] {
        assert!(serve(p, None).is_none(), "{p}");
    }
}

#[test]
fn favicon_is_an_icon() {
    let r = serve("/favicon.ico", None).expect("favicon");
    assert_eq!(r.status, 200);
    assert_eq!(header(&r, "Content-Type"), Some("image/x-icon"));
    // ICONDIR: reserved 0, type 1.
    assert_eq!(&r.body[..4], &[0, 0, 1, 0]);
}
