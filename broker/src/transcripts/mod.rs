//! The accountant: the built-in usage sources, keyed by the run's harness
//! (`claude-code`, `pi`), and what a turn's baseline and outcome are.
//!
//! A source only parses: it turns one transcript line into an [`Entry`] (or
//! nothing, for a line that is not a model reply). This module sums a
//! turn's entries ([`outcome_of`]); [`transcript`] reads the files. Nothing
//! here touches the store: the verbs (`verbs::usage`) write what comes out.
//! A turn that can't be counted is an `Err(code)`, one of the fixed
//! `usage-*` codes, which the verbs record as the turn's unknown outcome.

pub mod claude_code;
pub mod json;
pub mod pi;
pub mod prefilter;
pub mod shared;
pub mod transcript;

use crate::budget::Budget;
use crate::error::Code;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use transcript::{Baseline, Part, Tailed};

/// One turn's token counts from one source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_write: u64,
    pub cache_read: u64,
}

/// The largest count or sum a reading may hold: the store's integer.
pub const COUNT_MAX: u64 = i64::MAX as u64;

/// Adds `o` to `t`; a sum past [`COUNT_MAX`] is `usage-parse-failed` (no
/// store column can hold it, so the transcript's numbers are not
/// believable).
fn add(t: &mut Tokens, o: &Tokens) -> Result<(), Code> {
    let add = |a: u64, b: u64| {
        a.checked_add(b)
            .filter(|s| *s <= COUNT_MAX)
            .ok_or(Code::UsageParseFailed)
    };
    t.input = add(t.input, o.input)?;
    t.output = add(t.output, o.output)?;
    t.cache_write = add(t.cache_write, o.cache_write)?;
    t.cache_read = add(t.cache_read, o.cache_read)?;
    Ok(())
}

/// One model reply a source found in a transcript line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The reply's id: lines with the same id are one reply (Claude Code
    /// writes a streamed reply as several lines); the last line wins.
    pub id: String,
    pub tokens: Tokens,
    pub provider: Option<String>,
    pub model: Option<String>,
    /// True when the reply ends the turn (it asks for no tool).
    pub last: bool,
    /// A subagent's reply written into the session's own file (Claude
    /// Code's `isSidechain`): counted, but it does not end the turn.
    pub sidechain: bool,
}

/// What one transcript line is to a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A model reply.
    Reply(Entry),
    /// The harness wrote that the turn was stopped (Claude Code's
    /// `[Request interrupted by user…]`): the turn ended there, even after
    /// a reply that asked for a tool. `sidechain`: a subagent's, which
    /// ends nothing of the session's.
    Interrupted { sidechain: bool },
}

/// A turn's known outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub tokens: Tokens,
}

/// A built-in usage source: how one harness writes its transcript.
pub trait Source: Sync {
    /// The harness (and source) name.
    fn name(&self) -> &'static str;
    /// Parses one whole line (without its newline). `Ok(None)`: a line
    /// that is neither a model reply nor a stop marker; `Err`: a line the
    /// source can't read (`usage-parse-failed`).
    fn entry(&self, line: &[u8]) -> Result<Option<Line>, Code>;
    /// A string that every line [`Source::entry`] reads as a reply with
    /// this `id` holds in one of its JSON string values (the id as the line
    /// spells it, or a prefix of that): what [`prefilter::IdFilter`]
    /// searches the history's bytes for.
    fn needle<'a>(&self, id: &'a str) -> &'a str {
        id
    }
}

static SOURCES: &[&dyn Source] = &[&claude_code::ClaudeCode, &pi::Pi];

/// The built-in source for a harness, if there is one.
pub fn source_for(harness: &str) -> Option<&'static dyn Source> {
    SOURCES.iter().copied().find(|s| s.name() == harness)
}

/// The longest provider or model name kept (the store's CHECK); a longer
/// one is dropped, not cut.
pub const NAME_MAX: usize = 128;

