//! Token figures: `null` where unmeasured, never a zero that reads as a measurement.

use schemars::JsonSchema;
use serde::Serialize;

/// The five token counts of a session, a run or an issue.
#[derive(Debug, Clone, Copy, Default, Serialize, JsonSchema, PartialEq, Eq)]
#[schemars(rename = "Tokens")]
pub struct TokensView {
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub total_tokens: Option<i64>,
    pub cache_read_tokens: Option<i64>,
    pub cache_write_tokens: Option<i64>,
}

impl TokensView {
    /// All five figures, or all five `null`.
    pub fn measured(figures: Option<[i64; 5]>) -> TokensView {
        match figures {
            Some([i, o, t, r, w]) => TokensView {
                input_tokens: Some(i),
                output_tokens: Some(o),
                total_tokens: Some(t),
                cache_read_tokens: Some(r),
                cache_write_tokens: Some(w),
            },
            None => TokensView::default(),
        }
    }

    /// Each figure through `f` (a figure that may read as `null` on its own).
    pub fn each(figures: [i64; 5], f: impl Fn(i64) -> Option<i64>) -> TokensView {
        let [i, o, t, r, w] = figures;
        TokensView {
            input_tokens: f(i),
            output_tokens: f(o),
            total_tokens: f(t),
            cache_read_tokens: f(r),
            cache_write_tokens: f(w),
        }
    }
}
