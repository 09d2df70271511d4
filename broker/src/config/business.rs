//! The normalized business: what the business loader hands the broker.

use super::actions;
use super::{abs_path, is_id};
use crate::error::Code;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Clone)]
pub struct Business {
    pub id: String,
    pub human: String,
    pub technical_arbiter: String,
    pub delivery_arbiter: String,
    /// Instances in the order the business lists them (BTreeMap: by key).
    pub roles: BTreeMap<String, Role>,
    pub sync: Option<Credential>,
    pub launch: Option<LaunchBlock>,
    pub vars: serde_json::Map<String, serde_json::Value>,
    pub projects: BTreeMap<String, PathBuf>,
}

#[derive(Debug, Clone)]
pub struct Role {
    pub definition: Option<String>,
    pub within_role: Vec<String>,
    pub cross_role: Vec<String>,
    pub gitea: Option<Credential>,
    pub vikunja: Option<Credential>,
    pub send_to: Option<Vec<String>>,
    pub receive_from: Option<Vec<String>>,
    pub tracker_bot: Option<String>,
}

/// A credential reference: never the token itself.
#[derive(Debug, Clone)]
pub struct Credential {
    pub file: Option<PathBuf>,
    pub env: Option<String>,
    pub rotate_by: Option<String>,
    pub expires: Option<String>,
    pub bot: Option<String>,
}

