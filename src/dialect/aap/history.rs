//! AAP messages ⇄ canonical messages (`translation.md` §4.1, §4.3 "Message conversion").
//!
//! Canonical → AAP: consecutive assistant and reasoning messages make one AAP assistant message
//! (blocks `thinking`, `text`, `tool_use` in order) until a tool message; content is always
//! written as blocks. AAP → canonical: `thinking` blocks become a reasoning message before the
//! assistant message; `tool_use` blocks become `toolCalls` with the input's compact JSON.

use serde_json::{Map, Value};

use super::types::{AapMessage, Block, Content};
use crate::event::{
    AssistantMessage, ContentPart, FunctionCall, FunctionKind, MediaPart, Message, MessageContent,
    PartSource, ReasoningMessage, TextMessage, TextPart, ToolCall, ToolMessage, UserMessage,
};

/// How a canonical tool call shows to AAP: its name and input object.
pub type CallView<'a> = &'a dyn Fn(&ToolCall) -> (String, Map<String, Value>);

/// Canonical messages as AAP history (see the module docs). Activity messages are dropped.
pub fn to_aap(messages: &[Message], view: CallView<'_>) -> Vec<AapMessage> {
    let mut out = Vec::new();
    let mut blocks: Vec<Block> = Vec::new();
    let flush = |blocks: &mut Vec<Block>, out: &mut Vec<AapMessage>| {
        if !blocks.is_empty() {
            out.push(AapMessage::Assistant {
                content: Content::Blocks(std::mem::take(blocks)),
            });
        }
    };
    for message in messages {
        match message {
            Message::Reasoning(m) => {
                if !m.content.is_empty() {
                    blocks.push(Block::Thinking {
                        thinking: m.content.clone(),
                    });
                }
            }
            Message::Assistant(m) => {
                if let Some(text) = m.content.as_deref().filter(|t| !t.is_empty()) {
                    blocks.push(Block::Text { text: text.into() });
                }
                for call in m.tool_calls.iter().flatten() {
                    let (name, input) = view(call);
                    blocks.push(Block::ToolUse {
                        tool_call_id: call.id.clone(),
                        name,
                        input,
                    });
                }
            }
            Message::Tool(m) => {
                flush(&mut blocks, &mut out);
                let mut content = content_to_aap(&m.content);
                if let Some(error) = &m.error {
                    content = Content::Text(format!("Error: {error}\n{}", m.content.text()));
                }
                out.push(AapMessage::Tool {
                    tool_call_id: m.tool_call_id.clone(),
                    content,
                });
            }
            Message::User(m) => {
                flush(&mut blocks, &mut out);
                out.push(AapMessage::User {
                    content: content_to_aap(&m.content),
                });
            }
            Message::System(m) | Message::Developer(m) => {
                flush(&mut blocks, &mut out);
                out.push(AapMessage::System {
                    content: m.content.clone(),
                });
            }
            Message::Activity(_) => {}
        }
    }
    flush(&mut blocks, &mut out);
    out
}

/// Canonical content as AAP content: a string stays a string; parts become blocks (text →
/// `text`, images → `image` with the URL or a `data:` URI, other media → their JSON as text).
pub fn content_to_aap(content: &MessageContent) -> Content {
    match content {
        MessageContent::Text(text) => Content::Text(text.clone()),
        MessageContent::Parts(parts) => Content::Blocks(
            parts
                .iter()
                .map(|part| match part {
                    ContentPart::Text(t) => Block::Text {
                        text: t.text.clone(),
                    },
                    ContentPart::Image(MediaPart {
                        source: PartSource::Url { value, .. },
                        ..
                    }) => Block::Image { url: value.clone() },
                    ContentPart::Image(MediaPart {
                        source: PartSource::Data { value, mime_type },
                        ..
                    }) => Block::Image {
                        url: format!("data:{mime_type};base64,{value}"),
                    },
                    other => Block::Text {
                        text: serde_json::to_string(other).unwrap_or_default(),
                    },
                })
                .collect(),
        ),
    }
}

/// A problem with an AAP message, naming the field (`messages[2].content[0].url`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct InvalidMessage {
    pub field: String,
    pub problem: String,
}

