//! The normalized business: what the business loader hands the broker.

use super::{abs_path, is_id};
use crate::error::Code;
use crate::policy::actions;
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
    within_role: Vec<String>,
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

impl Business {
    /// Validates one business; `key` is its key in the `businesses` map.
    pub fn from_json(key: &str, v: serde_json::Value) -> Result<Business, Code> {
        let raw: RawBusiness = serde_json::from_value(v).map_err(bad)?;
        if raw.id != key || !is_id(&raw.id) || raw.human.trim().is_empty() {
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
                Some(m) => (Some(m.send_to), Some(m.receive_from)),
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
        for arb in [&raw.arbiters.technical, &raw.arbiters.delivery] {
            if !roles.contains_key(arb.as_str()) {
                return Err(Code::InvalidBusiness);
            }
        }
        let launch = match raw.launch {
            Some(l) => {
                if !roles.contains_key(&l.by) || l.instances.iter().any(|i| !roles.contains_key(i))
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
