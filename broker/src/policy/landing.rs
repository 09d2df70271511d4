//! Landing a task's work on a project's protected main (3i row 137): which
//! merge decision a landing may use, which reviewed commit it may land, and
//! the RESULT texts the landing role gets. Pure rules over the rows
//! `store::landings` and `store::decisions` return; the transaction is
//! `host::landing`'s.

use super::authority::DecisionFacts;
use super::routing::Class;
use crate::error::Code;
use crate::ids::is_task_ref;

/// The action a landing spends.
pub const ACTION: &str = "git.merge.protected";

/// Who asks to land, on what, and what current policy says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LandAsk<'a> {
    /// The landing role instance.
    pub role: &'a str,
    /// The task whose work lands (the decision's target).
    pub task_ref: &'a str,
    /// The thread the landing run serves; `None` for a role run.
    pub thread: Option<&'a str>,
    /// The class current policy gives [`ACTION`] for `role`.
    pub class: Class,
}

/// The decision rule of a landing, in this order:
///
/// 1. the decision is for [`ACTION`], raised by this role instance, with the
///    task as its target, of class cross-role (`not-authorized` otherwise:
///    REQ-LAND-1, whoever resolved it);
/// 2. it was raised in the landing run's thread, or in none for a role run
///    (`decision-mismatch`: the thread-bound approval of row 136);
/// 3. current policy still grants the role [`ACTION`] cross-role
///    (`decision-mismatch`: recorded class and current policy differ);
/// 4. it is resolved with its approval option and not yet used
///    (`decision-consumed`: open, withdrawn, another option or spent).
///
/// `decision_thread` is the thread the decision was raised in (`None` when
/// a role run raised it).
pub fn check_decision(
    d: &DecisionFacts<'_>,
    decision_thread: Option<&str>,
    ask: &LandAsk<'_>,
) -> Result<(), Code> {
    if d.action != ACTION
        || d.raised_by_role != ask.role
        || d.target != Some(ask.task_ref)
        || d.class != Class::CrossRole
    {
        return Err(Code::NotAuthorized);
    }
    if decision_thread != ask.thread || ask.class != d.class {
        return Err(Code::DecisionMismatch);
    }
    if !usable(d) {
        return Err(Code::DecisionConsumed);
    }
    Ok(())
}

/// The project half of a landing's decision: a merge decision raised for
/// a project (`project`) lands only the task's work pushed to that
/// project; one raised with no project is bound by its task alone, as
/// before (the task's latest push names the work). Another project is
/// `decision-mismatch`: the human approved a merge into the project it saw.
pub fn check_project(decision_project: Option<&str>, push_project: &str) -> Result<(), Code> {
    match decision_project {
        Some(p) if p != push_project => Err(Code::DecisionMismatch),
        _ => Ok(()),
    }
}

/// True when the decision is resolved with its approval option and unused.
pub fn usable(d: &DecisionFacts<'_>) -> bool {
    !d.withdrawn && !d.consumed && d.resolved_choice == Some(d.approval_choice)
}

/// `landHeld`: true when the role (in `thread`, `None` for a role run)
/// holds a decision a landing could use: a cross-role [`ACTION`] approval
/// of its own whose target is a task ref (whichever task: an agent's
/// landing names a task, so an approval for land-work's `refactor` branch,
/// or for no target, lands nothing), raised in that thread, unused, while
/// current policy (`class`) still grants the action cross-role.
pub fn could_land(
    d: &DecisionFacts<'_>,
    decision_thread: Option<&str>,
    role: &str,
    thread: Option<&str>,
    class: Class,
) -> bool {
    d.action == ACTION
        && d.raised_by_role == role
        && d.target.is_some_and(is_task_ref)
        && d.class == Class::CrossRole
        && class == Class::CrossRole
        && decision_thread == thread
        && usable(d)
}

/// The commit rule: the task's latest review verdict (`(verdict, commit)`)
/// must exist (`verdict-not-found`) and approve (`verdict-not-approve`), and
/// its commit must still be the task's latest push (`ref-moved`). Returns
/// that commit.
pub fn check_commits<'a>(
    verdict: Option<(&str, &'a str)>,
    latest_push: Option<&str>,
) -> Result<&'a str, Code> {
    let (v, commit) = verdict.ok_or(Code::VerdictNotFound)?;
    if v != "approve" {
        return Err(Code::VerdictNotApprove);
    }
    if latest_push != Some(commit) {
        return Err(Code::RefMoved);
    }
    Ok(commit)
}