pub(crate) fn bounded_name(s: Option<&str>) -> Option<String> {
    s.filter(|s| !s.is_empty() && s.len() <= NAME_MAX && !s.contains('\0'))
        .map(str::to_string)
}

/// At most this many replies (distinct ids) in one turn; more settles the
/// turn `usage-transcript-too-large`. With [`TURN_EVENTS_MAX`] and the
/// line cap, what a turn's end holds is bounded whatever the transcript
/// says (a real turn has tens, a long agentic one a few thousand).
pub const TURN_REPLIES_MAX: usize = 1 << 14;
/// At most this many reply and stop lines in one turn, a streamed reply's
/// consecutive lines counted once; more is `usage-transcript-too-large`.
pub const TURN_EVENTS_MAX: usize = 1 << 16;

/// Sums what a turn appended (`parts`, whole lines per file). Each reply
/// counts once, by its id over all files (the last line of an id holds its
/// usage), and a reply whose id is in `charged` (written before the turn:
/// a resumed or forked session copies its history into a new file) not at
/// all. The turn is complete when a session file (not a subagent's) gained
/// a reply of its own and, in every such file, the last such reply ends
/// the turn or the harness wrote after it that the turn was stopped; else
/// `usage-turn-incomplete`. Provider and model are those of
/// the turn's last reply that names a model, the session's own before a
/// subagent's (a turn that mixed models is recorded under the last one; a
/// reply the harness wrote itself, such as Claude Code's `<synthetic>` API
/// error, names none and does not take the turn's model away). A line past
/// [`transcript::LINE_MAX`] is `usage-transcript-too-large`.
pub fn outcome_of(
    source: &dyn Source,
    parts: &[Part],
    charged: &HashSet<String>,
) -> Result<Reading, Code> {
    let mut turn = Turn::new();
    for part in parts {
        turn.take(
            source,
            Tailed::Part {
                subagent: part.subagent,
                fresh: part.fresh,
            },
        );
        for line in lines_of(&part.bytes) {
            let piece = if line.len() > transcript::LINE_MAX {
                Tailed::Long
            } else {
                Tailed::Line(line)
            };
            turn.take(source, piece);
        }
    }
    let charged = charged
        .iter()
        .filter_map(|id| turn.ids.get(id.as_str()).copied())
        .collect();
    turn.outcome(&charged)
}

/// The lines of `bytes` split at each newline, as `split` would (the
/// piece after the last newline included), found with `memchr`.
fn lines_of(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut start = 0;
    let ends = memchr::memchr_iter(b'\n', bytes).chain(std::iter::once(bytes.len()));
    ends.map(move |end| {
        let line = bytes.get(start..end).unwrap_or_default();
        start = end + 1;
        line
    })
}

/// What one line of a turn said, in order, as [`Turn::outcome`] needs it
/// once it knows which ids the history held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    /// A line of the reply `id` (an index into [`Turn::replies`]); `own`:
    /// the session's (not a subagent's); `named`: this line names a model.
    Reply { id: usize, own: bool, named: bool },
    /// The harness wrote that the turn was stopped; `own` as above.
    Stopped { own: bool },
}

/// One reply of a turn: its last line's reading.
struct Reply {
    tokens: Tokens,
    provider: Option<Box<str>>,
    model: Option<Box<str>>,
    /// It ends the turn (asks for no tool).
    last: bool,
}

/// A turn's appended lines, each parsed once as it streams by: `usage.end`
/// needs the reply ids before it can look them up in the history, and the
/// sums after. Memory follows the replies, within [`TURN_REPLIES_MAX`] and
/// [`TURN_EVENTS_MAX`]: one entry per id (the last line's) and a small
/// event per reply or stop line; other lines leave nothing.
struct Turn {
    /// Each reply id, with its index in `replies` (by first appearance).
    ids: HashMap<Box<str>, usize>,
    replies: Vec<Reply>,
    /// Per part, its events in order.
    events: Vec<Vec<Event>>,
    /// Events over all parts.
    counted: usize,
    /// The part being read is a subagent's file.
    subagent: bool,
    /// The first line that could not be read: the turn's outcome. Nothing
    /// after it is parsed.
    failed: Option<Code>,
}

