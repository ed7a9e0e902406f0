//! JSON text → `serde_json::Value` with a ceiling on what the tree may cost in memory. A tree
//! costs several times its text when the text is made of small values (`[{},{},…]` costs
//! some twenty times its size), so an answer within its byte cap could still take far more
//! memory once parsed; the parse counts an estimate of each node's memory as it builds the
//! tree and stops with an error at the ceiling, before the memory is taken.

use std::cell::Cell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Estimated bytes of one `Value` (the enum itself, inline in its parent).
const NODE: usize = std::mem::size_of::<Value>();
/// Estimated bytes of one object entry beside its value: the key's `String` and the map's
/// own bookkeeping per entry.
const ENTRY: usize = 48;

/// Parses `bytes` as JSON whose tree may cost at most `max_cost` bytes; the error says why
/// (a syntax error, or the ceiling).
pub fn parse_bounded(bytes: &[u8], max_cost: usize) -> Result<Value, serde_json::Error> {
    let left = Cell::new(max_cost);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Bounded {
        left: &left,
        ceiling: max_cost,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

#[derive(Clone, Copy)]
struct Bounded<'a> {
    left: &'a Cell<usize>,
    ceiling: usize,
}

impl Bounded<'_> {
    fn charge<E: serde::de::Error>(&self, bytes: usize) -> Result<(), E> {
        match self.left.get().checked_sub(bytes) {
            Some(rest) => {
                self.left.set(rest);
                Ok(())
            }
            None => Err(E::custom(format_args!(
                "the parsed answer would take more than {} of memory",
                super::budget::size_text(self.ceiling as u64)
            ))),
        }
    }
}

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        self.charge(NODE)?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        self.charge(NODE)?;
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        self.charge(NODE)?;
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        self.charge(NODE)?;
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        self.charge(NODE + v.len())?;
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        self.charge(NODE + v.len())?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        self.charge(NODE)?;
        Ok(Value::Null)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.charge(NODE)?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            // A growing vector may hold up to twice its length.
            self.charge::<A::Error>(NODE)?;
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.charge(NODE)?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            self.charge::<A::Error>(ENTRY + key.len())?;
            let value = map.next_value_seed(self)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// Whether a parse failed on the ceiling rather than on the text.
pub fn is_ceiling(e: &serde_json::Error) -> bool {
    e.is_data() && e.to_string().contains("of memory")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_within_its_ceiling_is_the_plain_parse() {
        let text = br#"{"a": [1, -2, 2.5, true, null, "x"], "b": {"c": "d"}, "a2": {}}"#;
        let plain: Value = serde_json::from_slice(text).unwrap_or(Value::Null);
        assert_eq!(parse_bounded(text, 1 << 20).ok(), Some(plain));
        let e = parse_bounded(b"[1, 2", 1 << 20).err();
        assert!(e.is_some_and(|e| !is_ceiling(&e)));
        assert!(parse_bounded(b"[1] x", 1 << 20).is_err(), "trailing text");
    }

    #[test]
    fn many_small_values_stop_at_the_ceiling_not_at_the_end() {
        let bomb = format!("[{}{{}}]", "{},".repeat(100_000));
        assert!(bomb.len() < 310_000);
        let e = parse_bounded(bomb.as_bytes(), 1 << 20).err();
        assert!(e.as_ref().is_some_and(is_ceiling), "{e:?}");
        assert!(
            e.is_some_and(|e| e.to_string().contains("more than 1 MiB")),
            "the ceiling names itself"
        );
        // The same count of values fits a ceiling that is large enough.
        assert!(parse_bounded(bomb.as_bytes(), 64 << 20).is_ok());
    }
}
