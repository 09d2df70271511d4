//! The action vocabulary: which actions the broker routes and which always
//! wait for the human.
//!
//! An action is a hard wait unless [`ROUTED`] names it (REQ-WAIT-3). Hard
//! waits always route to the human and can never appear in an authority map;
//! a routed action is within-role or cross-role for a role only when the
//! role's authority map grants it, and gated (to the human) otherwise.

/// Actions that always wait for the human and can never be granted by a map.
pub const HARD_WAITS: &[&str] = &[
    "spend",
    "data.delete",
    "network.expose",
    "account.create",
    "credential.mint",
    "message.external",
    "git.push.protected",
    "deploy",
];

/// Actions an authority map may grant and a decision may route to a role.
/// Taken from the spec's vocabulary: the verbs' actions (`message.send`,
/// `review.request`, `review.verdict`, `role.revoke`, `role.launch`,
/// `role.end`, `record.write`, `instance.name`, `organization.change`), the
/// trusted `authorize` actions (`git.push.working`, `git.merge.protected`,
/// `task.create`, `task.close`), the decisions 1.5 made routable
/// (`policy.change`, `prd.approve`) and `event.emit`'s `routine`.
pub const ROUTED: &[&str] = &[
    "message.send",
    "git.merge.protected",
    "git.push.working",
    "policy.change",
    "prd.approve",
    "role.revoke",
    "role.launch",
    "role.end",
    "review.request",
    "review.verdict",
    "task.create",
    "task.close",
    "record.write",
    "instance.name",
    "organization.change",
    "routine",
];

/// True for an action the broker routes (never a hard wait).
pub fn routed(action: &str) -> bool {
    ROUTED.contains(&action) && !HARD_WAITS.contains(&action)
}

/// True for an action in the vocabulary at all (routed or a hard wait).
pub fn known(action: &str) -> bool {
    ROUTED.contains(&action) || HARD_WAITS.contains(&action)
}

/// True when an authority map may name `action`: only routed actions.
/// Everything else is a hard wait, and a hard wait in a map refuses the boot.
pub fn grantable(action: &str) -> bool {
    routed(action)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabulary() {
        // (action, routed, known, grantable)
        let table: &[(&str, bool, bool, bool)] = &[
            ("message.send", true, true, true),
            ("git.merge.protected", true, true, true),
            ("prd.approve", true, true, true),
            ("role.revoke", true, true, true),
            ("role.launch", true, true, true),
            ("routine", true, true, true),
            ("deploy", false, true, false),
            ("spend", false, true, false),
            ("git.push.protected", false, true, false),
            ("message.external", false, true, false),
            ("made.up", false, false, false),
        ];
        for (a, r, k, g) in table {
            assert_eq!(routed(a), *r, "{a} routed");
            assert_eq!(known(a), *k, "{a} known");
            assert_eq!(grantable(a), *g, "{a} grantable");
        }
        for h in HARD_WAITS {
            assert!(!ROUTED.contains(h), "{h} is both routed and a hard wait");
        }
    }
}