impl Turn {
    fn new() -> Turn {
        Turn {
            ids: HashMap::new(),
            replies: Vec::new(),
            events: Vec::new(),
            counted: 0,
            subagent: false,
            failed: None,
        }
    }

    /// Takes what reading the turn handed on.
    fn take(&mut self, source: &dyn Source, t: Tailed<'_>) {
        match t {
            Tailed::Part { subagent, .. } => {
                self.events.push(Vec::new());
                self.subagent = subagent;
            }
            Tailed::Long => {
                self.failed.get_or_insert(Code::UsageTranscriptTooLarge);
            }
            Tailed::Line(line) => {
                if self.failed.is_none() && !line.iter().all(u8::is_ascii_whitespace) {
                    if let Err(c) = self.line(source, line) {
                        self.failed = Some(c);
                    }
                }
            }
        }
    }

    fn line(&mut self, source: &dyn Source, line: &[u8]) -> Result<(), Code> {
        let event = match source.entry(line)? {
            Some(Line::Reply(e)) => {
                let reply = Reply {
                    tokens: e.tokens,
                    provider: e.provider.map(String::into_boxed_str),
                    model: e.model.map(String::into_boxed_str),
                    last: e.last,
                };
                let named = reply.model.is_some();
                let id = match self.ids.get(e.id.as_str()) {
                    Some(&i) => {
                        self.replies[i] = reply;
                        i
                    }
                    None => {
                        if self.replies.len() >= TURN_REPLIES_MAX {
                            return Err(Code::UsageTranscriptTooLarge);
                        }
                        let i = self.replies.len();
                        self.ids.insert(e.id.into_boxed_str(), i);
                        self.replies.push(reply);
                        i
                    }
                };
                let own = !self.subagent && !e.sidechain;
                Event::Reply { id, own, named }
            }
            Some(Line::Interrupted { sidechain }) => Event::Stopped {
                own: !self.subagent && !sidechain,
            },
            None => return Ok(()),
        };
        let Some(events) = self.events.last_mut() else {
            return Ok(());
        };
        // A streamed reply's lines follow each other: one event holds them.
        if let (
            Some(Event::Reply { id, own, named }),
            Event::Reply {
                id: i,
                own: o,
                named: n,
            },
        ) = (events.last_mut(), event)
        {
            if *id == i && *own == o {
                *named |= n;
                return Ok(());
            }
        }
        if self.counted >= TURN_EVENTS_MAX {
            return Err(Code::UsageTranscriptTooLarge);
        }
        self.counted += 1;
        events.push(event);
        Ok(())
    }

    /// The reading (see [`outcome_of`]), the replies in `charged` (indices
    /// into `replies`) left out.
    fn outcome(&self, charged: &HashSet<usize>) -> Result<Reading, Code> {
        if let Some(c) = self.failed {
            return Err(c);
        }
        let counts = |id: usize| !charged.contains(&id);
        // Per session file that gained a reply of its own: its last one,
        // and whether the turn was stopped after it.
        let mut closers: Vec<(usize, bool)> = Vec::new();
        // The last reply that names a model: the session's own, else a
        // subagent's.
        let mut named_own: Option<usize> = None;
        let mut named_side: Option<usize> = None;
        for events in &self.events {
            let mut closer: Option<(usize, bool)> = None;
            for ev in events {
                match *ev {
                    Event::Stopped { own } => {
                        if let (Some(c), true) = (closer.as_mut(), own) {
                            c.1 = true;
                        }
                    }
                    Event::Reply { id, own, named } if counts(id) => {
                        if own {
                            closer = Some((id, false));
                        }
                        if named {
                            *(if own { &mut named_own } else { &mut named_side }) = Some(id);
                        }
                    }
                    Event::Reply { .. } => {}
                }
            }
            closers.extend(closer);
        }
        if closers.is_empty() {
            return Err(Code::UsageTurnIncomplete);
        }
        for &(id, stopped) in &closers {
            if !stopped && !self.replies[id].last {
                return Err(Code::UsageTurnIncomplete);
            }
        }
        let closing = named_own
            .or(named_side)
            .map(|id| &self.replies[id])
            .map(|r| {
                (
                    r.provider.as_deref().map(str::to_string),
                    r.model.as_deref().map(str::to_string),
                )
            });
        let (provider, model) = closing.unwrap_or_default();
        let mut tokens = Tokens::default();
        for (_, r) in self.replies.iter().enumerate().filter(|(i, _)| counts(*i)) {
            add(&mut tokens, &r.tokens)?;
        }
        Ok(Reading {
            provider,
            model,
            tokens,
        })
    }
}

