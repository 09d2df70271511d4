//! Thread rules (3i row 121): which instance is the business's thread
//! instance, which launch records may name a thread, and what a project or
//! thread name may be. Plain functions over the business; the store side
//! is `store::threads`.

use crate::config::Business;
use crate::error::Code;

/// The role definition whose instances run one thread per run (DESIGN.md,
/// "Schema 3i": the assistant).
pub const THREAD_DEFINITION: &str = "assistant";

/// Defined in `policy::routing`, which classifies a revoke of one.
pub use super::routing::{end_protected as is_end_protected, END_PROTECTED};

/// The longest project or thread name, in characters.
pub const NAME_MAX: usize = 200;

/// True when `role` is an instance of [`THREAD_DEFINITION`].
pub fn is_thread_instance(business: &Business, role: &str) -> bool {
    super::routing::definition_of(business, role) == Some(THREAD_DEFINITION)
}

/// The business's one thread instance: `thread-instance-missing` when no
/// instance has the definition, `thread-instance-ambiguous` when several do.
pub fn thread_instance(business: &Business) -> Result<&str, Code> {
    let mut found = business
        .roles
        .keys()
        .filter(|k| is_thread_instance(business, k));
    match (found.next(), found.next()) {
        (Some(one), None) => Ok(one.as_str()),
        (None, _) => Err(Code::ThreadInstanceMissing),
        (Some(_), Some(_)) => Err(Code::ThreadInstanceAmbiguous),
    }
}

/// A launch record's `thread` against its role: a thread instance's run
/// needs one (`thread-required`), any other role's may not name one
/// (`thread-not-allowed`). Whether the thread exists is the store's to say.
pub fn launch_thread(business: &Business, role: &str, thread: Option<&str>) -> Result<(), Code> {
    match (is_thread_instance(business, role), thread) {
        (true, None) => Err(Code::ThreadRequired),
        (false, Some(_)) => Err(Code::ThreadNotAllowed),
        _ => Ok(()),
    }
}

/// A project or thread name: 1 to [`NAME_MAX`] characters, no control
/// characters, not blank.
pub fn valid_name(name: &str) -> bool {
    let n = name.chars().count();
    (1..=NAME_MAX).contains(&n) && !name.chars().any(char::is_control) && !name.trim().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn business(defs: &[(&str, Option<&str>)]) -> Business {
        let mut roles = serde_json::Map::new();
        for (k, d) in defs {
            let mut r = json!({"authority": {"withinRole": [], "crossRole": []}});
            if let Some(d) = d {
                r["definition"] = json!(d);
            }
            roles.insert(k.to_string(), r);
        }
        Business::from_json(
            "acme",
            json!({"id": "acme", "human": "Ada",
                   "arbiters": {"technical": "cto", "delivery": "cto"},
                   "roles": roles}),
        )
        .expect("business")
    }

    #[test]
    fn the_thread_instance_is_the_one_assistant() {
        let none = business(&[("cto", Some("cto")), ("dev", None)]);
        assert_eq!(thread_instance(&none), Err(Code::ThreadInstanceMissing));
        let one = business(&[("cto", Some("cto")), ("helper", Some("assistant"))]);
        assert_eq!(thread_instance(&one), Ok("helper"));
        assert!(is_thread_instance(&one, "helper"));
        assert!(is_end_protected(&one, "helper"));
        assert!(!is_thread_instance(&one, "cto"));
        assert!(!is_thread_instance(&one, "nobody"));
        let two = business(&[
            ("cto", Some("cto")),
            ("a1", Some("assistant")),
            ("a2", Some("assistant")),
        ]);
        assert_eq!(thread_instance(&two), Err(Code::ThreadInstanceAmbiguous));
    }

    #[test]
    fn only_a_thread_instance_launch_names_a_thread_and_it_must() {
        let b = business(&[("cto", Some("cto")), ("helper", Some("assistant"))]);
        assert_eq!(launch_thread(&b, "helper", None), Err(Code::ThreadRequired));
        assert_eq!(launch_thread(&b, "helper", Some("t")), Ok(()));
        assert_eq!(
            launch_thread(&b, "cto", Some("t")),
            Err(Code::ThreadNotAllowed)
        );
        assert_eq!(launch_thread(&b, "cto", None), Ok(()));
    }

    #[test]
    fn names_are_short_printable_and_not_blank() {
        assert!(valid_name("Plans for May"));
        assert!(valid_name(&"é".repeat(NAME_MAX)));
        for bad in ["", "   ", "a\nb", "a\u{0}b"] {
            assert!(!valid_name(bad), "{bad:?}");
        }
        assert!(!valid_name(&"x".repeat(NAME_MAX + 1)));
    }
}