/// True for a Git object name as `recordLand` takes it: 40 (SHA-1) or 64
/// (SHA-256) lowercase hex digits.
pub fn is_object_name(s: &str) -> bool {
    matches!(s.len(), 40 | 64)
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// How the decision was resolved, as the ticket's `resolution.via` says:
/// `cli` for the human through the CLI (the close has a `human.input`),
/// `broker` for the arbiter's `decision.resolve`.
pub fn via(human_input: bool) -> &'static str {
    if human_input {
        "cli"
    } else {
        "broker"
    }
}

/// The RESULT a role gets when its landing was recorded.
pub fn landed_body(
    task_ref: &str,
    project: &str,
    commit: &str,
    previous: &str,
    decision: &str,
) -> String {
    format!(
        "Task {task_ref} landed on the main of project {project}: main is now {commit} \
         (it was {previous}). Decision {decision} is spent."
    )
}

/// The RESULT a role gets when the host ended its landing with a refusal.
pub fn refused_body(task_ref: &str, project: &str, code: &str, detail: Option<&str>) -> String {
    let mut s = format!(
        "The landing of task {task_ref} on the main of project {project} was refused: {code}. \
         Main did not move and the decision is not spent."
    );
    if let Some(d) = detail {
        s.push_str("\nDetail: ");
        s.push_str(d);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const TASK: &str = "vikunja:3/41";

    fn approved() -> DecisionFacts<'static> {
        DecisionFacts {
            raised_by_role: "pm",
            action: ACTION,
            target: Some(TASK),
            project: None,
            class: Class::CrossRole,
            approval_choice: "yes",
            resolved_choice: Some("yes"),
            withdrawn: false,
            consumed: false,
        }
    }

    fn ask() -> LandAsk<'static> {
        LandAsk {
            role: "pm",
            task_ref: TASK,
            thread: None,
            class: Class::CrossRole,
        }
    }

    #[test]
    fn a_landing_uses_only_its_own_unspent_cross_role_approval() {
        type Case = (
            &'static str,
            DecisionFacts<'static>,
            Option<&'static str>,
            LandAsk<'static>,
            Result<(), Code>,
        );
        let table: Vec<Case> = vec![
            ("the approval", approved(), None, ask(), Ok(())),
            (
                "another action",
                DecisionFacts {
                    action: "git.push.protected",
                    ..approved()
                },
                None,
                ask(),
                Err(Code::NotAuthorized),
            ),
            (
                "another role instance",
                approved(),
                None,
                LandAsk {
                    role: "dev",
                    ..ask()
                },
                Err(Code::NotAuthorized),
            ),
            (
                "another task",
                approved(),
                None,
                LandAsk {
                    task_ref: "vikunja:3/42",
                    ..ask()
                },
                Err(Code::NotAuthorized),
            ),
            (
                "no target",
                DecisionFacts {
                    target: None,
                    ..approved()
                },
                None,
                ask(),
                Err(Code::NotAuthorized),
            ),
            (
                "gated, even resolved by the human",
                DecisionFacts {
                    class: Class::Gated,
                    ..approved()
                },
                None,
                LandAsk {
                    class: Class::Gated,
                    ..ask()
                },
                Err(Code::NotAuthorized),
            ),
            (
                "within-role",
                DecisionFacts {
                    class: Class::WithinRole,
                    ..approved()
                },
                None,
                LandAsk {
                    class: Class::WithinRole,
                    ..ask()
                },
                Err(Code::NotAuthorized),
            ),
            (
                "raised in a thread, used by a role run",
                approved(),
                Some("t1"),
                ask(),
                Err(Code::DecisionMismatch),
            ),
            (
                "raised in another thread",
                approved(),
                Some("t1"),
                LandAsk {
                    thread: Some("t2"),
                    ..ask()
                },
                Err(Code::DecisionMismatch),
            ),
            (
                "raised by a role run, used by a thread run",
                approved(),
                None,
                LandAsk {
                    thread: Some("t1"),
                    ..ask()
                },
                Err(Code::DecisionMismatch),
            ),
            (
                "the same thread",
                approved(),
                Some("t1"),
                LandAsk {
                    thread: Some("t1"),
                    ..ask()
                },
                Ok(()),
            ),
            (
                "policy no longer grants it cross-role",
                approved(),
                None,
                LandAsk {
                    class: Class::Gated,
                    ..ask()
                },
                Err(Code::DecisionMismatch),
            ),
            (
                "still open",
                DecisionFacts {
                    resolved_choice: None,
                    ..approved()
                },
                None,
                ask(),
                Err(Code::DecisionConsumed),
            ),
            (
                "another option",
                DecisionFacts {
                    resolved_choice: Some("no"),
                    ..approved()
                },
                None,
                ask(),
                Err(Code::DecisionConsumed),
            ),
            (
                "withdrawn",
                DecisionFacts {
                    resolved_choice: None,
                    withdrawn: true,
                    ..approved()
                },
                None,
                ask(),
                Err(Code::DecisionConsumed),
            ),
            (
                "spent",
                DecisionFacts {
                    consumed: true,
                    ..approved()
                },
                None,
                ask(),
                Err(Code::DecisionConsumed),
            ),
            (
                "another role's spent decision is still not-authorized",
                DecisionFacts {
                    consumed: true,
                    ..approved()
                },
                None,
                LandAsk {
                    role: "dev",
                    ..ask()
                },
                Err(Code::NotAuthorized),
            ),
        ];
        for (name, d, thread, a, want) in table {
            assert_eq!(check_decision(&d, thread, &a), want, "{name}");
        }
    }

    #[test]
    fn land_held_is_any_usable_approval_in_the_same_thread() {
        let d = approved();
        assert!(could_land(&d, None, "pm", None, Class::CrossRole));
        assert!(!could_land(&d, None, "dev", None, Class::CrossRole));
        assert!(!could_land(&d, None, "pm", Some("t1"), Class::CrossRole));
        assert!(!could_land(&d, Some("t1"), "pm", None, Class::CrossRole));
        assert!(could_land(
            &d,
            Some("t1"),
            "pm",
            Some("t1"),
            Class::CrossRole
        ));
        assert!(!could_land(&d, None, "pm", None, Class::Gated));
        let spent = DecisionFacts {
            consumed: true,
            ..approved()
        };
        assert!(!could_land(&spent, None, "pm", None, Class::CrossRole));
        let open = DecisionFacts {
            resolved_choice: None,
            ..approved()
        };
        assert!(!could_land(&open, None, "pm", None, Class::CrossRole));
        for target in [None, Some("refactor")] {
            let other = DecisionFacts {
                target,
                ..approved()
            };
            assert!(!could_land(&other, None, "pm", None, Class::CrossRole));
        }
    }

    #[test]
    fn the_landed_commit_is_the_approved_verdicts_and_the_latest_push() {
        let c1 = "1".repeat(40);
        let c2 = "2".repeat(40);
        assert_eq!(
            check_commits(Some(("approve", &c1)), Some(&c1)),
            Ok(c1.as_str())
        );
        assert_eq!(check_commits(None, Some(&c1)), Err(Code::VerdictNotFound));
        assert_eq!(
            check_commits(Some(("changes", &c1)), Some(&c1)),
            Err(Code::VerdictNotApprove)
        );
        assert_eq!(
            check_commits(Some(("approve", &c1)), Some(&c2)),
            Err(Code::RefMoved)
        );
        assert_eq!(
            check_commits(Some(("approve", &c1)), None),
            Err(Code::RefMoved)
        );
    }

    #[test]
    fn a_merge_decision_raised_for_a_project_lands_only_there() {
        assert_eq!(check_project(None, "site"), Ok(()));
        assert_eq!(check_project(Some("site"), "site"), Ok(()));
        assert_eq!(
            check_project(Some("site"), "app"),
            Err(Code::DecisionMismatch)
        );
    }

    #[test]
    fn object_names_are_forty_or_sixty_four_lowercase_hex_digits() {
        assert!(is_object_name(&"a".repeat(40)));
        assert!(is_object_name(&"0f".repeat(32)));
        for bad in [
            "a".repeat(39),
            "a".repeat(41),
            "A".repeat(40),
            "g".repeat(40),
            String::new(),
            "HEAD".into(),
        ] {
            assert!(!is_object_name(&bad), "{bad}");
        }
    }

    /// The words the role reads: `via` names who resolved, and each RESULT
    /// names the task, the project, the commits or the code, and what
    /// became of the decision. (`cargo mutants`: docs/testing.md; the
    /// landing tests in `tests/tests/landing.rs` read them through a real
    /// broker too.)
    #[test]
    fn via_and_the_result_bodies_say_what_happened() {
        assert_eq!((via(true), via(false)), ("cli", "broker"));
        assert_eq!(
            landed_body(TASK, "site", "c1", "c0", "d1"),
            "Task vikunja:3/41 landed on the main of project site: main is now c1 \
             (it was c0). Decision d1 is spent."
        );
        assert_eq!(
            refused_body(TASK, "site", "merge-conflict", None),
            "The landing of task vikunja:3/41 on the main of project site was refused: \
             merge-conflict. Main did not move and the decision is not spent."
        );
        assert!(
            refused_body(TASK, "site", "x", Some("why")).ends_with("is not spent.\nDetail: why")
        );
    }
}
