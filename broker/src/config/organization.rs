//! The organization file's shape and its checks (DESIGN.md "Schema 3i",
//! Organization): `{revision, limits, models, instances, assistants,
//! routes, plugins}`, every level strict (an unknown key refuses).
//!
//! The shapes the spec leaves open are chosen in docs/decisions.md
//! ("The organization file"). This module only parses, checks and prints;
//! reading and replacing the file is `crate::organization`.

use super::is_id;
use crate::error::Code;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The largest `revision`: a JSON safe integer.
pub const MAX_REVISION: u64 = (1 << 53) - 1;

/// The parsed file. Maps are ordered, so a write prints the same bytes for
/// the same content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Organization {
    pub revision: u64,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub models: BTreeMap<String, Model>,
    /// Business id, then instance key.
    #[serde(default)]
    pub instances: BTreeMap<String, BTreeMap<String, Instance>>,
    /// Business id, then assistant instance key.
    #[serde(default)]
    pub assistants: BTreeMap<String, BTreeMap<String, Assistant>>,
    /// A definition id, or `default`, to its route.
    #[serde(default)]
    pub routes: BTreeMap<String, Route>,
    #[serde(default)]
    pub plugins: Plugins,
}

/// What the chief of staff launches within.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Limits {
    /// Runs at once across the business (0 to 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<u64>,
    /// Instances of one definition at once (each 0 to 20).
    #[serde(default)]
    pub per_definition: BTreeMap<String, u64>,
}

/// A model a route may name, and the harness that runs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    pub harness: String,
}

/// One instance the next start loads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Instance {
    pub definition: String,
    #[serde(default)]
    pub vars: Vars,
    /// Whether the launch block's `instances` lists it.
    #[serde(default)]
    pub launch: bool,
}

/// An assistant's settings: its whole vars (`model`, `thinking` run the
/// route checks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assistant {
    #[serde(default)]
    pub vars: Vars,
}

/// A route: the model a definition's runs use and, optionally, its thinking level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
}

/// `plugins`: only `harness` for now.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plugins {
    #[serde(default)]
    pub harness: BTreeMap<String, Harness>,
}

/// One harness switch: on or off, and the thinking levels it offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Harness {
    pub on: bool,
    pub levels: Vec<String>,
}

/// Instance vars: short keys to strings, booleans or safe integers.
pub type Vars = BTreeMap<String, serde_json::Value>;

/// The levels each harness offers, read once at start from the file that
/// was loaded then, switched on or not (the spec's `harnessLevels`).
pub type HarnessLevels = BTreeMap<String, Vec<String>>;

/// A model name: 1 to 64 of `[a-z0-9._-]`, starting with a letter or digit.
fn is_model(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter().all(|&c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-')
        })
}

/// A thinking level or a var key: the model pattern.
fn is_word(s: &str) -> bool {
    is_model(s)
}

fn check_vars(vars: &Vars) -> Result<(), Code> {
    if vars.len() > 64 {
        return Err(Code::OrganizationInvalid);
    }
    for (k, v) in vars {
        let ok = is_word(k)
            && match v {
                serde_json::Value::String(s) => s.len() <= 1024 && !s.contains('\0'),
                serde_json::Value::Bool(_) => true,
                serde_json::Value::Number(n) => {
                    n.as_u64().is_some_and(|n| n <= MAX_REVISION)
                        || n.as_i64().is_some_and(|n| n.unsigned_abs() <= MAX_REVISION)
                }
                _ => false,
            };
        if !ok {
            return Err(Code::OrganizationInvalid);
        }
    }
    Ok(())
}

impl Organization {
    /// Parses and checks a whole file's JSON. Shapes and values only: the
    /// harness checks need the start's levels ([`Organization::check_routes`]).
    pub fn from_json(v: serde_json::Value) -> Result<Organization, Code> {
        let org: Organization = serde_json::from_value(v).map_err(|_| Code::OrganizationInvalid)?;
        org.check_shape()?;
        Ok(org)
    }

