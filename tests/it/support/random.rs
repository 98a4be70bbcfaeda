//! Deterministic pseudo-random AG-UI streams for robustness tests: every event type, vendor
//! spellings, chunks, legacy thinking, object arguments, nulls, odd timestamps, with ids and
//! `subagentRunId` lanes drawn from small pools so that they collide.

/// xorshift64: deterministic, so a failure reproduces with the printed seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One random upstream stream as SSE text (up to 29 events).
pub fn structured_stream(rng: &mut Rng) -> String {
    let ids = ["a", "b", "c"];
    let lanes = [None, Some("s1"), Some("s2")];
    let mut input = String::new();
    for _ in 0..rng.below(30) {
        let id = ids[rng.below(ids.len())];
        let role = ["assistant", "user", "助手"][rng.below(3)];
        let sub = ["s1", "s2"][rng.below(2)];
        let parent_sub = ["s1", "s2", "zz"][rng.below(3)];
        let mut event = match rng.below(32) {
            0 => serde_json::json!({"type":"RUN_STARTED","threadId":"x","runId":"y"}),
            1 => serde_json::json!({"type":"RUN_FINISHED","threadId":"x","runId":"y"}),
            2 => serde_json::json!({"type":"RUN_ERROR","message":"boom"}),
            3 => serde_json::json!({"type":"TEXT_MESSAGE_START","messageId":id,"role":role}),
            4 | 5 => serde_json::json!({"type":"TEXT_MESSAGE_CONTENT","messageId":id,"delta":"t"}),
            6 => serde_json::json!({"type":"TEXT_MESSAGE_END","messageId":id}),
            7 => serde_json::json!({"type":"TEXT_MESSAGE_CHUNK","messageId":id,"delta":"c"}),
            8 => {
                serde_json::json!({"type":"TOOL_CALL_START","toolCallId":id,"toolCallName":"f","parentMessageId":ids[rng.below(3)].to_string()})
            }
            9 => serde_json::json!({"type":"TOOL_CALL_ARGS","toolCallId":id,"delta":"{\"k\":"}),
            10 => serde_json::json!({"type":"TOOL_CALL_ARGS","toolCallId":id,"delta":{"k":1}}),
            11 => serde_json::json!({"type":"TOOL_CALL_END","toolCallId":id}),
            12 => {
                serde_json::json!({"type":"TOOL_CALL_RESULT","toolCallId":id,"content":{"ok":true}})
            }
            13 => {
                serde_json::json!({"type":"TOOL_CALL_CHUNK","toolCallId":id,"toolCallName":"g","delta":"{}"})
            }
            14 => serde_json::json!({"type":"STEP_STARTED","stepName":id}),
            15 => serde_json::json!({"type":"STEP_FINISHED","stepName":id}),
            16 => serde_json::json!({"type":"REASONING_START","messageId":id}),
            17 => {
                serde_json::json!({"type":"REASONING_MESSAGE_START","messageId":id,"role":"reasoning"})
            }
            18 => {
                serde_json::json!({"type":"REASONING_MESSAGE_CONTENT","messageId":id,"delta":"r"})
            }
            19 => serde_json::json!({"type":"REASONING_MESSAGE_END","messageId":id}),
            20 => serde_json::json!({"type":"REASONING_END","messageId":id}),
            21 => serde_json::json!({"type":"REASONING_MESSAGE_CHUNK","messageId":id,"delta":"rc"}),
            22 => serde_json::json!({"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":"think"}),
            23 => serde_json::json!({"type":"THINKING_START"}),
            24 => serde_json::json!({"type":"THINKING_END"}),
            25 => {
                serde_json::json!({"type":"SUBAGENT_STARTED","subagentRunId":sub,"name":"n","parentSubagentRunId":parent_sub})
            }
            26 => serde_json::json!({"type":"SUBAGENT_FINISHED","subagentRunId":sub}),
            27 => {
                serde_json::json!({"type":"STATE_DELTA","delta":{"op":"add","path":"a~b","value":null,"from":""}})
            }
            28 => serde_json::json!({"type":"CUSTOM","name":"SYSTEM_EXCEPTION","value":"busy"}),
            29 => {
                serde_json::json!({"type":"MESSAGES_SNAPSHOT","messages":[{"id":id,"role":"user","content":"x"}]})
            }
            30 => {
                serde_json::json!({"type":"text.message.content","message_id":id,"content":"v","timestamp":1_761_819_878})
            }
            _ => {
                serde_json::json!({"type":"CUSTOM","name":"n","value":null,"timestamp":9_007_199_254_740_993_i64})
            }
        };
        if let Some(lane) = lanes[rng.below(lanes.len())] {
            if event["subagentRunId"].is_null() {
                event["subagentRunId"] = serde_json::Value::from(lane);
            }
        }
        input.push_str(&format!("data: {event}\n\n"));
    }
    input
}
