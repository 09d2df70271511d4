//! Classification and routing: which class an action has for a role, and
//! where a decision raised for it goes. Routing is fixed at raise.

use super::actions;
use crate::config::Business;

/// The reserved route and sender of the business's human.
pub const HUMAN: &str = "human";

/// The definition of the business's chief of staff.
pub const CHIEF_OF_STAFF: &str = "chief-of-staff";

/// Which definition role instance `role` is: its `definition`, or, for an
/// instance declared without one, the definition its key names (an instance
/// keyed `pm` stands for `pm`). `None` only for a name that is no instance
/// of the business. The one reading of an instance's definition: every rule
/// that asks (the thread instance, END_PROTECTED, the chief of staff, the
/// pm's staff request, the spec notices and BLOCK, the messaging lists,
/// record authors, the organization's definitions) asks here.
pub fn definition_of<'a>(business: &'a Business, role: &str) -> Option<&'a str> {
    business
        .roles
        .get_key_value(role)
        .map(|(key, r)| r.definition.as_deref().unwrap_or(key))
}

/// Definitions whose instances only the chief of staff or a human decision
/// resolved through the CLI may end (3i row 139, Q169).
pub const END_PROTECTED: &[&str] = &["assistant"];

/// True when `target` is an instance of an END_PROTECTED definition (only
/// the chief of staff's reason or the human's CLI resolution ends it).
pub fn end_protected(business: &Business, target: &str) -> bool {
    definition_of(business, target).is_some_and(|d| END_PROTECTED.contains(&d))
}

/// A decision's class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// The role's own authority map grants the action within its role.
    WithinRole,
    /// The map grants it across roles: an arbiter approves.
    CrossRole,
    /// Everything else (unlisted actions and hard waits): the human approves.
    Gated,
}

impl Class {
    pub const fn as_str(self) -> &'static str {
        match self {
            Class::WithinRole => "within-role",
            Class::CrossRole => "cross-role",
            Class::Gated => "gated",
        }
    }

    pub fn parse(s: &str) -> Option<Class> {
        match s {
            "within-role" => Some(Class::WithinRole),
            "cross-role" => Some(Class::CrossRole),
            "gated" => Some(Class::Gated),
            _ => None,
        }
    }
}

/// The arbiter domain of a cross-role decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    Delivery,
    Technical,
}

impl Domain {
    pub fn parse(s: &str) -> Option<Domain> {
        match s {
            "delivery" => Some(Domain::Delivery),
            "technical" => Some(Domain::Technical),
            _ => None,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Domain::Delivery => "delivery",
            Domain::Technical => "technical",
        }
    }
}

/// The class of `action` for role instance `role` under the business's policy.
///
/// A hard wait (any action [`actions::ROUTED`] does not name) is gated.
/// `role.launch` is within-role exactly when the launch block's `by` names
/// the role and gated otherwise, whatever the maps say. Other routed actions
/// are within-role or cross-role as the role's map lists them, else gated.
pub fn classify(business: &Business, role: &str, action: &str) -> Class {
    if !actions::routed(action) {
        return Class::Gated;
    }
    if action == "role.launch" {
        return match &business.launch {
            Some(l) if l.by == role => Class::WithinRole,
            _ => Class::Gated,
        };
    }
    let Some(r) = business.roles.get(role) else {
        return Class::Gated;
    };
    if r.within_role.iter().any(|a| a == action) {
        Class::WithinRole
    } else if r.cross_role.iter().any(|a| a == action) {
        Class::CrossRole
    } else {
        Class::Gated
    }
}

/// [`classify`] for an action on `target`: a `role.revoke` of an
/// instance whose definition is END_PROTECTED (the assistant) is gated at
/// every class, so it routes to the human (3i row 139, Q169).
pub fn classify_for(business: &Business, role: &str, action: &str, target: Option<&str>) -> Class {
    match target {
        Some(t) if action == "role.revoke" && end_protected(business, t) => Class::Gated,
        _ => classify(business, role, action),
    }
}

/// Where a decision of `class` raised by `raiser` goes (`decisions.routed_to`).
///
/// Within-role: the raiser itself (it closes at raise with its `choice`).
/// Cross-role: the delivery arbiter, or the technical one for
/// `domain:'technical'`; when that arbiter is the raiser, the human (the
/// class stays cross-role). Gated: the human.
pub fn route(business: &Business, raiser: &str, class: Class, domain: Option<Domain>) -> String {
    match class {
        Class::WithinRole => raiser.to_string(),
        Class::CrossRole => {
            let arbiter = match domain {
                Some(Domain::Technical) => &business.technical_arbiter,
                _ => &business.delivery_arbiter,
            };
            if arbiter == raiser {
                HUMAN.to_string()
            } else {
                arbiter.clone()
            }
        }
        Class::Gated => HUMAN.to_string(),
    }
}

