//! The body of `GET /api/v1/stats`. The shape belongs to the shared aggregation
//! ([`crate::store::stats::report`]), because `sortie stats --format json` prints the same
//! body; it is re-exported here so the OpenAPI document names it beside the other views.

pub use crate::store::stats::report::StatsReport;
