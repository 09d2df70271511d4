//! Authority and single use, as pure matching over a decision's recorded
//! facts and a request. The transactional half (reading the decision,
//! writing the consumption row, the `action.allowed` event and the effect in
//! one transaction) is `authorize::authorize_in_tx`.

use super::routing::Class;
use crate::error::Code;

/// What a decision recorded at raise, and what happened to it since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionFacts<'a> {
    /// `raised_by_role`: the role instance the approval binds to.
    pub raised_by_role: &'a str,
    pub action: &'a str,
    pub target: Option<&'a str>,
    /// The project the decision was raised for (`project`), if any.
    pub project: Option<&'a str>,
    /// The class recorded at raise.
    pub class: Class,
    pub approval_choice: &'a str,
    /// `Some(choice)` once resolved; `None` while open or when withdrawn.
    pub resolved_choice: Option<&'a str>,
    /// True once withdrawn.
    pub withdrawn: bool,
    /// True once an authorization used it.
    pub consumed: bool,
}

/// What is asked: this role instance wants to do `action` on `target`
/// (in `project`, for an action done in a project), and the current policy
/// gives the action `class` for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask<'a> {
    pub role: &'a str,
    pub action: &'a str,
    pub target: Option<&'a str>,
    /// The project the request acts in: `Some` for an action of
    /// [`PROJECT_BOUND`] asked through its verb, `None` for an action that
    /// names no project.
    pub project: Option<&'a str>,
    pub class: Class,
}

/// The actions whose target is a path in one of the business's projects
/// (`record.write`): an approval for one is bound to the project it was
/// raised for as well as to its path (DESIGN.md "Git"), since the same path
/// names another file in another repository.
pub const PROJECT_BOUND: &[&str] = &["record.write"];

/// True when an approval for `action` binds its project too.
pub fn project_bound(action: &str) -> bool {
    PROJECT_BOUND.contains(&action)
}

/// The project half of the match: for a [`PROJECT_BOUND`] action, the
/// decision's project must be exactly the request's: `record.write` in a
/// project takes only an approval raised for that project, and the host's
/// `authorize` op, which names no project, only one raised with none. Any
/// other action names no project in its request, so a decision's `project`
/// is context for the human there, not part of the match.
fn same_project(d: &DecisionFacts<'_>, ask: &Ask<'_>) -> bool {
    !project_bound(ask.action) || d.project == ask.project
}

/// An authorization without a decision: only within-role actions.
pub fn check_without_decision(ask: &Ask<'_>) -> Result<(), Code> {
    match ask.class {
        Class::WithinRole => Ok(()),
        Class::CrossRole | Class::Gated => Err(Code::DecisionRequired),
    }
}

