//! The action vocabulary: which actions an authority map may grant.

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

/// True when an authority map may name `action`.
pub fn grantable(action: &str) -> bool {
    !HARD_WAITS.contains(&action)
}
