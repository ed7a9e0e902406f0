//! A typed reading of the line Claude Code prints most: an assistant message whose content is
//! text, with its usage. It borrows from the line instead of building a `serde_json::Value`
//! tree (no allocation unless a string holds an escape). Anything it is not sure reads the
//! same as the `Value` path refuses the line, which is then parsed as a `Value`: another
//! type, a tool block, an `error` member, a member of an unexpected JSON type, an array where
//! an object belongs, a repeated member.

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use std::borrow::Cow;
use std::fmt;

/// The members of an assistant line the parser uses.
#[derive(Debug, Default)]
pub(super) struct AssistantLine<'a> {
    pub model: Option<Text<'a>>,
    pub id: Option<Text<'a>>,
    /// `message.usage` when it is an object; its counters as `Value::as_u64` reads them.
    pub usage: Option<Usage>,
    /// The text of each `text` block, in order (untrimmed).
    pub texts: Texts<'a>,
}

/// `message.usage`'s counters; a missing or null one is 0.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_creation: u64,
}

/// The text blocks' texts: the first one kept inline, since a message rarely has more.
#[derive(Debug, Default)]
pub(super) struct Texts<'a> {
    first: Option<Text<'a>>,
    rest: Vec<Text<'a>>,
}

impl<'a> Texts<'a> {
    fn push(&mut self, text: Text<'a>) {
        if self.first.is_none() {
            self.first = Some(text);
        } else {
            self.rest.push(text);
        }
    }

    /// Every text, in order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.first.iter().chain(&self.rest).map(|t| &*t.0)
    }
}

/// A string member, borrowed from the line when it holds no escape.
#[derive(Debug)]
pub(super) struct Text<'a>(pub Cow<'a, str>);

/// Reads `line` (trimmed) as an assistant line of text blocks, or `None` when the `Value`
/// path must read it.
pub(super) fn assistant(line: &str) -> Option<AssistantLine<'_>> {
    if !line.starts_with("{\"type\":\"assistant\"") {
        return None;
    }
    let mut de = serde_json::Deserializer::from_str(line);
    let read = Line::deserialize(&mut de).ok()?;
    de.end().ok()?;
    read.0
}

/// Bit flags of the members already read from one object (a repeat refuses the line).
struct Seen(u8);

impl Seen {
    fn first<E: de::Error>(&mut self, bit: u8) -> Result<(), E> {
        if self.0 & bit != 0 {
            return Err(E::custom("repeated member"));
        }
        self.0 |= bit;
        Ok(())
    }
}

/// The whole line; `None` inside when it is valid JSON the fast path leaves to `Value`.
struct Line<'a>(Option<AssistantLine<'a>>);

impl<'de> Line<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(LineVisitor)
    }
}

struct LineVisitor;

impl<'de> Visitor<'de> for LineVisitor {
    type Value = Line<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Line<'de>, A::Error> {
        let mut seen = Seen(0);
        let mut assistant = false;
        let mut message = None;
        while let Some(key) = map.next_key::<Text<'de>>()? {
            match &*key.0 {
                "type" => {
                    seen.first(1)?;
                    assistant = map.next_value::<Text<'de>>()?.0 == "assistant";
                }
                "message" => {
                    seen.first(2)?;
                    message = Some(map.next_value_seed(MessageSeed)?);
                }
                // An error member (a login failure's made-up message) takes the `Value` path.
                "error" => return Err(de::Error::custom("error member")),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Line(message.filter(|_| assistant)))
    }
}

struct MessageSeed;

impl<'de> de::DeserializeSeed<'de> for MessageSeed {
    type Value = AssistantLine<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MessageSeed {
    type Value = AssistantLine<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen = Seen(0);
        let mut out = AssistantLine::default();
        while let Some(key) = map.next_key::<Text<'de>>()? {
            match &*key.0 {
                "model" => {
                    seen.first(1)?;
                    out.model = map.next_value()?;
                }
                "id" => {
                    seen.first(2)?;
                    out.id = map.next_value()?;
                }
                "usage" => {
                    seen.first(4)?;
                    out.usage = map.next_value::<Option<UsageMap>>()?.map(|u| u.0);
                }
                "content" => {
                    seen.first(8)?;
                    if let Some(Blocks(texts)) = map.next_value::<Option<Blocks<'de>>>()? {
                        out.texts = texts;
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(out)
    }
}

/// `usage`, an object only.
struct UsageMap(Usage);

impl<'de> de::Deserialize<'de> for UsageMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(UsageVisitor)
    }
}

struct UsageVisitor;

impl<'de> Visitor<'de> for UsageVisitor {
    type Value = UsageMap;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a usage object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UsageMap, A::Error> {
        let mut seen = Seen(0);
        let mut u = Usage::default();
        while let Some(key) = map.next_key::<Text<'de>>()? {
            let (bit, slot) = match &*key.0 {
                "input_tokens" => (1, &mut u.input),
                "output_tokens" => (2, &mut u.output),
                "cache_read_input_tokens" => (4, &mut u.cache_read),
                "cache_creation_input_tokens" => (8, &mut u.cache_creation),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            seen.first(bit)?;
            *slot = map.next_value::<Option<u64>>()?.unwrap_or(0);
        }
        Ok(UsageMap(u))
    }
}

