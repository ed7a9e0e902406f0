//! The OpenAPI 3.1 document served at `GET /api/v1/openapi.json`.

use serde_json::{Value, json};

pub fn document() -> Value {
    json!({"openapi": "3.1.0"})
}