/// An authorization backed by a decision, in this order:
/// 1. the same role instance, action and target, the same project for a
///    [`PROJECT_BOUND`] action, and the recorded class equal to the current
///    policy's (either direction) — else `decision-mismatch`;
/// 2. resolved with the approval choice — else `decision-not-approved`
///    (open, withdrawn, or any other option, even when resolved);
/// 3. not used yet — else `decision-consumed`.
pub fn check_with_decision(d: &DecisionFacts<'_>, ask: &Ask<'_>) -> Result<(), Code> {
    if d.raised_by_role != ask.role
        || d.action != ask.action
        || d.target != ask.target
        || !same_project(d, ask)
        || d.class != ask.class
    {
        return Err(Code::DecisionMismatch);
    }
    if d.withdrawn || d.resolved_choice != Some(d.approval_choice) {
        return Err(Code::DecisionNotApproved);
    }
    if d.consumed {
        return Err(Code::DecisionConsumed);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approved() -> DecisionFacts<'static> {
        DecisionFacts {
            raised_by_role: "dev",
            action: "git.merge.protected",
            target: Some("vikunja:3/41"),
            project: None,
            class: Class::CrossRole,
            approval_choice: "yes",
            resolved_choice: Some("yes"),
            withdrawn: false,
            consumed: false,
        }
    }

    fn ask() -> Ask<'static> {
        Ask {
            role: "dev",
            action: "git.merge.protected",
            target: Some("vikunja:3/41"),
            project: None,
            class: Class::CrossRole,
        }
    }

    #[test]
    fn without_a_decision_only_within_role_passes() {
        let table = [
            (Class::WithinRole, Ok(())),
            (Class::CrossRole, Err(Code::DecisionRequired)),
            (Class::Gated, Err(Code::DecisionRequired)),
        ];
        for (class, want) in table {
            let a = Ask { class, ..ask() };
            assert_eq!(check_without_decision(&a), want, "{class:?}");
        }
    }

    #[test]
    fn a_decision_authorizes_only_its_own_resolved_unused_approval() {
        type Case = (
            &'static str,
            DecisionFacts<'static>,
            Ask<'static>,
            Result<(), Code>,
        );
        let table: Vec<Case> = vec![
            ("the approval", approved(), ask(), Ok(())),
            (
                "another role instance",
                approved(),
                Ask {
                    role: "cto",
                    ..ask()
                },
                Err(Code::DecisionMismatch),
            ),
            (
                "another action",
                approved(),
                Ask {
                    action: "prd.approve",
                    ..ask()
                },
                Err(Code::DecisionMismatch),
            ),
            (
                "another target",
                approved(),
                Ask {
                    target: Some("vikunja:3/42"),
                    ..ask()
                },
                Err(Code::DecisionMismatch),
            ),
            (
                "no target for a targeted decision",
                approved(),
                Ask {
                    target: None,
                    ..ask()
                },
                Err(Code::DecisionMismatch),
            ),
            (
                "policy now within-role",
                approved(),
                Ask {
                    class: Class::WithinRole,
                    ..ask()
                },
                Err(Code::DecisionMismatch),
            ),
            (
                "policy now gated",
                approved(),
                Ask {
                    class: Class::Gated,
                    ..ask()
                },
                Err(Code::DecisionMismatch),
            ),
            (
                "recorded gated, policy now cross-role",
                DecisionFacts {
                    class: Class::Gated,
                    ..approved()
                },
                ask(),
                Err(Code::DecisionMismatch),
            ),
            (
                "still open",
                DecisionFacts {
                    resolved_choice: None,
                    ..approved()
                },
                ask(),
                Err(Code::DecisionNotApproved),
            ),
            (
                "withdrawn",
                DecisionFacts {
                    resolved_choice: None,
                    withdrawn: true,
                    ..approved()
                },
                ask(),
                Err(Code::DecisionNotApproved),
            ),
            (
                "resolved with another option",
                DecisionFacts {
                    resolved_choice: Some("no"),
                    ..approved()
                },
                ask(),
                Err(Code::DecisionNotApproved),
            ),
            (
                "approval choice other than yes",
                DecisionFacts {
                    approval_choice: "ship",
                    resolved_choice: Some("ship"),
                    ..approved()
                },
                ask(),
                Ok(()),
            ),
            (
                "resolved yes but approval is ship",
                DecisionFacts {
                    approval_choice: "ship",
                    ..approved()
                },
                ask(),
                Err(Code::DecisionNotApproved),
            ),
            (
                "already used",
                DecisionFacts {
                    consumed: true,
                    ..approved()
                },
                ask(),
                Err(Code::DecisionConsumed),
            ),
            (
                "mismatch wins over used",
                DecisionFacts {
                    consumed: true,
                    ..approved()
                },
                Ask {
                    role: "pm",
                    ..ask()
                },
                Err(Code::DecisionMismatch),
            ),
        ];
        for (name, d, a, want) in table {
            assert_eq!(check_with_decision(&d, &a), want, "{name}");
        }
    }

    /// An approval for `record.write` is for one path in one project
    /// (issue 29): another project, a decision raised with no project for
    /// a write in one, or a project-bound decision asked without its
    /// project, is `decision-mismatch`; a decision's project is only
    /// context for an action that names none.
    #[test]
    fn a_record_write_approval_is_bound_to_its_project() {
        let d = DecisionFacts {
            action: "record.write",
            target: Some("docs/x.md"),
            project: Some("site"),
            ..approved()
        };
        let a = Ask {
            action: "record.write",
            target: Some("docs/x.md"),
            project: Some("site"),
            ..ask()
        };
        let table: Vec<(&str, DecisionFacts<'_>, Ask<'_>, Result<(), Code>)> = vec![
            ("its project", d.clone(), a, Ok(())),
            (
                "another project",
                d.clone(),
                Ask {
                    project: Some("app"),
                    ..a
                },
                Err(Code::DecisionMismatch),
            ),
            (
                "raised for no project",
                DecisionFacts {
                    project: None,
                    ..d.clone()
                },
                a,
                Err(Code::DecisionMismatch),
            ),
            (
                "asked in no project",
                d.clone(),
                Ask { project: None, ..a },
                Err(Code::DecisionMismatch),
            ),
            (
                "neither names a project (the host's authorize)",
                DecisionFacts {
                    project: None,
                    ..d.clone()
                },
                Ask { project: None, ..a },
                Ok(()),
            ),
            (
                "mismatch wins over used",
                DecisionFacts {
                    consumed: true,
                    ..d.clone()
                },
                Ask {
                    project: Some("app"),
                    ..a
                },
                Err(Code::DecisionMismatch),
            ),
            (
                "a project on a decision for an action that names none",
                DecisionFacts {
                    project: Some("site"),
                    ..approved()
                },
                ask(),
                Ok(()),
            ),
        ];
        for (name, d, a, want) in table {
            assert_eq!(check_with_decision(&d, &a), want, "{name}");
        }
    }
}
