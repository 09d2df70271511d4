//! Claude Code's transcript: one JSON object a line. A model reply is a
//! line `{"type":"assistant","message":{"id","model","usage":{
//! "input_tokens","output_tokens","cache_creation_input_tokens",
//! "cache_read_input_tokens"},"stop_reason","content":[...]}}`; a streamed
//! reply repeats its `message.id` on several lines (one per content
//! block), so the id is what counts once. Every other line type (user
//! input, tool results, summaries, system lines) carries no usage.

use super::json::{as_str, count, read_line, reply_id, Scalar};
use super::{bounded_name, Entry, Line, Source, Tokens};
use crate::error::Code;

pub struct ClaudeCode;

/// Claude Code talks to Anthropic's models; its lines name no provider.
const PROVIDER: &str = "anthropic";
/// The model Claude Code names on replies it wrote itself (an API error,
/// an interruption): no provider or model to charge.
const SYNTHETIC: &str = "<synthetic>";

/// The text Claude Code writes as a user line when a turn is stopped:
/// `[Request interrupted by user]`, or `… for tool use]` when a tool was
/// running. A user line is the stop marker when its `message.content` (a
/// string, or a text block of it) starts with this.
const INTERRUPTED: &str = "[Request interrupted by user";

impl Source for ClaudeCode {
    fn name(&self) -> &'static str {
        "claude-code"
    }

    fn entry(&self, line: &[u8]) -> Result<Option<Line>, Code> {
        let obj = read_line(line, Some(INTERRUPTED))?;
        let sidechain = obj.sidechain == Some(Scalar::Bool(true));
        let content = obj.message.get().and_then(|m| m.content);
        match as_str(&obj.kind) {
            Some("assistant") => {}
            Some("user") if content.is_some_and(|c| c.marked) => {
                return Ok(Some(Line::Interrupted { sidechain }))
            }
            _ => return Ok(None),
        }
        let msg = obj.message.required()?;
        let id = reply_id(&msg.id)?;
        let usage = msg.usage.required()?;
        let tokens = Tokens {
            input: count(&usage.input_tokens, false)?,
            output: count(&usage.output_tokens, false)?,
            cache_write: count(&usage.cache_creation_input_tokens, true)?,
            cache_read: count(&usage.cache_read_input_tokens, true)?,
        };
        let stop = as_str(&msg.stop_reason);
        let asks_tool = content.is_some_and(|c| c.asks_tool);
        let model = as_str(&msg.model);
        let synthetic = model == Some(SYNTHETIC);
        Ok(Some(Line::Reply(Entry {
            id: id.to_string(),
            tokens,
            provider: (!synthetic).then(|| PROVIDER.to_string()),
            model: if synthetic { None } else { bounded_name(model) },
            // The stream's lines are written before the stop reason is
            // known, so a null one ends the turn unless the reply asks for
            // a tool.
            last: stop != Some("tool_use") && !asks_tool,
            sidechain,
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::super::transcript::Part;
    use super::*;
    use serde_json::{json, Value};
    use std::collections::HashSet;

    fn line(id: &str, usage: Value, stop: Value, content: Value) -> String {
        json!({"type": "assistant", "sessionId": "s",
               "message": {"id": id, "model": "claude-sonnet-4-5", "role": "assistant",
                           "usage": usage, "stop_reason": stop, "content": content}})
        .to_string()
    }

    fn usage(i: i64, o: i64, cw: i64, cr: i64) -> Value {
        json!({"input_tokens": i, "output_tokens": o,
               "cache_creation_input_tokens": cw, "cache_read_input_tokens": cr})
    }

    fn part(lines: &[String], subagent: bool) -> Part {
        Part {
            bytes: lines
                .iter()
                .map(|l| format!("{l}\n"))
                .collect::<String>()
                .into_bytes(),
            subagent,
            fresh: false,
        }
    }

    fn turn(lines: &[String]) -> Vec<Part> {
        vec![part(lines, false)]
    }

    fn outcome_of(s: &dyn Source, parts: &[Part]) -> Result<super::super::Reading, Code> {
        super::super::outcome_of(s, parts, &HashSet::new())
    }

    #[test]
    fn a_streamed_reply_counts_once_and_tool_rounds_add_up() {
        let user = json!({"type": "user", "message": {"role": "user", "content": "secret words"}});
        let t = turn(&[
            user.to_string(),
            line(
                "m1",
                usage(10, 5, 100, 1000),
                json!(null),
                json!([{"type": "thinking"}]),
            ),
            line(
                "m1",
                usage(10, 5, 100, 1000),
                json!(null),
                json!([{"type": "text"}]),
            ),
            line(
                "m1",
                usage(10, 7, 100, 1000),
                json!("tool_use"),
                json!([{"type": "tool_use"}]),
            ),
            json!({"type": "user", "message": {"content": [{"type": "tool_result"}]}}).to_string(),
            line(
                "m2",
                usage(3, 20, 0, 1100),
                json!("end_turn"),
                json!([{"type": "text"}]),
            ),
            json!({"type": "system", "subtype": "turn_duration"}).to_string(),
        ]);
        let r = outcome_of(&ClaudeCode, &t).unwrap();
        assert_eq!(
            r.tokens,
            Tokens {
                input: 13,
                output: 27,
                cache_write: 100,
                cache_read: 2100
            }
        );
        assert_eq!(r.provider.as_deref(), Some("anthropic"));
        assert_eq!(r.model.as_deref(), Some("claude-sonnet-4-5"));
    }

    #[test]
    fn a_null_stop_reason_ends_the_turn_unless_a_tool_is_asked_for() {
        let done = turn(&[line(
            "m",
            usage(1, 2, 0, 0),
            json!(null),
            json!([{"type": "text"}]),
        )]);
        assert!(outcome_of(&ClaudeCode, &done).is_ok());
        let asking = turn(&[line(
            "m",
            usage(1, 2, 0, 0),
            json!(null),
            json!([{"type": "tool_use"}]),
        )]);
        assert_eq!(
            outcome_of(&ClaudeCode, &asking),
            Err(Code::UsageTurnIncomplete)
        );
        let nothing = turn(&[json!({"type": "user"}).to_string()]);
        assert_eq!(
            outcome_of(&ClaudeCode, &nothing),
            Err(Code::UsageTurnIncomplete)
        );
        assert_eq!(outcome_of(&ClaudeCode, &[]), Err(Code::UsageTurnIncomplete));
    }

    #[test]
    fn malformed_replies_are_parse_failures() {
        for bad in [
            "not json".to_string(),
            "[1]".to_string(),
            json!({"type": "assistant"}).to_string(),
            json!({"type": "assistant", "message": {"usage": usage(1, 1, 0, 0)}}).to_string(),
            line("m", json!({"input_tokens": 1}), json!("end_turn"), json!([])),
            line("m", json!({"input_tokens": -1, "output_tokens": 1}), json!("end_turn"), json!([])),
            line("m", json!({"input_tokens": 1.5, "output_tokens": 1}), json!("end_turn"), json!([])),
            line("m", json!({"input_tokens": "1", "output_tokens": 1}), json!("end_turn"), json!([])),
            line("m", json!({"input_tokens": 1, "output_tokens": 1, "cache_read_input_tokens": true}), json!("end_turn"), json!([])),
            // Past 2^63-1.
            r#"{"type":"assistant","message":{"id":"m","usage":{"input_tokens":9223372036854775808,"output_tokens":1}}}"#.to_string(),
        ] {
            assert_eq!(outcome_of(&ClaudeCode, &turn(std::slice::from_ref(&bad))), Err(Code::UsageParseFailed), "{bad}");
        }
        // Absent cache counts are zero.
        let lean = line(
            "m",
            json!({"input_tokens": 4, "output_tokens": 2}),
            json!("end_turn"),
            json!([]),
        );
        assert_eq!(
            outcome_of(&ClaudeCode, &turn(&[lean]))
                .unwrap()
                .tokens
                .input,
            4
        );
    }

    #[test]
    fn a_synthetic_reply_charges_no_model() {
        let mut l: Value = serde_json::from_str(&line(
            "s",
            usage(0, 0, 0, 0),
            json!("stop_sequence"),
            json!([]),
        ))
        .unwrap();
        l["message"]["model"] = json!("<synthetic>");
        let r = outcome_of(&ClaudeCode, &turn(&[l.to_string()])).unwrap();
        assert_eq!((r.provider, r.model), (None, None));
    }

    fn side(id: &str, stop: Value, block: &str) -> String {
        let mut l: Value =
            serde_json::from_str(&line(id, usage(1, 1, 0, 0), stop, json!([{"type": block}])))
                .unwrap();
        l["isSidechain"] = json!(true);
        l.to_string()
    }

    #[test]
    fn subagent_replies_count_but_only_the_session_s_own_end_the_turn() {
        let asks = line(
            "m1",
            usage(2, 2, 0, 0),
            json!("tool_use"),
            json!([{"type": "tool_use"}]),
        );
        let ends = line(
            "m2",
            usage(3, 3, 0, 0),
            json!("end_turn"),
            json!([{"type": "text"}]),
        );
        // An inline sidechain reply after the main one asked for a tool
        // does not close the turn.
        let open = turn(&[asks.clone(), side("s1", json!("end_turn"), "text")]);
        assert_eq!(
            outcome_of(&ClaudeCode, &open),
            Err(Code::UsageTurnIncomplete)
        );
        // A subagent's file still asking for a tool does not keep it open.
        let parts = [
            part(&[asks.clone(), ends.clone()], false),
            part(&[side("s2", json!("tool_use"), "tool_use")], true),
        ];
        let r = outcome_of(&ClaudeCode, &parts).unwrap();
        assert_eq!((r.tokens.input, r.tokens.output), (6, 6));
        // Subagent replies alone are no reply of the session.
        let only = [part(&[side("s3", json!("end_turn"), "text")], true)];
        assert_eq!(
            outcome_of(&ClaudeCode, &only),
            Err(Code::UsageTurnIncomplete)
        );
    }

    #[test]
    fn replies_charged_before_the_turn_and_repeated_ids_across_files_count_once() {
        let m1 = line(
            "m1",
            usage(5, 5, 0, 0),
            json!("end_turn"),
            json!([{"type": "text"}]),
        );
        let m2 = line(
            "m2",
            usage(7, 1, 0, 0),
            json!("end_turn"),
            json!([{"type": "text"}]),
        );
        let charged: HashSet<String> = ["m1".to_string()].into();
        let parts = [part(&[m1.clone(), m2.clone()], false)];
        let r = super::super::outcome_of(&ClaudeCode, &parts, &charged).unwrap();
        assert_eq!(r.tokens.input, 7);
        // Only charged replies: nothing of this turn's own.
        let copy = [part(std::slice::from_ref(&m1), false)];
        assert_eq!(
            super::super::outcome_of(&ClaudeCode, &copy, &charged),
            Err(Code::UsageTurnIncomplete)
        );
        // One id in two files is one reply.
        let twice = [
            part(std::slice::from_ref(&m2), false),
            part(std::slice::from_ref(&m2), false),
        ];
        assert_eq!(outcome_of(&ClaudeCode, &twice).unwrap().tokens.input, 7);
    }

    #[test]
    fn a_turn_closed_by_a_synthetic_reply_keeps_the_model_that_spent() {
        let asks = line(
            "m1",
            usage(40, 9, 0, 0),
            json!("tool_use"),
            json!([{"type": "tool_use"}]),
        );
        let mut error: Value = serde_json::from_str(&line(
            "e1",
            usage(0, 0, 0, 0),
            json!("stop_sequence"),
            json!([{"type": "text"}]),
        ))
        .unwrap();
        error["message"]["model"] = json!("<synthetic>");
        let r = outcome_of(&ClaudeCode, &turn(&[asks, error.to_string()])).unwrap();
        assert_eq!(r.tokens.input, 40);
        assert_eq!(
            (r.provider.as_deref(), r.model.as_deref()),
            (Some("anthropic"), Some("claude-sonnet-4-5"))
        );
    }

    #[test]
    fn the_stop_marker_in_either_content_form_ends_the_turn() {
        let asks = line(
            "m1",
            usage(2, 2, 0, 0),
            json!("tool_use"),
            json!([{"type": "tool_use"}]),
        );
        for content in [
            json!("[Request interrupted by user]"),
            json!([{"type": "text", "text": "[Request interrupted by user for tool use]"}]),
        ] {
            let marker = json!({"type": "user", "message": {"role": "user", "content": content}});
            let t = turn(&[asks.clone(), marker.to_string()]);
            assert_eq!(outcome_of(&ClaudeCode, &t).unwrap().tokens.input, 2);
        }
        // Other user text, or the marker before the reply, ends nothing.
        let said = json!({"type": "user", "message": {"content": "please interrupt"}});
        let t = turn(&[asks.clone(), said.to_string()]);
        assert_eq!(outcome_of(&ClaudeCode, &t), Err(Code::UsageTurnIncomplete));
        let early =
            json!({"type": "user", "message": {"content": "[Request interrupted by user]"}});
        let t = turn(&[early.to_string(), asks]);
        assert_eq!(outcome_of(&ClaudeCode, &t), Err(Code::UsageTurnIncomplete));
    }
}