/// Where a raise goes (`decisions.routed_to`), given whether it cites the
/// project's current, confirmed spec (`cited`; the Git side checked that).
///
/// REQ-DEC-2 (3i row 139): a cited gated raise whose action is not a hard
/// wait routes as a cross-role one does, to the arbiter of its domain (the
/// human when that arbiter is the raiser) while its class stays gated. A
/// hard wait routes to the human cited or not, and so does a `role.revoke`
/// of an END_PROTECTED instance (Q169): no arbiter resolves either. Every
/// other raise routes as [`route`] says.
pub fn route_raise(
    business: &Business,
    raiser: &str,
    action: &str,
    target: Option<&str>,
    class: Class,
    domain: Option<Domain>,
    cited: bool,
) -> String {
    let protected_revoke =
        action == "role.revoke" && target.is_some_and(|t| end_protected(business, t));
    if cited && class == Class::Gated && actions::routed(action) && !protected_revoke {
        return route(business, raiser, Class::CrossRole, domain);
    }
    route(business, raiser, class, domain)
}

/// The name an address goes by in the messaging lists: `human` for the
/// human, a role instance's definition (its instance key when it has none).
/// `None` for an address that is neither.
fn messaging_name<'a>(business: &'a Business, address: &'a str) -> Option<&'a str> {
    if address == HUMAN {
        return Some(HUMAN);
    }
    definition_of(business, address)
}

/// True when the role definitions' messaging lists let `from` message `to`
/// (each the human or a role instance): a sender that declares lists must
/// name the recipient in `sendTo`, and a recipient that declares lists must
/// name the sender in `receiveFrom`, by definition (instance key without
/// one) or `human`. A role without messaging lists sends to and receives
/// from anyone; the human declares none.
pub fn messaging_allowed(business: &Business, from: &str, to: &str) -> bool {
    let (Some(from_name), Some(to_name)) =
        (messaging_name(business, from), messaging_name(business, to))
    else {
        return false;
    };
    let sends = match business.roles.get(from).and_then(|r| r.send_to.as_ref()) {
        Some(list) => list.iter().any(|x| x == to_name),
        None => true,
    };
    let receives = match business.roles.get(to).and_then(|r| r.receive_from.as_ref()) {
        Some(list) => list.iter().any(|x| x == from_name),
        None => true,
    };
    sends && receives
}

/// True when the raiser may hear from whoever closes a decision routed to
/// `routed_to` (row 133): with declared messaging lists, the raiser's
/// `receiveFrom` must list the resolver's definition (its instance key when
/// it has none), or `human` for a human route. A role without messaging
/// lists receives from anyone. Within-role raises are exempt (the caller
/// does not ask for them).
pub fn close_route_allowed(business: &Business, raiser: &str, routed_to: &str) -> bool {
    let Some(r) = business.roles.get(raiser) else {
        return false;
    };
    let Some(list) = &r.receive_from else {
        return true;
    };
    match messaging_name(business, routed_to) {
        Some(sender) => list.iter().any(|x| x == sender),
        None => false,
    }
}

/// The launch state from the kind of the business's latest
/// `launch.revoked`/`launch.restored` event (none: allowed).
pub fn launch_allowed(latest: Option<&str>) -> bool {
    latest != Some("launch.revoked")
}

/// The sender and run of the bus's own messages (launch notices).
pub const BUS_SENDER: &str = "_bus";
pub const BUS_RUN: &str = "bus";

/// What a `message.send` to a role no run holds says about it (3i, rows 146
/// and 152): the `waiting` field of the send's result, and the notice to the
/// business's launcher when one goes out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// `launch.by`, or `None` without a launch block.
    pub launcher: Option<String>,
    /// Whether a notice goes to the launcher.
    pub told: bool,
    /// Whether a run holds `launch.by` (`None` without a launch block).
    pub launcher_running: Option<bool>,
    /// Whether the target is one of `launch.instances` (`None` without a
    /// launch block; false for `launch.by` itself).
    pub launchable: Option<bool>,
}

