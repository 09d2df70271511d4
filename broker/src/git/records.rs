//! What a project file may hold: the Markdown rule for `docs/NAME.md` and
//! the spec, and the two strict JSON shapes for requirements and decisions
//! (documented in `docs/decisions.md`). A record that breaks them is
//! `invalid-record`; the bytes written are made here, so the same record
//! always gives the same file.

use super::write::{is_decision_id, is_requirement_id, Kind, RecordPath};
use super::FILE_MAX;
use crate::error::Code;
use serde_json::{Map, Value};

/// Longest title of a requirement or decision, in characters.
pub const TITLE_MAX: usize = 200;
/// Longest text field of a requirement or decision, in bytes.
pub const TEXT_MAX: usize = 16 * 1024;
/// Most ids a requirement or decision may list.
pub const LINKS_MAX: usize = 64;

/// Requirement statuses.
pub const REQUIREMENT_STATUS: &[&str] = &["proposed", "accepted", "met", "dropped"];
/// Decision statuses.
pub const DECISION_STATUS: &[&str] = &["proposed", "accepted", "superseded", "rejected"];

/// The Markdown rule: at most 1 MiB of UTF-8 (a JSON string already is),
/// no control character but tab, line feed and carriage return, and at
/// least one character that is not white space.
pub fn check_markdown(s: &str) -> Result<(), Code> {
    let ok = s.len() <= FILE_MAX
        && !s.trim().is_empty()
        && s.chars()
            .all(|c| !c.is_control() || matches!(c, '\t' | '\n' | '\r'));
    ok.then_some(()).ok_or(Code::InvalidRecord)
}

/// One line of text: 1 to [`TITLE_MAX`] characters, no control character,
/// not only white space.
fn title(v: Option<Value>) -> Result<Value, Code> {
    match v {
        Some(Value::String(s))
            if !s.trim().is_empty()
                && s.chars().count() <= TITLE_MAX
                && !s.chars().any(char::is_control) =>
        {
            Ok(Value::String(s))
        }
        _ => Err(Code::InvalidRecord),
    }
}

/// A text field: Markdown of at most [`TEXT_MAX`] bytes.
fn text(v: Option<Value>) -> Result<Value, Code> {
    match v {
        Some(Value::String(s)) if s.len() <= TEXT_MAX => {
            check_markdown(&s)?;
            Ok(Value::String(s))
        }
        _ => Err(Code::InvalidRecord),
    }
}

fn one_of(v: Option<Value>, allowed: &[&str]) -> Result<Value, Code> {
    match v {
        Some(Value::String(s)) if allowed.contains(&s.as_str()) => Ok(Value::String(s)),
        _ => Err(Code::InvalidRecord),
    }
}

/// A list of distinct ids that pass `is_id`, at most [`LINKS_MAX`].
fn links(v: Option<Value>, is_id: fn(&str) -> bool) -> Result<Value, Code> {
    let Some(Value::Array(list)) = v else {
        return Err(Code::InvalidRecord);
    };
    if list.len() > LINKS_MAX {
        return Err(Code::InvalidRecord);
    }
    let mut seen = std::collections::BTreeSet::new();
    for x in &list {
        match x.as_str() {
            Some(s) if is_id(s) && seen.insert(s) => {}
            _ => return Err(Code::InvalidRecord),
        }
    }
    Ok(Value::Array(list))
}