    /// The value checks every write and every read of the file runs.
    pub fn check_shape(&self) -> Result<(), Code> {
        let bad = Err(Code::OrganizationInvalid);
        if self.revision > MAX_REVISION {
            return bad;
        }
        self.limits.check()?;
        for (name, m) in &self.models {
            if !is_model(name) || !super::launch::is_harness(&m.harness) {
                return bad;
            }
        }
        for (business, instances) in &self.instances {
            if !is_id(business) || instances.len() > 256 {
                return bad;
            }
            for (key, i) in instances {
                if !is_id(key) || !is_id(&i.definition) {
                    return bad;
                }
                check_vars(&i.vars)?;
            }
        }
        for (business, assistants) in &self.assistants {
            if !is_id(business) {
                return bad;
            }
            for (key, a) in assistants {
                if !is_id(key) {
                    return bad;
                }
                check_vars(&a.vars)?;
                let model = a.vars.get("model");
                let thinking = a.vars.get("thinking");
                if model.is_some_and(|m| !m.as_str().is_some_and(is_model))
                    || thinking.is_some_and(|t| !t.as_str().is_some_and(is_word))
                    || (thinking.is_some() && model.is_none())
                {
                    return bad;
                }
            }
        }
        for (key, r) in &self.routes {
            if !is_id(key)
                || !is_model(&r.model)
                || r.thinking.as_deref().is_some_and(|t| !is_word(t))
            {
                return bad;
            }
            if !self.models.contains_key(&r.model) {
                return bad;
            }
        }
        for (name, h) in &self.plugins.harness {
            let mut seen = std::collections::BTreeSet::new();
            if !super::launch::is_harness(name)
                || h.levels.len() > 32
                || !h.levels.iter().all(|l| is_word(l) && seen.insert(l))
            {
                return bad;
            }
        }
        Ok(())
    }

    /// Whether the file switches harness `name` on now (the spec's
    /// `harnessOn`): a harness it does not list is off.
    pub fn harness_on(&self, name: &str) -> bool {
        self.plugins.harness.get(name).is_some_and(|h| h.on)
    }

    /// The route checks every organization write runs, against the levels
    /// read at start: a model's harness the start did not load refuses
    /// `harness-refused`, one switched off `harness-off`, a thinking level
    /// the harness does not offer `thinking-unsupported`, a model no entry
    /// of `models` names `organization-invalid`.
    pub fn check_routes(&self, levels: &HarnessLevels) -> Result<(), Code> {
        for m in self.models.values() {
            if !levels.contains_key(&m.harness) {
                return Err(Code::HarnessRefused);
            }
        }
        let mut all: Vec<(&str, Option<&str>)> = self
            .routes
            .values()
            .map(|r| (r.model.as_str(), r.thinking.as_deref()))
            .collect();
        // An assistant's vars and an instance's vars carry its route in
        // `model` and `thinking` (L216: the harness codes come from
        // instances.set and organization.set alike).
        let vars = self
            .assistants
            .values()
            .flat_map(|a| a.values().map(|a| &a.vars))
            .chain(
                self.instances
                    .values()
                    .flat_map(|i| i.values().map(|i| &i.vars)),
            );
        for v in vars {
            if let Some(route) = vars_route(v)? {
                all.push(route);
            }
        }
        for (model, thinking) in all {
            let m = self.models.get(model).ok_or(Code::OrganizationInvalid)?;
            let offered = levels.get(&m.harness).ok_or(Code::HarnessRefused)?;
            if !self.harness_on(&m.harness) {
                return Err(Code::HarnessOff);
            }
            if thinking.is_some_and(|t| !offered.iter().any(|l| l == t)) {
                return Err(Code::ThinkingUnsupported);
            }
        }
        Ok(())
    }

    /// The harness levels this file offers, for the start.
    pub fn levels(&self) -> HarnessLevels {
        self.plugins
            .harness
            .iter()
            .map(|(k, h)| (k.clone(), h.levels.clone()))
            .collect()
    }

    /// The JSON the writer prints.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// The route a vars map names: its `model`, with its `thinking` when
/// given; none without a `model`. Either one present but not a string is
/// `organization-invalid`.
fn vars_route(vars: &Vars) -> Result<Option<(&str, Option<&str>)>, Code> {
    let text = |k: &str| match vars.get(k) {
        None => Ok(None),
        Some(v) => v.as_str().map(Some).ok_or(Code::OrganizationInvalid),
    };
    let model = text("model")?;
    let thinking = text("thinking")?;
    Ok(model.map(|m| (m, thinking)))
}

impl Limits {
    fn check(&self) -> Result<(), Code> {
        let ok = self.runs.is_none_or(|r| r <= 1000)
            && self.per_definition.len() <= 256
            && self
                .per_definition
                .iter()
                .all(|(d, n)| is_id(d) && *n <= 20);
        if ok {
            Ok(())
        } else {
            Err(Code::OrganizationInvalid)
        }
    }