/// `content`, an array of blocks: the text blocks' texts.
struct Blocks<'a>(Texts<'a>);

impl<'de> de::Deserialize<'de> for Blocks<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_seq(BlocksVisitor)
    }
}

struct BlocksVisitor;

impl<'de> Visitor<'de> for BlocksVisitor {
    type Value = Blocks<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of content blocks")
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Blocks<'de>, A::Error> {
        let mut texts = Texts::default();
        while let Some(Block(text)) = seq.next_element::<Block<'de>>()? {
            if let Some(text) = text {
                texts.push(text);
            }
        }
        Ok(Blocks(texts))
    }
}

/// One content block: `Some(text)` for a text block, `None` for a block the parser skips; a
/// tool block refuses the line.
struct Block<'a>(Option<Text<'a>>);

impl<'de> de::Deserialize<'de> for Block<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(BlockVisitor)
    }
}

struct BlockVisitor;

impl<'de> Visitor<'de> for BlockVisitor {
    type Value = Block<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a content block object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Block<'de>, A::Error> {
        let mut seen = Seen(0);
        let mut kind: Option<Text<'de>> = None;
        let mut text: Option<Text<'de>> = None;
        while let Some(key) = map.next_key::<Text<'de>>()? {
            match &*key.0 {
                "type" => {
                    seen.first(1)?;
                    kind = map.next_value()?;
                }
                "text" => {
                    seen.first(2)?;
                    text = map.next_value()?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        match kind.as_ref().map(|k| &*k.0) {
            Some("text") => Ok(Block(Some(text.unwrap_or(Text(Cow::Borrowed("")))))),
            Some("tool_use" | "tool_result") => Err(de::Error::custom("tool block")),
            _ => Ok(Block(None)),
        }
    }
}

impl<'de> de::Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(TextVisitor)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Borrowed(s)))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Owned(s.to_string())))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Owned(s)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::parser::ClaudeParser;
    use crate::agent::stream::StreamParser;
    use crate::clock::ManualClock;
    use std::sync::Arc;

    fn parser() -> ClaudeParser {
        ClaudeParser::new(Arc::new(ManualClock::new(5_000)), "/ws".into(), None)
    }

    /// The same line through the typed path and through the `Value` path (the line wrapped
    /// in spaces and a leading member, which the typed path refuses) gives the same events.
    fn same_events(line: &str) {
        let typed = parser().on_line(line.as_bytes());
        let slow = format!(" {{\"uuid\":1,{}", &line[1..]);
        assert!(super::assistant(slow.trim()).is_none());
        let value = parser().on_line(slow.as_bytes());
        assert_eq!(typed, value, "{line}");
    }

    #[test]
    fn assistant_text_lines_read_the_same_both_ways() {
        for line in [
            r#"{"type":"assistant","message":{"id":"m1","model":"claude-x","content":[{"type":"text","text":" Hi \"there\"\n "}],"usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":null}}}"#,
            r#"{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"thinking","thinking":"x"},{"type":"text","text":"a"},{"type":"text","text":"b"}],"usage":null}}"#,
            r#"{"type":"assistant","message":{"content":null,"usage":{"input_tokens":3,"output_tokens":0,"server_tool_use":{"a":1}}}}"#,
            r#"{"type":"assistant","message":{"id":null,"content":[{"type":null},{"type":"text"}],"usage":{"output_tokens":7}}}"#,
        ] {
            assert!(super::assistant(line).is_some(), "{line}");
            same_events(line);
        }
    }

    #[test]
    fn lines_the_typed_path_is_not_sure_of_are_refused() {
        for line in [
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}]}}"#,
            r#"{"type":"assistant","error":"authentication_failed","message":{"content":[]}}"#,
            r#"{"type":"assistant","message":{"usage":[1,2]}}"#,
            r#"{"type":"assistant","message":{"usage":{"input_tokens":1.5}}}"#,
            r#"{"type":"assistant","message":{"usage":{"input_tokens":-1}}}"#,
            r#"{"type":"assistant","message":{"model":"a","model":"b"}}"#,
            r#"{"type":"assistant","message":{"content":"text"}}"#,
            r#"{"type":"assistant","message":{"content":["text"]}}"#,
            r#"{"type":"assistant","message":null}"#,
            r#"{"type":"assistant"}"#,
            r#"{"type":"assistant","type":"user","message":{}}"#,
            r#"{"type":"assistant_x","message":{}}"#,
            r#"{"type":"assistant","message":{}} x"#,
            r#"{"type":"user","message":{}}"#,
        ] {
            assert!(super::assistant(line).is_none(), "{line}");
        }
    }
}
