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
pub mod pi;
pub mod transcript;

use crate::budget::Budget;
use crate::error::Code;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use transcript::{Baseline, Part};

pub use crate::policy::usage::Tokens;

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
/// error, names none and does not take the turn's model away).
pub fn outcome_of(
    source: &dyn Source,
    parts: &[Part],
    charged: &HashSet<String>,
) -> Result<Reading, Code> {
    let mut replies: HashMap<String, Entry> = HashMap::new();
    // Per session file that gained a reply of its own: its last one, and
    // whether the turn was stopped after it.
    let mut closers: Vec<(String, bool)> = Vec::new();
    // The last reply that names a model: the session's own, else a
    // subagent's.
    let mut named: Option<String> = None;
    let mut named_side: Option<String> = None;
    for part in parts {
        let mut closer: Option<(String, bool)> = None;
        for line in part.bytes.split(|b| *b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let e = match source.entry(line)? {
                Some(Line::Reply(e)) => e,
                Some(Line::Interrupted { sidechain }) => {
                    if let (Some(c), false) = (closer.as_mut(), part.subagent || sidechain) {
                        c.1 = true;
                    }
                    continue;
                }
                None => continue,
            };
            if charged.contains(&e.id) {
                continue;
            }
            let own = !part.subagent && !e.sidechain;
            if own {
                closer = Some((e.id.clone(), false));
            }
            if e.model.is_some() {
                *(if own { &mut named } else { &mut named_side }) = Some(e.id.clone());
            }
            replies.insert(e.id.clone(), e);
        }
        closers.extend(closer);
    }
    if closers.is_empty() {
        return Err(Code::UsageTurnIncomplete);
    }
    for (id, stopped) in &closers {
        if !stopped && !replies.get(id).is_some_and(|e| e.last) {
            return Err(Code::UsageTurnIncomplete);
        }
    }
    let closing = named
        .or(named_side)
        .and_then(|id| replies.get(&id))
        .map(|e| (e.provider.clone(), e.model.clone()));
    let (provider, model) = closing.unwrap_or_default();
    let mut tokens = Tokens::default();
    for e in replies.values() {
        add(&mut tokens, &e.tokens)?;
    }
    Ok(Reading {
        provider,
        model,
        tokens,
    })
}

/// The ids among the replies in `parts` that the transcript's history
/// (its baselined bytes) already holds. Only the turn's own ids are kept,
/// so memory follows the turn, not the history; a history line the source
/// can't read is no reply.
fn already_charged(
    source: &dyn Source,
    path: &Path,
    baseline: &Baseline,
    parts: &[Part],
    budget: &Budget,
) -> Result<HashSet<String>, Code> {
    let mut ids = HashSet::new();
    for part in parts {
        for line in part.bytes.split(|b| *b == b'\n') {
            if let Ok(Some(Line::Reply(e))) = source.entry(line) {
                ids.insert(e.id);
            }
        }
    }
    let mut charged = HashSet::new();
    if ids.is_empty() || baseline.files.is_empty() {
        return Ok(charged);
    }
    transcript::history(path, baseline, budget, &mut |line| {
        if let Ok(Some(Line::Reply(e))) = source.entry(line) {
            if ids.contains(&e.id) {
                charged.insert(e.id);
            }
        }
    })?;
    Ok(charged)
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
    let parts = transcript::appended(path, baseline, budget)?;
    let charged = already_charged(source, path, baseline, &parts, budget)?;
    outcome_of(source, &parts, &charged)
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
