//! Which lines of a transcript's history can hold one of a turn's reply
//! ids, judged on the line's bytes before any JSON is parsed.
//!
//! `usage.end` looks the turn's reply ids up in the history (a resumed
//! session copies earlier replies into a new file). Parsing every history
//! line made each end cost a JSON parse of the whole session; most lines
//! (prompts, tool results, other replies) can't name any of the turn's
//! few ids, and that shows in their bytes. The filter never drops a line
//! that parses to one of the ids: it only lets the caller skip the parse.
//!
//! A JSON string may spell a character literally or as an escape: `\"`,
//! `\\`, `\/` and the control characters' short forms, or `\uXXXX` for
//! any character. So a line whose parsed id is `X` holds `X`'s bytes, or
//! at least one `\u` escape of a character `X` contains (a character past
//! U+FFFF is a pair of escapes of surrogates, both past U+007F). A needle
//! with a character that has a short escape is not searched for at all:
//! every line may hold it (real ids have none).

use aho_corasick::{AhoCorasick, MatchKind};
use memchr::memmem;

/// Up to this many needles are searched for one by one (a vectorised
/// substring search each); more go through one Aho-Corasick automaton.
/// Measured on the 50 MB transcript of `bench_usage`: four finders take
/// about 8 ms over the history where the automaton takes about 30; an end
/// usually has a handful of ids, a resumed session's thousands.
const FINDERS_MAX: usize = 8;

/// How the needles are looked for.
enum Search {
    /// Some needle can't be searched for as bytes, or the automaton could
    /// not be built: every line passes.
    Everything,
    Finders(Vec<memmem::Finder<'static>>),
    Automaton(AhoCorasick),
}

/// The byte test for a set of needles (the strings the turn's reply ids
/// are spelled with in a line: `Source::needle`).
pub struct IdFilter {
    search: Search,
    /// The ASCII characters that occur in some needle.
    ascii: [bool; 128],
    /// Some needle holds a character past U+007F.
    wide: bool,
    /// Where an escape that may spell a needle's character starts: `\u00`
    /// (an ASCII character), or any `\u` when `wide`. Lines are full of
    /// `\n`, and of `\u001b` in terminal output.
    escape: memmem::Finder<'static>,
}

/// A character JSON may write as a short escape (`\"`, `\\`, `\/`, `\b`,
/// `\f`, `\n`, `\r`, `\t`; the other controls only as `\u`, but they are
/// no id's either).
fn short_escape(c: char) -> bool {
    matches!(c, '"' | '\\' | '/') || c < ' '
}

impl IdFilter {
    pub fn new<'a>(needles: impl IntoIterator<Item = &'a str>) -> IdFilter {
        let mut needles: Vec<&str> = needles.into_iter().collect();
        needles.sort_unstable();
        needles.dedup();
        let mut ascii = [false; 128];
        let mut wide = false;
        let mut searchable = true;
        for c in needles.iter().flat_map(|n| n.chars()) {
            searchable &= !short_escape(c);
            match ascii.get_mut(c as usize) {
                Some(seen) => *seen = true,
                None => wide = true,
            }
        }
        let search = if !searchable {
            Search::Everything
        } else if needles.len() <= FINDERS_MAX {
            let finders = needles.iter().map(|n| memmem::Finder::new(n.as_bytes()));
            Search::Finders(finders.map(|f| f.into_owned()).collect())
        } else {
            // Leftmost matching lets the automaton use its vectorised
            // prefilter where it can; any match will do here.
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostFirst)
                .build(&needles)
                .map_or(Search::Everything, Search::Automaton)
        };
        let escape = memmem::Finder::new(if wide { &b"\\u"[..] } else { b"\\u00" });
        IdFilter {
            search,
            ascii,
            wide,
            escape,
        }
    }

    /// False only when `line` can't hold any needle in any spelling.
    pub fn may_hold(&self, line: &[u8]) -> bool {
        let found = match &self.search {
            Search::Everything => return true,
            Search::Finders(fs) => fs.iter().any(|f| f.find(line).is_some()),
            Search::Automaton(ac) => ac.is_match(line),
        };
        found || self.escapes_a_needle_char(line)
    }

    /// `line` has a `\uXXXX` escape of a character some needle holds. An
    /// escaped backslash before a `u` reads as an escape here too, which
    /// only lets one more line through to the parser.
    fn escapes_a_needle_char(&self, line: &[u8]) -> bool {
        self.escape.find_iter(line).any(|i| {
            let unit = line
                .get(i + 2..i + 6)
                .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u16::from_str_radix(h, 16).ok());
            match unit {
                Some(u) if u < 0x80 => self.ascii[usize::from(u)],
                Some(_) => self.wide,
                None => false,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_needle_in_any_json_spelling_passes_and_other_lines_do_not() {
        let f = IdFilter::new(["msg_01A", "msg_01B"]);
        assert!(f.may_hold(br#"{"message":{"id":"msg_01A"}}"#));
        assert!(f.may_hold(br#"{"message":{"id":"msg_01B"}}"#));
        // `_` written as an escape.
        assert!(f.may_hold(br#"{"message":{"id":"msg\u005f01A"}}"#));
        assert!(f.may_hold(br#"{"message":{"id":"msg\u005F01A"}}"#));
        // Another id, and an escape of a character no needle has.
        assert!(!f.may_hold(br#"{"message":{"id":"msg_01C"}}"#));
        assert!(!f.may_hold(br#"{"text":"\u001b[32mok\u001b[0m","id":"msg_01C"}"#));
        // A truncated or malformed escape is no character.
        assert!(!f.may_hold(br#"{"a":"\u00"}"#));
        assert!(!f.may_hold(br#"{"a":"\u+05f"}"#));
        assert!(!f.may_hold(b"\\u"));
    }

    #[test]
    fn wide_characters_and_short_escapes() {
        let f = IdFilter::new(["id-\u{e9}"]);
        assert!(f.may_hold("{\"id\":\"id-\u{e9}\"}".as_bytes()));
        assert!(f.may_hold(br#"{"id":"id-\u00e9"}"#));
        // Any escape past U+007F may be one of its characters.
        assert!(f.may_hold(br#"{"t":"\u4e2d","id":"x"}"#));
        let ascii = IdFilter::new(["abc"]);
        assert!(!ascii.may_hold(br#"{"t":"\u4e2d","id":"x"}"#));
        // A needle JSON may write with `\/`: every line passes.
        let slash = IdFilter::new(["a/b"]);
        assert!(slash.may_hold(br#"{"id":"a\/b"}"#));
        assert!(slash.may_hold(b"{}"));
        let quote = IdFilter::new(["a\"b"]);
        assert!(quote.may_hold(b"{}"));
    }
}