/// The bytes to commit for `record` at `path`. Docs take a Markdown
/// string; requirements and decisions an object of exactly their shape,
/// written as pretty JSON with sorted keys and a final newline. The spec
/// is not a record (`project-spec-human-only`).
pub fn record_bytes(path: &RecordPath, record: Value) -> Result<Vec<u8>, Code> {
    match path.kind {
        Kind::Spec => Err(Code::ProjectSpecHumanOnly),
        Kind::Doc => match record {
            Value::String(s) => {
                check_markdown(&s)?;
                Ok(s.into_bytes())
            }
            _ => Err(Code::InvalidRecord),
        },
        Kind::Requirement | Kind::Decision => {
            let Value::Object(mut m) = record else {
                return Err(Code::InvalidRecord);
            };
            let mut out = Map::new();
            if m.remove("id").as_ref().and_then(Value::as_str) != Some(path.stem.as_str()) {
                return Err(Code::InvalidRecord);
            }
            out.insert("id".into(), Value::String(path.stem.clone()));
            out.insert("title".into(), title(m.remove("title"))?);
            if path.kind == Kind::Requirement {
                out.insert("statement".into(), text(m.remove("statement"))?);
                out.insert(
                    "status".into(),
                    one_of(m.remove("status"), REQUIREMENT_STATUS)?,
                );
                if let Some(d) = m.remove("decisions") {
                    out.insert("decisions".into(), links(Some(d), is_decision_id)?);
                }
            } else {
                out.insert("context".into(), text(m.remove("context"))?);
                out.insert("choice".into(), text(m.remove("choice"))?);
                out.insert(
                    "status".into(),
                    one_of(m.remove("status"), DECISION_STATUS)?,
                );
                if let Some(r) = m.remove("requirements") {
                    out.insert("requirements".into(), links(Some(r), is_requirement_id)?);
                }
                if let Some(s) = m.remove("supersedes") {
                    match s.as_str() {
                        Some(id) if is_decision_id(id) && id != path.stem => {
                            out.insert("supersedes".into(), s);
                        }
                        _ => return Err(Code::InvalidRecord),
                    }
                }
            }
            if !m.is_empty() {
                return Err(Code::InvalidRecord);
            }
            let mut bytes =
                serde_json::to_vec_pretty(&Value::Object(out)).map_err(|_| Code::InvalidRecord)?;
            bytes.push(b'\n');
            Ok(bytes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::write::parse_path;
    use super::*;
    use serde_json::json;

    fn req() -> Value {
        json!({"id": "REQ-PROJ-4", "title": "Spec review", "statement": "The pm reviews.",
               "status": "accepted", "decisions": ["DEC-1", "DEC-2"]})
    }

    fn dec() -> Value {
        json!({"id": "DEC-7", "title": "Use Git", "context": "Records need history.",
               "choice": "A local repository.", "status": "accepted",
               "requirements": ["REQ-PROJ-4"], "supersedes": "DEC-3"})
    }

    fn edit(mut v: Value, key: &str, x: Option<Value>) -> Value {
        let m = v.as_object_mut().expect("object");
        match x {
            Some(x) => {
                m.insert(key.into(), x);
            }
            None => {
                m.remove(key);
            }
        }
        v
    }

    #[test]
    fn record_shapes_one_case_each() {
        let rp = parse_path("requirements/REQ-PROJ-4.json").expect("path");
        let dp = parse_path("decisions/DEC-7.json").expect("path");
        let doc = parse_path("docs/plan.md").expect("path");
        let spec = parse_path("spec/north-star.md").expect("path");
        // Written sorted, pretty, with a final newline.
        let bytes = record_bytes(&rp, req()).expect("requirement");
        let text = String::from_utf8(bytes).expect("utf-8");
        assert!(text.starts_with("{\n  \"decisions\""), "{text}");
        assert!(text.ends_with("}\n"));
        assert!(record_bytes(&dp, dec()).is_ok());
        assert!(record_bytes(&rp, edit(req(), "decisions", None)).is_ok());
        assert!(record_bytes(&dp, edit(dec(), "supersedes", None)).is_ok());
        assert_eq!(
            record_bytes(&doc, json!("# Plan\n")).expect("doc"),
            b"# Plan\n"
        );
        let bad: Vec<(&RecordPath, Value)> = vec![
            (&rp, edit(req(), "id", Some(json!("REQ-PROJ-5")))),
            (&rp, edit(req(), "id", None)),
            (&rp, edit(req(), "title", Some(json!("")))),
            (&rp, edit(req(), "title", Some(json!("two\nlines")))),
            (&rp, edit(req(), "title", Some(json!("t".repeat(201))))),
            (&rp, edit(req(), "statement", Some(json!(7)))),
            (
                &rp,
                edit(req(), "statement", Some(json!("x".repeat(TEXT_MAX + 1)))),
            ),
            (&rp, edit(req(), "status", Some(json!("done")))),
            (&rp, edit(req(), "status", None)),
            (
                &rp,
                edit(req(), "decisions", Some(json!(["DEC-1", "DEC-1"]))),
            ),
            (&rp, edit(req(), "decisions", Some(json!(["REQ-A-1"])))),
            (&rp, edit(req(), "decisions", Some(json!("DEC-1")))),
            (&rp, edit(req(), "extra", Some(json!(1)))),
            (&rp, json!(["not", "an", "object"])),
            (&dp, edit(dec(), "choice", None)),
            (&dp, edit(dec(), "context", Some(json!("  ")))),
            (&dp, edit(dec(), "supersedes", Some(json!("DEC-7")))),
            (&dp, edit(dec(), "supersedes", Some(json!("DEC-x")))),
            (&dp, edit(dec(), "requirements", Some(json!(["DEC-1"])))),
            (&dp, edit(dec(), "status", Some(json!("accepted ")))),
            (&dp, req()),
            (&doc, json!({"text": "# Plan"})),
            (&doc, json!("")),
            (&doc, json!(" \n\t")),
            (&doc, json!("bell\u{7}")),
            (&doc, json!("nul\u{0}")),
            (&doc, json!("esc\u{1b}[31m")),
        ];
        for (p, v) in bad {
            assert_eq!(
                record_bytes(p, v.clone()),
                Err(Code::InvalidRecord),
                "{} {v}",
                p.path
            );
        }
        assert_eq!(
            record_bytes(&spec, json!("# North star\n")),
            Err(Code::ProjectSpecHumanOnly)
        );
        // The Markdown bound is 1 MiB.
        assert!(check_markdown(&"a".repeat(FILE_MAX)).is_ok());
        assert_eq!(
            check_markdown(&"a".repeat(FILE_MAX + 1)),
            Err(Code::InvalidRecord)
        );
        assert!(check_markdown("tabs\tand\r\nlines\n").is_ok());
    }
}
