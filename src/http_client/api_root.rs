//! The API base of an instance URL: forges serve their REST API under a fixed path
//! (`/api/v4`, `/api/v1`) and users configure either the instance or the API URL.

/// `endpoint` without trailing `/`, with `root` appended unless it already ends with it.
pub fn with_api_root(endpoint: &str, root: &str) -> String {
    let base = endpoint.trim().trim_end_matches('/');
    if base.ends_with(root) {
        base.to_string()
    } else {
        format!("{base}{root}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_is_appended_once() {
        assert_eq!(
            with_api_root("https://h.example/ ", "/api/v1"),
            "https://h.example/api/v1"
        );
        assert_eq!(
            with_api_root("https://h.example/sub/api/v1/", "/api/v1"),
            "https://h.example/sub/api/v1"
        );
    }
}
