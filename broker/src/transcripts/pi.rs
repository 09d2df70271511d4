//! pi's session log (pi-mono's coding agent): one JSON object a line. The
//! first is the session header (`type: "session"`); a model reply is an
//! entry `{"type":"message","id",...,"message":{"role":"assistant",
//! "provider","model","usage":{"input","output","cacheRead","cacheWrite",
//! ...},"stopReason"}}`, written once when the reply is complete. A reply
//! whose `stopReason` is `toolUse` continues the turn; any other (`stop`,
//! `length`, `error`, `aborted`) ends it. A reply is known by its entry
//! `id` and `timestamp` together.

use super::json::{as_str, count, read_line, reply_id};
use super::{bounded_name, Entry, Line, Source, Tokens};
use crate::error::Code;

pub struct Pi;

impl Source for Pi {
    fn name(&self) -> &'static str {
        "pi"
    }

    fn entry(&self, line: &[u8]) -> Result<Option<Line>, Code> {
        // pi has no stop marker: no content is looked at.
        let obj = read_line(line, None)?;
        if as_str(&obj.kind) != Some("message") {
            return Ok(None);
        }
        let msg = obj.message.required()?;
        if as_str(&msg.role) != Some("assistant") {
            return Ok(None);
        }
        let id = reply_id(&obj.id)?;
        // The entry id is short (8 hex digits) and unique within its
        // session file only; with the entry's timestamp it names one reply
        // across files, and a copy (a fork) keeps both.
        let id = match as_str(&obj.timestamp) {
            Some(ts) if ts.len() <= 64 => format!("{id} {ts}"),
            _ => id.to_string(),
        };
        let usage = msg.usage.required()?;
        let tokens = Tokens {
            input: count(&usage.input, false)?,
            output: count(&usage.output, false)?,
            cache_write: count(&usage.cache_write, false)?,
            cache_read: count(&usage.cache_read, false)?,
        };
        let stop = as_str(&msg.stop_reason_pi).ok_or(Code::UsageParseFailed)?;
        Ok(Some(Line::Reply(Entry {
            id,
            tokens,
            provider: bounded_name(as_str(&msg.provider)),
            model: bounded_name(as_str(&msg.model)),
            last: stop != "toolUse",
            sidechain: false,
        })))
    }

    /// A reply's id is its entry `id`, then a space and its `timestamp`
    /// when it has one; the entry `id` may hold spaces itself, so what a
    /// line surely holds is the id up to its first space.
    fn needle<'a>(&self, id: &'a str) -> &'a str {
        id.split_once(' ').map_or(id, |(head, _)| head)
    }
}

#[cfg(test)]
mod tests {
    use super::super::transcript::Part;
    use super::*;
    use serde_json::{json, Value};
    use std::collections::HashSet;

    fn reply(id: &str, model: &str, i: i64, o: i64, cr: i64, cw: i64, stop: &str) -> String {
        json!({"type": "message", "id": id, "parentId": null, "timestamp": "2026-01-01T00:00:00Z",
               "message": {"role": "assistant", "content": [{"type": "text", "text": "hidden"}],
                           "api": "anthropic-messages", "provider": "anthropic", "model": model,
                           "usage": {"input": i, "output": o, "cacheRead": cr, "cacheWrite": cw,
                                     "totalTokens": i + o + cr + cw,
                                     "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0.0,
                                              "cacheWrite": 0.0, "total": 0.3}},
                           "stopReason": stop, "timestamp": 1}})
        .to_string()
    }

    fn turn(lines: &[String]) -> Vec<Part> {
        vec![Part {
            bytes: lines
                .iter()
                .map(|l| format!("{l}\n"))
                .collect::<String>()
                .into_bytes(),
            subagent: false,
            fresh: false,
        }]
    }

    fn outcome_of(s: &dyn Source, parts: &[Part]) -> Result<super::super::Reading, Code> {
        super::super::outcome_of(s, parts, &HashSet::new())
    }

    #[test]
    fn a_turn_with_tool_rounds_sums_its_replies() {
        let t = turn(&[
            json!({"type": "session", "version": 3, "id": "u", "cwd": "/w"}).to_string(),
            json!({"type": "message", "id": "a0", "message": {"role": "user", "content": "hi"}}).to_string(),
            reply("a1", "claude-opus-4", 10, 2, 0, 50, "toolUse"),
            json!({"type": "message", "id": "a2", "message": {"role": "toolResult", "toolCallId": "c"}}).to_string(),
            json!({"type": "model_change", "id": "a3", "provider": "openai", "modelId": "gpt-5"}).to_string(),
            reply("a4", "gpt-5", 7, 9, 40, 0, "stop"),
        ]);
        let r = outcome_of(&Pi, &t).unwrap();
        assert_eq!(
            r.tokens,
            Tokens {
                input: 17,
                output: 11,
                cache_write: 50,
                cache_read: 40
            }
        );
        assert_eq!(
            r.model.as_deref(),
            Some("gpt-5"),
            "the model that ended the turn"
        );
        assert_eq!(r.provider.as_deref(), Some("anthropic"));
    }

    #[test]
    fn unfinished_and_malformed() {
        let open = turn(&[reply("a1", "m", 1, 1, 0, 0, "toolUse")]);
        assert_eq!(outcome_of(&Pi, &open), Err(Code::UsageTurnIncomplete));
        for stop in ["stop", "length", "error", "aborted"] {
            assert!(outcome_of(&Pi, &turn(&[reply("a", "m", 1, 1, 0, 0, stop)])).is_ok());
        }
        let mut no_stop: Value =
            serde_json::from_str(&reply("a", "m", 1, 1, 0, 0, "stop")).unwrap();
        no_stop["message"]
            .as_object_mut()
            .unwrap()
            .remove("stopReason");
        let mut no_cache: Value =
            serde_json::from_str(&reply("a", "m", 1, 1, 0, 0, "stop")).unwrap();
        no_cache["message"]["usage"]
            .as_object_mut()
            .unwrap()
            .remove("cacheRead");
        let mut no_id: Value = serde_json::from_str(&reply("a", "m", 1, 1, 0, 0, "stop")).unwrap();
        no_id.as_object_mut().unwrap().remove("id");
        for bad in [no_stop, no_cache, no_id] {
            assert_eq!(
                outcome_of(&Pi, &turn(&[bad.to_string()])),
                Err(Code::UsageParseFailed),
                "{bad}"
            );
        }
    }

    #[test]
    fn an_entry_is_its_id_at_its_timestamp() {
        // pi's entry ids are 8 hex digits, unique within a session file
        // only: two sessions' replies may share one, a copy keeps both.
        let a = reply("ab12cd34", "m", 1, 1, 0, 0, "toolUse");
        let mut b: Value =
            serde_json::from_str(&reply("ab12cd34", "m", 2, 2, 0, 0, "stop")).unwrap();
        b["timestamp"] = json!("2026-01-01T00:00:09Z");
        let r = outcome_of(&Pi, &turn(&[a.clone(), b.to_string()])).unwrap();
        assert_eq!(r.tokens.input, 3);
        let Ok(Some(Line::Reply(e))) = Pi.entry(a.as_bytes()) else {
            panic!("a reply")
        };
        let charged: HashSet<String> = [e.id].into();
        let r = super::super::outcome_of(&Pi, &turn(&[a, b.to_string()]), &charged).unwrap();
        assert_eq!(r.tokens.input, 2);
    }
}