#[derive(Debug, Clone)]
pub struct LaunchBlock {
    pub by: String,
    pub instances: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBusiness {
    id: String,
    human: String,
    arbiters: RawArbiters,
    roles: BTreeMap<String, RawRole>,
    #[serde(default)]
    sync: Option<RawSync>,
    #[serde(default)]
    launch: Option<RawLaunch>,
    #[serde(default)]
    vars: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    projects: Option<BTreeMap<String, RawProject>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArbiters {
    technical: String,
    delivery: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRole {
    #[serde(default)]
    definition: Option<String>,
    authority: Option<RawAuthority>,
    #[serde(default)]
    credentials: Option<RawCredentials>,
    #[serde(default)]
    messaging: Option<RawMessaging>,
    #[serde(default)]
    tracker: Option<RawTracker>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawAuthority {
    // An empty map grants nothing: a list left out is an empty list.
    #[serde(default)]
    within_role: Vec<String>,
    #[serde(default)]
    cross_role: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCredentials {
    #[serde(default)]
    gitea: Option<RawCredential>,
    #[serde(default)]
    vikunja: Option<RawCredential>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawCredential {
    #[serde(default)]
    file: Option<String>,
    #[serde(default)]
    env: Option<String>,
    #[serde(default)]
    rotate_by: Option<String>,
    #[serde(default)]
    expires: Option<String>,
    #[serde(default)]
    bot: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawMessaging {
    send_to: Vec<String>,
    receive_from: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTracker {
    bot: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSync {
    vikunja: RawCredential,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLaunch {
    by: String,
    instances: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProject {
    repo: String,
}

fn bad<T>(_: T) -> Code {
    Code::InvalidBusiness
}

fn action_ok(a: &str) -> bool {
    !a.is_empty()
        && a.len() <= 64
        && a.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'-')
}

fn credential(raw: RawCredential) -> Result<Credential, Code> {
    if raw.file.is_some() == raw.env.is_some() {
        return Err(Code::InvalidBusiness);
    }
    // A relative or malformed file path is the loader's `credential-path`,
    // the documented code for it, not a shape error.
    let file = raw.file.map(PathBuf::from);
    if let Some(env) = &raw.env {
        let ok = !env.is_empty()
            && env
                .bytes()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_');
        if !ok {
            return Err(Code::InvalidBusiness);
        }
    }
    Ok(Credential {
        file,
        env: raw.env,
        rotate_by: raw.rotate_by,
        expires: raw.expires,
        bot: raw.bot,
    })
}

/// True for a `business.human` Git records as given when the bus commits
/// the human's spec save (3i L265: only an author name equal to
/// `business.human` confirms a spec): not blank, no control character, no
/// `<` or `>` (Git drops them from a name), and neither end one of the
/// characters Git trims from a name's ends (white space, `,` `:` `;` `"`
/// `\` `'`). A name Git would change could never confirm a spec.
pub fn git_keeps_name(name: &str) -> bool {
    let trimmed = |c: char| c.is_whitespace() || matches!(c, ',' | ':' | ';' | '"' | '\\' | '\'');
    !name.is_empty()
        && !name.chars().any(|c| c.is_control() || c == '<' || c == '>')
        && !name.starts_with(trimmed)
        && !name.ends_with(trimmed)
}

impl Business {
    /// Validates one business; `key` is its key in the `businesses` map.
    pub fn from_json(key: &str, v: serde_json::Value) -> Result<Business, Code> {
        let raw: RawBusiness = serde_json::from_value(v).map_err(bad)?;
        if raw.id != key || !is_id(&raw.id) || !git_keeps_name(&raw.human) {
            return Err(Code::InvalidBusiness);
        }
        if raw.roles.is_empty() {
            return Err(Code::InvalidBusiness);
        }
        let mut roles = BTreeMap::new();
        for (inst, r) in raw.roles {
            if !is_id(&inst) || inst == "human" || inst == "tester" {
                return Err(Code::InvalidBusiness);
            }
            // A missing authority map refuses; empty lists grant nothing.
            let auth = r.authority.ok_or(Code::InvalidBusiness)?;
            for a in auth.within_role.iter().chain(&auth.cross_role) {
                if !action_ok(a) || !actions::grantable(a) {
                    return Err(Code::InvalidBusiness);
                }
            }
            if let Some(d) = &r.definition {
                if !is_id(d) {
                    return Err(Code::InvalidBusiness);
                }
            }
            let (gitea, vikunja) = match r.credentials {
                Some(c) => (
                    c.gitea.map(credential).transpose()?,
                    c.vikunja.map(credential).transpose()?,
                ),
                None => (None, None),
            };
            let (send_to, receive_from) = match r.messaging {
                Some(m) => {
                    // Entries name role definitions (an instance key stands
                    // for a role without one) or the human.
                    if m.send_to
                        .iter()
                        .chain(&m.receive_from)
                        .any(|n| n != "human" && !is_id(n))
                    {
                        return Err(Code::InvalidBusiness);
                    }
                    (Some(m.send_to), Some(m.receive_from))
                }
                None => (None, None),
            };
            roles.insert(
                inst,
                Role {
                    definition: r.definition,
                    within_role: auth.within_role,
                    cross_role: auth.cross_role,
                    gitea,
                    vikunja,
                    send_to,
                    receive_from,
                    tracker_bot: r.tracker.map(|t| t.bot),
                },
            );
        }
        // An arbiter with messaging lists is accepted: 3i (row 133) has "the
        // business validator" refuse one, but that validator is S1's, and
        // DESIGN.md's own normalized example has one (docs/decisions.md).
        for arb in [&raw.arbiters.technical, &raw.arbiters.delivery] {
            if !roles.contains_key(arb.as_str()) {
                return Err(Code::InvalidBusiness);
            }
        }
        let launch = match raw.launch {
            Some(l) => {
                // 3i (row 152): `instances` can't list `launch.by` itself.
                if !roles.contains_key(&l.by)
                    || l.instances
                        .iter()
                        .any(|i| !roles.contains_key(i) || *i == l.by)
                {
                    return Err(Code::InvalidBusiness);
                }
                Some(LaunchBlock {
                    by: l.by,
                    instances: l.instances,
                })
            }
            None => None,
        };
        let mut projects = BTreeMap::new();
        for (k, p) in raw.projects.unwrap_or_default() {
            if !is_id(&k) {
                return Err(Code::InvalidBusiness);
            }
            projects.insert(k, abs_path(&p.repo).map_err(bad)?);
        }
        Ok(Business {
            id: raw.id,
            human: raw.human,
            technical_arbiter: raw.arbiters.technical,
            delivery_arbiter: raw.arbiters.delivery,
            roles,
            sync: raw.sync.map(|s| credential(s.vikunja)).transpose()?,
            launch,
            vars: raw.vars.unwrap_or_default(),
            projects,
        })
    }

    /// `bus.tester` is exactly `true`.
    pub fn tester_on(&self) -> bool {
        self.vars.get("bus.tester") == Some(&serde_json::Value::Bool(true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// DESIGN.md's example business, with every instance it names defined;
    /// a third instance declares messaging lists.
    fn base() -> Value {
        json!({
            "id": "acme", "human": "Ada",
            "arbiters": {"technical": "cto", "delivery": "pm"},
            "roles": {
                "pm": {
                    "definition": "pm",
                    "authority": {"withinRole": ["message.send"], "crossRole": ["git.merge.protected"]},
                    "credentials": {
                        "gitea": {"file": "/abs/token", "rotateBy": "2027-03-01"},
                        "vikunja": {"env": "ACME_PM_VIKUNJA", "expires": "2027-03-01", "bot": "acme-pm-bot"}
                    },
                    "tracker": {"bot": "acme-pm-bot"}
                },
                "cto": {"definition": "cto", "authority": {"withinRole": [], "crossRole": []}},
                "dev": {"definition": "dev", "authority": {"withinRole": [], "crossRole": []},
                        "messaging": {"sendTo": ["cto", "human"], "receiveFrom": ["pm", "human"]}}
            },
            "sync": {"vikunja": {"file": "/abs/sync-token", "expires": "2027-03-01", "bot": "acme-sync"}},
            "launch": {"by": "pm", "instances": ["cto", "dev"]},
            "vars": {"bus.tester": true},
            "projects": {"site": {"repo": "/abs/records-repo"}}
        })
    }

    fn set(v: &mut Value, path: &str, x: Value) {
        let mut cur = v;
        let keys: Vec<&str> = path.split('/').collect();
        for k in &keys[..keys.len() - 1] {
            cur = &mut cur[*k];
        }
        cur[keys[keys.len() - 1]] = x;
    }

    fn remove(v: &mut Value, path: &str) {
        let (parent, key) = path.rsplit_once('/').unwrap_or(("", path));
        let mut cur = v;
        for k in parent.split('/').filter(|k| !k.is_empty()) {
            cur = &mut cur[k];
        }
        cur.as_object_mut().expect("object").remove(key);
    }

    /// One business per case: (what, edit, accepted).
    #[test]
    fn business_rules_one_case_each() {
        type Edit = fn(&mut Value);
        let cases: &[(&str, Edit, bool)] = &[
            ("the example", |_| {}, true),
            // --- shape and identity
            (
                "unknown top-level key",
                |b| set(b, "extra", json!(1)),
                false,
            ),
            (
                "id differs from its key",
                |b| set(b, "id", json!("other")),
                false,
            ),
            ("human empty", |b| set(b, "human", json!(" ")), false),
            ("human missing", |b| remove(b, "human"), false),
            // A name Git would change as a commit's author.
            ("human padded", |b| set(b, "human", json!(" Ada")), false),
            ("human trailing", |b| set(b, "human", json!("Ada ")), false),
            (
                "human angle",
                |b| set(b, "human", json!("Ada <a@b>")),
                false,
            ),
            ("human quoted", |b| set(b, "human", json!("\"Ada\"")), false),
            ("human newline", |b| set(b, "human", json!("Ada\nB")), false),
            ("human semicolon", |b| set(b, "human", json!("Ada;")), false),
            (
                "human full name",
                |b| set(b, "human", json!("Jason S.")),
                true,
            ),
            (
                "human apostrophe",
                |b| set(b, "human", json!("Dee O'Brien")),
                true,
            ),
            (
                "human accents",
                |b| set(b, "human", json!("Émile Zoë")),
                true,
            ),
            ("roles empty", |b| set(b, "roles", json!({})), false),
            (
                "instance key not an id",
                |b| set(b, "roles/Dev", json!({"authority": {}})),
                false,
            ),
            (
                "instance key human",
                |b| set(b, "roles/human", json!({"authority": {}})),
                false,
            ),
            (
                "instance key tester",
                |b| set(b, "roles/tester", json!({"authority": {}})),
                false,
            ),
            (
                "unknown role key",
                |b| set(b, "roles/dev/surprise", json!(true)),
                false,
            ),
            (
                "definition not an id",
                |b| set(b, "roles/dev/definition", json!("Dev X")),
                false,
            ),
            // --- authority maps
            (
                "authority missing",
                |b| remove(b, "roles/dev/authority"),
                false,
            ),
            (
                "authority null",
                |b| set(b, "roles/dev/authority", Value::Null),
                false,
            ),
            (
                "empty authority map grants nothing",
                |b| set(b, "roles/dev/authority", json!({})),
                true,
            ),
            (
                "one list left out",
                |b| {
                    set(
                        b,
                        "roles/dev/authority",
                        json!({"withinRole": ["record.write"]}),
                    )
                },
                true,
            ),
            (
                "unknown authority key",
                |b| set(b, "roles/dev/authority/gated", json!([])),
                false,
            ),
            (
                "hard wait within-role",
                |b| set(b, "roles/dev/authority/withinRole", json!(["deploy"])),
                false,
            ),
            (
                "hard wait cross-role",
                |b| {
                    set(
                        b,
                        "roles/dev/authority/crossRole",
                        json!(["git.push.protected"]),
                    )
                },
                false,
            ),
            (
                "action outside the vocabulary",
                |b| set(b, "roles/dev/authority/withinRole", json!(["frobnicate"])),
                false,
            ),
            (
                "1.5 routable actions may be granted",
                |b| {
                    set(
                        b,
                        "roles/dev/authority/crossRole",
                        json!([
                            "git.merge.protected",
                            "policy.change",
                            "prd.approve",
                            "role.revoke"
                        ]),
                    )
                },
                true,
            ),
            // --- arbiters
            (
                "technical arbiter not an instance",
                |b| set(b, "arbiters/technical", json!("nobody")),
                false,
            ),
            (
                "delivery arbiter not an instance",
                |b| set(b, "arbiters/delivery", json!("nobody")),
                false,
            ),
            (
                "arbiter human",
                |b| set(b, "arbiters/delivery", json!("human")),
                false,
            ),
            ("arbiters missing", |b| remove(b, "arbiters"), false),
            (
                "unknown arbiter key",
                |b| set(b, "arbiters/legal", json!("pm")),
                false,
            ),
            (
                "arbiter declares messaging lists (accepted: DESIGN.md's example)",
                |b| {
                    set(
                        b,
                        "roles/cto/messaging",
                        json!({"sendTo": ["pm"], "receiveFrom": ["pm"]}),
                    )
                },
                true,
            ),
            (
                "arbiter declares empty messaging lists (accepted)",
                |b| {
                    set(
                        b,
                        "roles/pm/messaging",
                        json!({"sendTo": [], "receiveFrom": []}),
                    )
                },
                true,
            ),
            // --- messaging
            (
                "messaging entry not a name",
                |b| set(b, "roles/dev/messaging/sendTo", json!(["Not A Name"])),
                false,
            ),
            (
                "messaging entry not a string",
                |b| set(b, "roles/dev/messaging/receiveFrom", json!([1])),
                false,
            ),
            (
                "unknown messaging key",
                |b| set(b, "roles/dev/messaging/cc", json!([])),
                false,
            ),
            // --- credentials
            (
                "credential with file and env",
                |b| set(b, "roles/pm/credentials/gitea/env", json!("ACME_PM_GITEA")),
                false,
            ),
            (
                "credential with neither file nor env",
                |b| remove(b, "roles/pm/credentials/gitea/file"),
                false,
            ),
            (
                "env name not upper snake",
                |b| set(b, "roles/pm/credentials/vikunja/env", json!("acme-pm")),
                false,
            ),
            (
                "unknown service",
                |b| set(b, "roles/pm/credentials/github", json!({"env": "X_Y"})),
                false,
            ),
            (
                "unknown credential key",
                |b| set(b, "roles/pm/credentials/gitea/token", json!("x")),
                false,
            ),
            (
                "sync with a gitea credential",
                |b| {
                    set(
                        b,
                        "sync",
                        json!({"gitea": {"file": "/abs/t", "rotateBy": "2027-03-01"}}),
                    )
                },
                false,
            ),
            (
                "tracker without bot",
                |b| set(b, "roles/pm/tracker", json!({})),
                false,
            ),
            // --- launch block
            (
                "launch.by not an instance",
                |b| set(b, "launch/by", json!("chief")),
                false,
            ),
            (
                "launch.instances names no instance",
                |b| set(b, "launch/instances", json!(["cto", "nobody"])),
                false,
            ),
            (
                "launch.instances lists launch.by",
                |b| set(b, "launch/instances", json!(["pm", "cto"])),
                false,
            ),
            (
                "launch without instances",
                |b| remove(b, "launch/instances"),
                false,
            ),
            (
                "unknown launch key",
                |b| set(b, "launch/max", json!(3)),
                false,
            ),
            // --- vars and projects
            (
                "vars not an object",
                |b| set(b, "vars", json!(["bus.tester"])),
                false,
            ),
            (
                "project repo relative",
                |b| set(b, "projects/site/repo", json!("records")),
                false,
            ),
            (
                "project key not an id",
                |b| set(b, "projects/Site", json!({"repo": "/abs/r"})),
                false,
            ),
            (
                "unknown project key",
                |b| set(b, "projects/site/branch", json!("main")),
                false,
            ),
        ];
        let mut wrong = Vec::new();
        for (what, edit, ok) in cases {
            let mut b = base();
            edit(&mut b);
            let got = Business::from_json("acme", b).map(|_| ());
            let want = if *ok {
                Ok(())
            } else {
                Err(Code::InvalidBusiness)
            };
            if got != want {
                wrong.push(format!("{what}: got {got:?}, want {want:?}"));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn bus_tester_is_on_only_when_exactly_true() {
        for (v, on) in [
            (json!(true), true),
            (json!("true"), false),
            (json!(1), false),
        ] {
            let mut b = base();
            set(&mut b, "vars/bus.tester", v);
            assert_eq!(
                Business::from_json("acme", b).expect("valid").tester_on(),
                on
            );
        }
        let mut b = base();
        remove(&mut b, "vars");
        assert!(!Business::from_json("acme", b).expect("valid").tester_on());
    }
}