fn invalid(field: String, problem: impl Into<String>) -> InvalidMessage {
    InvalidMessage {
        field,
        problem: problem.into(),
    }
}

/// User or tool content as canonical content. `field` names it in errors; `images` says whether
/// image blocks are accepted.
pub fn content_from_aap(
    content: &Content,
    field: &str,
    images: bool,
) -> Result<MessageContent, InvalidMessage> {
    let blocks = match content {
        Content::Text(text) => return Ok(MessageContent::Text(text.clone())),
        Content::Blocks(blocks) => blocks,
    };
    let mut parts = Vec::with_capacity(blocks.len());
    for (i, block) in blocks.iter().enumerate() {
        let at = format!("{field}[{i}]");
        match block {
            Block::Text { text } => parts.push(ContentPart::Text(TextPart {
                text: text.clone(),
                id: None,
                metadata: None,
            })),
            Block::Image { url } => {
                if !images {
                    return Err(invalid(at, "this agent does not accept images"));
                }
                parts.push(ContentPart::Image(MediaPart {
                    source: image_source(url).ok_or_else(|| {
                        invalid(
                            format!("{at}.url"),
                            "must be an https:// URL or a base64 data: URI",
                        )
                    })?,
                    id: None,
                    metadata: None,
                }));
            }
            Block::Thinking { .. } | Block::ToolUse { .. } => {
                return Err(invalid(
                    format!("{at}.type"),
                    "only text and image blocks are allowed here",
                ))
            }
        }
    }
    // All text: one string, the form every upstream accepts.
    if parts.iter().all(|p| matches!(p, ContentPart::Text(_))) {
        let text = parts
            .iter()
            .filter_map(|p| match p {
                ContentPart::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n");
        return Ok(MessageContent::Text(text));
    }
    Ok(MessageContent::Parts(parts))
}

fn image_source(url: &str) -> Option<PartSource> {
    if let Some(rest) = url.strip_prefix("data:") {
        let (mime, data) = rest.split_once(";base64,")?;
        return Some(PartSource::Data {
            value: data.to_owned(),
            mime_type: if mime.is_empty() {
                "application/octet-stream".into()
            } else {
                mime.to_owned()
            },
        });
    }
    url.starts_with("https://").then(|| PartSource::Url {
        value: url.to_owned(),
        mime_type: None,
    })
}

/// AAP history (a session's seed) as canonical messages; ids come from `new_id`.
pub fn history_from_aap(
    messages: &[AapMessage],
    field: &str,
    images: bool,
    new_id: &mut dyn FnMut() -> String,
) -> Result<Vec<Message>, InvalidMessage> {
    let mut out = Vec::with_capacity(messages.len());
    for (i, message) in messages.iter().enumerate() {
        let at = format!("{field}[{i}]");
        match message {
            AapMessage::System { content } => out.push(Message::System(TextMessage {
                id: new_id(),
                content: content.clone(),
                name: None,
                encrypted_value: None,
                metadata: None,
                subagent_run_id: None,
                extra: Map::new(),
            })),
            AapMessage::User { content } => out.push(Message::User(UserMessage {
                id: new_id(),
                content: content_from_aap(content, &format!("{at}.content"), images)?,
                name: None,
                encrypted_value: None,
                metadata: None,
                subagent_run_id: None,
                extra: Map::new(),
            })),
            AapMessage::Tool {
                tool_call_id,
                content,
            } => out.push(tool_message(
                new_id(),
                tool_call_id.clone(),
                content_from_aap(content, &format!("{at}.content"), images)?,
            )),
            AapMessage::Assistant { content } => assistant_from_aap(content, new_id, &mut out),
            AapMessage::ToolPermission { .. } => {
                return Err(invalid(
                    format!("{at}.role"),
                    "tool_permission is not a history message",
                ))
            }
        }
    }
    Ok(out)
}

/// A canonical tool message.
pub fn tool_message(id: String, tool_call_id: String, content: MessageContent) -> Message {
    Message::Tool(ToolMessage {
        id,
        tool_call_id,
        content,
        error: None,
        encrypted_value: None,
        metadata: None,
        subagent_run_id: None,
        extra: Map::new(),
    })
}

fn assistant_from_aap(
    content: &Content,
    new_id: &mut dyn FnMut() -> String,
    out: &mut Vec<Message>,
) {
    let blocks = match content {
        Content::Text(text) => vec![Block::Text { text: text.clone() }],
        Content::Blocks(blocks) => blocks.clone(),
    };
    let mut text = String::new();
    let mut calls = Vec::new();
    for block in blocks {
        match block {
            Block::Thinking { thinking } => out.push(Message::Reasoning(ReasoningMessage {
                id: new_id(),
                content: thinking,
                encrypted_value: None,
                metadata: None,
                subagent_run_id: None,
                extra: Map::new(),
            })),
            Block::Text { text: t } => text.push_str(&t),
            Block::ToolUse {
                tool_call_id,
                name,
                input,
            } => calls.push(ToolCall {
                id: tool_call_id,
                kind: FunctionKind::Function,
                function: FunctionCall {
                    name,
                    arguments: Value::Object(input).to_string(),
                },
                encrypted_value: None,
                encrypted_value_type: None,
                metadata: None,
            }),
            // An assistant cannot show images in canonical text; their URL is kept as text.
            Block::Image { url } => text.push_str(&url),
        }
    }
    out.push(Message::Assistant(AssistantMessage {
        id: new_id(),
        content: (!text.is_empty()).then_some(text),
        tool_calls: (!calls.is_empty()).then_some(calls),
        name: None,
        encrypted_value: None,
        metadata: None,
        subagent_run_id: None,
        extra: Map::new(),
    }));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn history_survives_aap_to_canonical_and_back() {
        let aap: Vec<AapMessage> = serde_json::from_value(json!([
            {"role":"system","content":"Be brief."},
            {"role":"user","content":[{"type":"text","text":"Where"},{"type":"image","url":"data:image/png;base64,AAAA"}]},
            {"role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"Checking."},
                {"type":"tool_use","toolCallId":"c1","name":"get_location","input":{"precise":true}}]},
            {"role":"tool","toolCallId":"c1","content":"Paris"},
            {"role":"assistant","content":"In Paris."}
        ]))
        .unwrap();
        let mut n = 0;
        let mut id = || {
            n += 1;
            format!("s{n}")
        };
        let canonical = history_from_aap(&aap, "messages", true, &mut id).unwrap();
        assert_eq!(
            canonical.len(),
            6,
            "the thinking block is a reasoning message of its own"
        );
        let back = to_aap(&canonical, &|c| {
            (
                c.function.name.clone(),
                crate::event::args_object(&c.function.arguments),
            )
        });
        let expected: Vec<AapMessage> = serde_json::from_value(json!([
            {"role":"system","content":"Be brief."},
            {"role":"user","content":[{"type":"text","text":"Where"},{"type":"image","url":"data:image/png;base64,AAAA"}]},
            {"role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"Checking."},
                {"type":"tool_use","toolCallId":"c1","name":"get_location","input":{"precise":true}}]},
            {"role":"tool","toolCallId":"c1","content":"Paris"},
            {"role":"assistant","content":[{"type":"text","text":"In Paris."}]}
        ]))
        .unwrap();
        assert_eq!(back, expected);
    }

    #[test]
    fn bad_content_is_refused_naming_the_field() {
        let images = Content::Blocks(vec![Block::Image {
            url: "http://x".into(),
        }]);
        let e = content_from_aap(&images, "messages[0].content", true).unwrap_err();
        assert_eq!(e.field, "messages[0].content[0].url");
        let e = content_from_aap(&images, "messages[0].content", false).unwrap_err();
        assert_eq!(e.field, "messages[0].content[0]");
        let tool_use: Vec<AapMessage> = serde_json::from_value(
            json!([{"role":"tool_permission","toolCallId":"c","granted":true}]),
        )
        .unwrap();
        let e = history_from_aap(&tool_use, "messages", false, &mut || "x".into()).unwrap_err();
        assert_eq!(e.field, "messages[0].role");
    }
}
