//! Which models run history records spend on, per agent kind: the rows of the Prices screen
//! that come from history. A run's per-model parts count when it recorded some; otherwise the
//! run counts under its reported model when it spent tokens at all.

use rusqlite::Connection;

use super::error::{SqlContext, StoreError};
use super::scope::{self, Scope};

/// One agent kind and model with recorded spend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelUse {
    pub agent_kind: String,
    /// `""` for runs that reported no model.
    pub model: String,
    /// Runs that spent tokens on the model under the kind.
    pub runs: i64,
    /// The latest such run's completion time, as stored (RFC 3339).
    pub last_used_at: String,
}

/// `model_usage` when it is a JSON array, else `'[]'` (evaluated lazily, so a malformed
/// stored value never reaches `json_type`).
const PARTS: &str = "CASE WHEN json_valid(r.model_usage) THEN \
     (CASE WHEN json_type(r.model_usage) = 'array' THEN r.model_usage ELSE '[]' END) \
     ELSE '[]' END";

/// Every kind and model with recorded spend, latest use first, then kind and model.
pub(crate) fn load(conn: &Connection, sc: &Scope) -> Result<Vec<ModelUse>, StoreError> {
    let in_scope = scope::filter("r.workflow", 1);
    let sql = format!(
        "SELECT agent_adapter, model, COUNT(*), MAX(completed_at) FROM (
             SELECT r.id, r.agent_adapter,
                    COALESCE(json_extract(j.value, '$.model'), '') AS model, r.completed_at
               FROM run_history r, json_each({PARTS}) j
              WHERE {in_scope}
             UNION
             SELECT r.id, r.agent_adapter, r.reported_model AS model, r.completed_at
               FROM run_history r
              WHERE r.total_tokens > 0 AND json_array_length({PARTS}) = 0 AND {in_scope}
         )
         GROUP BY agent_adapter, model
         ORDER BY MAX(completed_at) DESC, agent_adapter, model"
    );
    let mut stmt = conn.prepare(&sql).ctx("prepare model use")?;
    let rows = stmt
        .query_map([sc.bound()], |r| {
            Ok(ModelUse {
                agent_kind: r.get(0)?,
                model: r.get(1)?,
                runs: r.get(2)?,
                last_used_at: r.get(3)?,
            })
        })
        .ctx("read model use")?;
    let mut out = Vec::new();
    for row in rows {
        out.push(row.ctx("read model use row")?);
    }
    Ok(out)
}