/// What `usage.begin` found for one source: a baseline to store, or the
/// code the turn is settled unknown with at once.
pub fn begin(harness: &str, transcript: Option<&Path>, budget: &Budget) -> Result<Baseline, Code> {
    source_for(harness).ok_or(Code::UsageSourceAbsent)?;
    let path = transcript.ok_or(Code::UsageSourceAbsent)?;
    transcript::baseline(path, budget)
}

/// What `usage.end` found for one source, given the turn's stored baseline
/// (`None`: there is none).
pub fn end(
    harness: &str,
    transcript: Option<&Path>,
    baseline: Option<&Baseline>,
    budget: &Budget,
) -> Result<Reading, Code> {
    let source = source_for(harness).ok_or(Code::UsageSourceAbsent)?;
    let path = transcript.ok_or(Code::UsageSourceAbsent)?;
    let baseline = baseline.ok_or(Code::UsageBaselineMissing)?;
    let mut turn = Turn::new();
    let files = transcript::open_turn(path, baseline, budget, &mut |t| turn.take(source, t))?;
    // The turn's reply ids the history (the baselined bytes, read anyway
    // to see a rewrite) already holds: those replies were written before
    // the turn (a resumed or forked session copies them into a new file).
    // Only the turn's ids are kept, so memory follows the turn; a history
    // line is parsed only when its bytes may hold one of them
    // (`prefilter`), and one the source can't read is no reply. A turn
    // already settled by a line it could not read needs no lookup.
    let mut charged = HashSet::new();
    if turn.failed.is_some() || turn.ids.is_empty() {
        files.check(budget, None)?;
    } else {
        let filter = prefilter::IdFilter::new(turn.ids.keys().map(|id| source.needle(id)));
        let ids = &turn.ids;
        let mut scan = |line: &[u8]| {
            if !filter.may_hold(line) {
                return;
            }
            if let Ok(Some(Line::Reply(e))) = source.entry(line) {
                if let Some(&i) = ids.get(e.id.as_str()) {
                    charged.insert(i);
                }
            }
        };
        files.check(budget, Some(&mut scan))?;
    }
    turn.outcome(&charged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_by_harness() {
        assert_eq!(
            source_for("claude-code").map(|s| s.name()),
            Some("claude-code")
        );
        assert_eq!(source_for("pi").map(|s| s.name()), Some("pi"));
        assert!(source_for("codex").is_none());
        let b = Budget::start();
        assert_eq!(
            begin("codex", Some(Path::new("/x")), &b),
            Err(Code::UsageSourceAbsent)
        );
        assert_eq!(begin("pi", None, &b), Err(Code::UsageSourceAbsent));
        assert_eq!(end("pi", None, None, &b), Err(Code::UsageSourceAbsent));
        assert_eq!(
            end("pi", Some(Path::new("/x")), None, &b),
            Err(Code::UsageBaselineMissing)
        );
    }

    use serde_json::json;
    use std::io::Write;

    fn append(p: &Path, lines: &[String]) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .unwrap();
        for l in lines {
            writeln!(f, "{l}").unwrap();
        }
    }

    /// A Claude Code reply line that ends the turn, `input` tokens in.
    fn cc(id: &str, input: u64) -> String {
        json!({"type": "assistant", "message": {"id": id, "model": "m", "stop_reason": "end_turn",
               "content": [{"type": "text"}],
               "usage": {"input_tokens": input, "output_tokens": 1}}})
        .to_string()
    }

    /// `end` of the turn that appends `turn` to a session file holding
    /// `history`, or (`resumed`) writes `history` and `turn` to a new file
    /// beside it, as a resumed session does.
    fn ended(
        harness: &str,
        history: &[String],
        turn: &[String],
        resumed: bool,
    ) -> Result<u64, Code> {
        let d = tempfile::tempdir().unwrap();
        let s1 = d.path().join("s1.jsonl");
        append(&s1, history);
        let budget = Budget::start();
        let base = begin(harness, Some(d.path()), &budget).unwrap();
        let to = if resumed {
            let s2 = d.path().join("s2.jsonl");
            append(&s2, history);
            s2
        } else {
            s1
        };
        append(&to, turn);
        end(harness, Some(d.path()), Some(&base), &budget).map(|r| r.tokens.input)
    }

    #[test]
    fn an_id_the_history_only_mentions_is_not_a_reply_it_held() {
        // The id in a user's text, in a tool result, and in another
        // reply's text: none of those lines is the reply.
        let history = [
            json!({"type": "user", "message": {"content": "what was msg_01X about?"}}).to_string(),
            json!({"type": "user", "message": {"content": [{"type": "tool_result",
                   "content": "{\"id\":\"msg_01X\"}"}]}})
            .to_string(),
            json!({"type": "assistant", "message": {"id": "msg_01W", "model": "m",
                   "stop_reason": "end_turn", "content": [{"type": "text", "text": "msg_01X"}],
                   "usage": {"input_tokens": 5, "output_tokens": 1}}})
            .to_string(),
        ];
        assert_eq!(
            ended("claude-code", &history, &[cc("msg_01X", 7)], false),
            Ok(7)
        );
        // The reply itself in the history: a copy, charged before.
        let held = [history[0].clone(), cc("msg_01X", 7)];
        assert_eq!(
            ended("claude-code", &held, &[cc("msg_01X", 7)], true),
            Err(Code::UsageTurnIncomplete)
        );
    }

    #[test]
    fn a_held_reply_is_found_whatever_escapes_spell_its_id() {
        // JSON may spell any character as `\uXXXX` and `/` as `\/`.
        let spelled = [
            (r"msg\u005f01X", "msg_01X"),
            (r"\u006d\u0073\u0067_01X", "msg_01X"),
            (r"msg_01\u00e9", "msg_01\u{e9}"),
            (r"msg_01\/X", "msg_01/X"),
        ];
        for (written, id) in spelled {
            let old = cc("PLACEHOLDER", 7).replace("PLACEHOLDER", written);
            let turn = [cc(id, 7), cc("msg_01Y", 3)];
            assert_eq!(
                ended("claude-code", std::slice::from_ref(&old), &turn, true),
                Ok(3),
                "{old}"
            );
        }
    }

    #[test]
    fn many_ids_are_looked_up_as_well_as_a_few() {
        // More ids than the finders take: the automaton's path.
        let ids: Vec<String> = (0..20).map(|i| format!("msg_01N{i:02}")).collect();
        let turn: Vec<String> = ids.iter().map(|id| cc(id, 1)).collect();
        let history = [cc(&ids[3], 1), cc(&ids[19], 1), cc("msg_01Other", 1)];
        assert_eq!(ended("claude-code", &history, &turn, true), Ok(18));
    }

    #[test]
    fn a_pi_reply_held_under_a_differently_split_id_is_still_held() {
        // pi's reply id is the entry id and the timestamp joined by a
        // space, so `a` at `b c` and `a b` at `c` are one reply.
        let reply = |id: &str, ts: &str| {
            json!({"type": "message", "id": id, "timestamp": ts,
                   "message": {"role": "assistant", "stopReason": "stop",
                               "usage": {"input": 4, "output": 1, "cacheRead": 0, "cacheWrite": 0}}})
            .to_string()
        };
        let mut other = reply("z9", "t");
        other = other.replace("\"input\":4", "\"input\":2");
        assert_eq!(
            ended(
                "pi",
                &[reply("a", "b c")],
                &[reply("a b", "c"), other],
                true
            ),
            Ok(2)
        );
    }

    #[test]
    fn a_turn_line_past_the_cap_is_too_large_and_one_under_it_is_read_whole() {
        // A user line of zeros just under the cap: skipped as no reply,
        // the turn counts.
        let pad = |len: usize| {
            let head = r#"{"type":"user","pad":[0"#;
            let mut l = String::with_capacity(len);
            l.push_str(head);
            while l.len() + 2 + 2 <= len {
                l.push_str(",0");
            }
            l.push_str("]}");
            l
        };
        let under = pad(transcript::LINE_MAX);
        assert!(under.len() <= transcript::LINE_MAX);
        assert_eq!(
            ended("claude-code", &[], &[under, cc("msg_01A", 7)], false),
            Ok(7)
        );
        // One byte over: the turn is unknown, whatever the rest says.
        let mut over = pad(transcript::LINE_MAX);
        while over.len() <= transcript::LINE_MAX {
            over.push(' ');
        }
        assert_eq!(over.len(), transcript::LINE_MAX + 1);
        assert_eq!(
            ended("claude-code", &[], &[cc("msg_01A", 7), over.clone()], false),
            Err(Code::UsageTranscriptTooLarge)
        );
        // In the history, such a line is only skipped.
        let old = over;
        assert_eq!(
            ended("claude-code", &[old], &[cc("msg_01A", 7)], false),
            Ok(7)
        );
    }

    #[test]
    fn a_turn_holds_at_most_its_caps_of_replies_and_lines() {
        // Distinct replies past the cap.
        let many: Vec<String> = (0..=TURN_REPLIES_MAX)
            .map(|i| cc(&format!("m{i}"), 1))
            .collect();
        assert_eq!(
            ended("claude-code", &[], &many, false),
            Err(Code::UsageTranscriptTooLarge)
        );
        let fits = &many[..TURN_REPLIES_MAX];
        assert_eq!(
            ended("claude-code", &[], fits, false),
            Ok(TURN_REPLIES_MAX as u64)
        );
        // A streamed reply's lines are one event however many there are;
        // two replies taking turns are one each.
        let streamed: Vec<String> = (0..TURN_EVENTS_MAX + 1).map(|_| cc("s", 2)).collect();
        assert_eq!(ended("claude-code", &[], &streamed, false), Ok(2));
        let turns: Vec<String> = (0..=TURN_EVENTS_MAX)
            .map(|i| cc(if i % 2 == 0 { "a" } else { "b" }, 1))
            .collect();
        assert_eq!(
            ended("claude-code", &[], &turns, false),
            Err(Code::UsageTranscriptTooLarge)
        );
    }

    #[test]
    fn lines_split_as_split_does() {
        for text in [&b""[..], b"\n", b"a", b"a\n", b"a\nbc\n\nd", b"\n\nx\n"] {
            let want: Vec<&[u8]> = text.split(|b| *b == b'\n').collect();
            assert_eq!(lines_of(text).collect::<Vec<_>>(), want);
        }
    }

    #[test]
    fn sums_past_i64_are_parse_failures() {
        let mut t = Tokens {
            input: COUNT_MAX,
            ..Tokens::default()
        };
        let one = Tokens {
            input: 1,
            ..Tokens::default()
        };
        assert_eq!(add(&mut t, &one), Err(Code::UsageParseFailed));
        t.input -= 1;
        assert_eq!(add(&mut t, &one), Ok(()));
    }
}