    /// Parses a `limits` value from a request.
    pub fn from_json(v: serde_json::Value) -> Result<Limits, Code> {
        let l: Limits = serde_json::from_value(v).map_err(|_| Code::OrganizationInvalid)?;
        l.check()?;
        Ok(l)
    }
}

/// Parses one piece of the file from a request value: `organization-invalid`
/// when it does not fit.
pub fn piece<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<T, Code> {
    serde_json::from_value(v).map_err(|_| Code::OrganizationInvalid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn good() -> serde_json::Value {
        json!({
            "revision": 3,
            "limits": {"runs": 10, "perDefinition": {"dev": 4}},
            "models": {"sonnet-4.5": {"harness": "claude-code"}, "local": {"harness": "pi"}},
            "instances": {"acme": {"pm": {"definition": "pm", "vars": {"tone": "plain"}, "launch": true}}},
            "assistants": {"acme": {"helper": {"vars": {"model": "local", "thinking": "low"}}}},
            "routes": {"default": {"model": "sonnet-4.5", "thinking": "high"}},
            "plugins": {"harness": {"claude-code": {"on": true, "levels": ["low", "high"]},
                                    "pi": {"on": true, "levels": ["low"]}}}
        })
    }

    #[test]
    fn file_rules_one_case_each() {
        type Edit = fn(&mut serde_json::Value);
        let cases: &[(&str, Edit, Option<Code>)] = &[
            ("good", |_| {}, None),
            ("only the revision", |v| *v = json!({"revision": 0}), None),
            (
                "unknown top key",
                |v| v["x"] = json!(1),
                Some(Code::OrganizationInvalid),
            ),
            (
                "revision negative",
                |v| v["revision"] = json!(-1),
                Some(Code::OrganizationInvalid),
            ),
            (
                "revision past safe integers",
                |v| v["revision"] = json!(1u64 << 53),
                Some(Code::OrganizationInvalid),
            ),
            (
                "unknown limits key",
                |v| v["limits"]["hours"] = json!(1),
                Some(Code::OrganizationInvalid),
            ),
            (
                "limit too big",
                |v| v["limits"]["perDefinition"]["dev"] = json!(21),
                Some(Code::OrganizationInvalid),
            ),
            (
                "bad model name",
                |v| v["models"]["Big Model"] = json!({"harness": "pi"}),
                Some(Code::OrganizationInvalid),
            ),
            (
                "route to an unknown model",
                |v| v["routes"]["dev"] = json!({"model": "nope"}),
                Some(Code::OrganizationInvalid),
            ),
            (
                "instance var an object",
                |v| v["instances"]["acme"]["pm"]["vars"]["x"] = json!({}),
                Some(Code::OrganizationInvalid),
            ),
            (
                "instance with unknown key",
                |v| v["instances"]["acme"]["pm"]["role"] = json!("pm"),
                Some(Code::OrganizationInvalid),
            ),
            (
                "assistant thinking without a model",
                |v| v["assistants"]["acme"]["helper"]["vars"] = json!({"thinking": "low"}),
                Some(Code::OrganizationInvalid),
            ),
            (
                "repeated level",
                |v| v["plugins"]["harness"]["pi"]["levels"] = json!(["low", "low"]),
                Some(Code::OrganizationInvalid),
            ),
            (
                "unknown plugin kind",
                |v| v["plugins"]["usage"] = json!({}),
                Some(Code::OrganizationInvalid),
            ),
        ];
        let mut wrong = Vec::new();
        for (what, edit, want) in cases {
            let mut v = good();
            edit(&mut v);
            let got = Organization::from_json(v).err();
            if got != *want {
                wrong.push(format!("{what}: got {got:?}, want {want:?}"));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn route_checks_against_the_start_levels() {
        let org = Organization::from_json(good()).expect("good");
        let levels = org.levels();
        assert_eq!(org.check_routes(&levels), Ok(()));
        let mut off = org.clone();
        off.plugins.harness.get_mut("pi").expect("pi").on = false;
        assert_eq!(off.check_routes(&levels), Err(Code::HarnessOff));
        let mut deep = org.clone();
        deep.routes.get_mut("default").expect("route").thinking = Some("max".into());
        assert_eq!(deep.check_routes(&levels), Err(Code::ThinkingUnsupported));
        let mut fewer = levels.clone();
        fewer.remove("claude-code");
        assert_eq!(org.check_routes(&fewer), Err(Code::HarnessRefused));
        assert!(org.harness_on("pi") && !org.harness_on("other"));
        let back = Organization::from_json(org.to_json()).expect("round trip");
        assert_eq!(back, org);
    }
}