/// Decides the `waiting` of a send to `to`, which no run holds. `sender` is
/// the sending role instance or `human`; `None` for the tester, whose
/// messages authorize nothing and so tell nobody.
pub fn waiting(
    business: &Business,
    to: &str,
    sender: Option<&str>,
    launcher_running: bool,
) -> Waiting {
    match &business.launch {
        None => Waiting {
            launcher: None,
            told: false,
            launcher_running: None,
            launchable: None,
        },
        Some(l) => Waiting {
            launcher: Some(l.by.clone()),
            // Not the launcher about itself, not the launcher about its own
            // message (the result tells it), not a tester's message.
            told: to != l.by && sender.is_some_and(|s| s != l.by),
            launcher_running: Some(launcher_running),
            launchable: Some(to != l.by && l.instances.iter().any(|i| i == to)),
        },
    }
}

/// The launcher's notice about message `id` from `sender` to `to`.
pub fn launch_notice_body(id: &str, sender: &str, to: &str, launchable: bool) -> String {
    if launchable {
        format!(
            "Message {id} from {sender} to {to} waits: {to} has no running session. \
             Launch {to} within the launch block's limits, or tell {sender} why not \
             with message.send in_reply_to {id}."
        )
    } else {
        format!(
            "Message {id} from {sender} to {to} waits: {to} has no running session \
             and isn't in the launch block's instances, so a launch of {to} is refused. \
             Tell {sender} why not with message.send in_reply_to {id}."
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn business() -> Business {
        Business::from_json(
            "acme",
            json!({
                "id": "acme", "human": "Ada",
                "arbiters": {"technical": "cto", "delivery": "pm"},
                "roles": {
                    "pm": {"authority": {"withinRole": ["message.send"],
                                         "crossRole": ["git.merge.protected", "role.launch"]}},
                    "cto": {"authority": {"withinRole": ["review.verdict"],
                                          "crossRole": ["git.merge.protected"]}},
                    "dev": {"authority": {"withinRole": ["record.write"],
                                          "crossRole": ["git.merge.protected", "role.revoke"]}}
                },
                "launch": {"by": "cto", "instances": ["dev"]}
            }),
        )
        .expect("test business")
    }

    #[test]
    fn classification_follows_the_maps_the_vocabulary_and_the_launch_block() {
        let b = business();
        // (role, action, class): the spec's rules, one row each.
        let table = [
            // within-role: the role's withinRole lists it
            ("pm", "message.send", Class::WithinRole),
            ("dev", "record.write", Class::WithinRole),
            // cross-role: the role's crossRole lists it
            ("dev", "git.merge.protected", Class::CrossRole),
            ("dev", "role.revoke", Class::CrossRole),
            // unlisted routed actions are gated
            ("dev", "prd.approve", Class::Gated),
            ("cto", "message.send", Class::Gated),
            // hard waits are gated for everyone
            ("pm", "deploy", Class::Gated),
            ("dev", "spend", Class::Gated),
            // an unknown role is gated
            ("nobody", "message.send", Class::Gated),
            // role.launch: within-role only for launch.by, gated otherwise,
            // even when a map lists it
            ("cto", "role.launch", Class::WithinRole),
            ("pm", "role.launch", Class::Gated),
            ("dev", "role.launch", Class::Gated),
        ];
        for (role, action, class) in table {
            assert_eq!(classify(&b, role, action), class, "{role} {action}");
        }
    }

    #[test]
    fn routing_is_fixed_by_class_domain_and_raiser() {
        let b = business();
        // (raiser, class, domain, routed_to)
        let table = [
            ("dev", Class::WithinRole, None, "dev"),
            ("dev", Class::CrossRole, None, "pm"),
            ("dev", Class::CrossRole, Some(Domain::Delivery), "pm"),
            ("dev", Class::CrossRole, Some(Domain::Technical), "cto"),
            // the arbiter raised it: the human resolves, the class stays cross-role
            ("pm", Class::CrossRole, None, HUMAN),
            ("cto", Class::CrossRole, Some(Domain::Technical), HUMAN),
            ("pm", Class::CrossRole, Some(Domain::Technical), "cto"),
            ("dev", Class::Gated, None, HUMAN),
            ("dev", Class::Gated, Some(Domain::Technical), HUMAN),
        ];
        for (raiser, class, domain, to) in table {
            assert_eq!(
                route(&b, raiser, class, domain),
                to,
                "{raiser} {class:?} {domain:?}"
            );
        }
    }

    #[test]
    fn a_cited_gated_raise_routes_to_its_domains_arbiter_unless_a_hard_wait() {
        let mut b = business();
        b.roles.insert(
            "aide".into(),
            crate::config::Role {
                definition: Some("assistant".into()),
                ..b.roles["dev"].clone()
            },
        );
        // (raiser, action, target, domain, cited, routed_to)
        let d = Some(Domain::Technical);
        type Case<'a> = (
            &'a str,
            &'a str,
            Option<&'a str>,
            Option<Domain>,
            bool,
            &'a str,
        );
        let table: &[Case] = &[
            // uncited gated: the human
            ("dev", "prd.approve", None, None, false, HUMAN),
            // cited gated, routed: the delivery arbiter, or the technical one
            ("dev", "prd.approve", None, None, true, "pm"),
            ("dev", "prd.approve", None, d, true, "cto"),
            ("dev", "policy.change", None, None, true, "pm"),
            ("cto", "role.revoke", Some("dev"), None, true, "pm"),
            ("cto", "role.revoke", Some("dev"), None, false, HUMAN),
            // the arbiter raised it: the human
            ("pm", "prd.approve", None, None, true, HUMAN),
            ("cto", "prd.approve", None, d, true, HUMAN),
            // hard waits: the human, cited or not
            ("dev", "deploy", None, None, true, HUMAN),
            ("dev", "spend", None, d, true, HUMAN),
            // a revoke of the END_PROTECTED assistant: the human, cited or not
            ("cto", "role.revoke", Some("aide"), None, true, HUMAN),
            // within-role and cross-role raises route as ever, cited or not
            ("dev", "record.write", None, None, true, "dev"),
            ("dev", "git.merge.protected", None, d, true, "cto"),
        ];
        for &(raiser, action, target, domain, cited, to) in table {
            let class = classify_for(&b, raiser, action, target);
            assert_eq!(
                route_raise(&b, raiser, action, target, class, domain, cited),
                to,
                "{raiser} {action} {target:?} {domain:?} cited={cited}"
            );
        }
        // The gated class is kept: only the route changes.
        assert_eq!(classify_for(&b, "dev", "prd.approve", None), Class::Gated);
    }

    #[test]
    fn a_close_must_be_able_to_reach_the_raiser() {
        let b = Business::from_json(
            "acme",
            json!({
                "id": "acme", "human": "Ada",
                "arbiters": {"technical": "cto", "delivery": "pm"},
                "roles": {
                    "pm": {"definition": "product", "authority": {"withinRole": [], "crossRole": []}},
                    "cto": {"authority": {"withinRole": [], "crossRole": []}},
                    "dev": {"authority": {"withinRole": [], "crossRole": []},
                            "messaging": {"sendTo": [], "receiveFrom": ["product", "human"]}},
                    "qa": {"authority": {"withinRole": [], "crossRole": []},
                           "messaging": {"sendTo": [], "receiveFrom": ["cto"]}}
                }
            }),
        )
        .expect("test business");
        // (raiser, routed_to, allowed)
        let table = [
            ("dev", "pm", true),    // pm's definition is listed
            ("dev", "human", true), // human is listed
            ("dev", "cto", false),  // cto is not
            ("qa", "cto", true),    // no definition: the instance key
            ("qa", "human", false), // a gated raise needs `human`
            ("cto", "pm", true),    // no messaging lists: anyone
            ("cto", "human", true),
            ("nobody", "human", false),
        ];
        for (raiser, to, ok) in table {
            assert_eq!(close_route_allowed(&b, raiser, to), ok, "{raiser} <- {to}");
        }
    }

    #[test]
    fn messaging_lists_bind_sender_and_recipient_when_declared() {
        // cto arbitrates both domains: an arbiter may not declare lists.
        let b = Business::from_json(
            "acme",
            json!({
                "id": "acme", "human": "Ada",
                "arbiters": {"technical": "cto", "delivery": "cto"},
                "roles": {
                    "pm": {"definition": "product", "authority": {"withinRole": [], "crossRole": []},
                           "messaging": {"sendTo": ["cto", "human"], "receiveFrom": ["cto", "human"]}},
                    "cto": {"authority": {"withinRole": [], "crossRole": []}},
                    "dev": {"authority": {"withinRole": [], "crossRole": []},
                            "messaging": {"sendTo": ["product"], "receiveFrom": ["product"]}},
                    "qa": {"authority": {"withinRole": [], "crossRole": []},
                           "messaging": {"sendTo": [], "receiveFrom": []}}
                }
            }),
        )
        .expect("test business");
        // (from, to, allowed)
        let table = [
            ("pm", "cto", true),     // listed both ways (cto declares none)
            ("pm", "human", true),   // `human` in pm's sendTo
            ("human", "pm", true),   // `human` in pm's receiveFrom
            ("pm", "dev", false),    // dev isn't in pm's sendTo
            ("dev", "pm", false),    // dev's definition-less key isn't in pm's receiveFrom
            ("cto", "pm", true),     // cto declares none; pm receives from cto
            ("cto", "dev", false),   // dev receives from `product` only
            ("human", "dev", false), // nor from the human
            ("dev", "human", false), // and sends to `product` only
            ("cto", "human", true),  // no lists: anyone
            ("human", "cto", true),
            ("qa", "cto", false), // empty lists: no one
            ("cto", "qa", false),
            ("pm", "nobody", false),
            ("nobody", "cto", false),
        ];
        for (from, to, ok) in table {
            assert_eq!(messaging_allowed(&b, from, to), ok, "{from} -> {to}");
        }
    }

    #[test]
    fn launch_state_is_the_latest_toggle() {
        assert!(launch_allowed(None));
        assert!(launch_allowed(Some("launch.restored")));
        assert!(!launch_allowed(Some("launch.revoked")));
    }

    #[test]
    fn class_and_domain_strings_round_trip() {
        for c in [Class::WithinRole, Class::CrossRole, Class::Gated] {
            assert_eq!(Class::parse(c.as_str()), Some(c));
        }
        for d in [Domain::Delivery, Domain::Technical] {
            assert_eq!(Domain::parse(d.as_str()), Some(d));
        }
        assert_eq!(Class::parse("other"), None);
        assert_eq!(Domain::parse("legal"), None);
    }

    /// `classify_for` gates a `role.revoke` of an END_PROTECTED instance
    /// whatever the maps say, and nothing else: a revoke of another
    /// instance, or another action on the protected one, classifies as
    /// `classify` does. (`cargo mutants`: docs/testing.md.)
    #[test]
    fn only_a_revoke_of_the_protected_instance_is_gated_by_its_target() {
        let mut b = business();
        b.roles.insert(
            "aide".into(),
            crate::config::Role {
                definition: Some("assistant".into()),
                ..b.roles["dev"].clone()
            },
        );
        let table = [
            ("role.revoke", Some("aide"), Class::Gated),
            ("role.revoke", Some("pm"), Class::CrossRole),
            ("role.revoke", None, Class::CrossRole),
            ("git.merge.protected", Some("aide"), Class::CrossRole),
        ];
        for (action, target, class) in table {
            assert_eq!(
                classify_for(&b, "dev", action, target),
                class,
                "{action} {target:?}"
            );
        }
    }

    /// A send nobody holds: the launcher is told unless the send is to the
    /// launcher, from it, or a tester's; the target is launchable when it is
    /// one of the launch block's instances (never the launcher); without a
    /// launch block nothing is said. The notice names the message, both
    /// roles, and whether a launch can follow. (`cargo mutants`:
    /// docs/testing.md.)
    #[test]
    fn waiting_tells_the_launcher_about_others_sends_and_says_what_it_may_launch() {
        let b = business();
        let w = |to: &str, sender: Option<&str>| {
            let w = waiting(&b, to, sender, true);
            assert_eq!(
                (w.launcher.as_deref(), w.launcher_running),
                (Some("cto"), Some(true))
            );
            (w.told, w.launchable)
        };
        assert_eq!(w("dev", Some("pm")), (true, Some(true)));
        assert_eq!(w("pm", Some("dev")), (true, Some(false)));
        assert_eq!(w("cto", Some("pm")), (false, Some(false)));
        assert_eq!(w("dev", Some("cto")), (false, Some(true)));
        assert_eq!(w("dev", None), (false, Some(true)));
        let mut none = business();
        none.launch = None;
        assert_eq!(
            waiting(&none, "dev", Some("pm"), true),
            Waiting {
                launcher: None,
                told: false,
                launcher_running: None,
                launchable: None
            }
        );
        assert_eq!(
            launch_notice_body("m1", "pm", "dev", true),
            "Message m1 from pm to dev waits: dev has no running session. \
             Launch dev within the launch block's limits, or tell pm why not \
             with message.send in_reply_to m1."
        );
        assert_eq!(
            launch_notice_body("m1", "pm", "qa", false),
            "Message m1 from pm to qa waits: qa has no running session \
             and isn't in the launch block's instances, so a launch of qa is refused. \
             Tell pm why not with message.send in_reply_to m1."
        );
    }
}
