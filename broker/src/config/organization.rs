//! The organization file's shape and its checks (DESIGN.md "Schema 3i",
//! Organization), every level strict (an unknown key refuses).
//!
//! Each business served has its own part of the file ([`Part`]: revision,
//! limits, models, instances, assistants, routes); `plugins` (the harness
//! switches) is the broker's. The file has two forms (docs/decisions.md,
//! "The organization file"): the one-business form `{revision, limits,
//! models, instances, assistants, routes, plugins}`, where the top level is
//! the part (instances and assistants keyed by business), and the form for
//! several, `{businesses: {BUSINESS: PART}, plugins}`. A verb reads and
//! writes its caller's part only ([`Organization::part`],
//! [`Organization::with_part`]).
//!
//! The shapes the spec leaves open are chosen in docs/decisions.md. This
//! module only parses, checks and prints; reading and replacing the file is
//! `crate::orgfile`.

use super::is_id;
use crate::error::Code;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The largest `revision`: a JSON safe integer.
pub const MAX_REVISION: u64 = (1 << 53) - 1;

/// The parsed file, in either form. Maps are ordered, so a write prints
/// the same bytes for the same content.
#[derive(Debug, Clone, PartialEq)]
pub struct Organization {
    form: Form,
}

#[derive(Debug, Clone, PartialEq)]
enum Form {
    One(OneFile),
    Several(SeveralFile),
}

/// The one-business form, exactly the file as it was before a broker
/// served several businesses from it: the top level is one business's
/// part, `instances` and `assistants` keyed by business id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OneFile {
    revision: u64,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    models: BTreeMap<String, Model>,
    /// Business id, then instance key.
    #[serde(default)]
    instances: BTreeMap<String, BTreeMap<String, Instance>>,
    /// Business id, then assistant instance key.
    #[serde(default)]
    assistants: BTreeMap<String, BTreeMap<String, Assistant>>,
    #[serde(default)]
    routes: BTreeMap<String, Route>,
    #[serde(default)]
    plugins: Plugins,
}

/// The form for several businesses: each one's part under its id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SeveralFile {
    businesses: BTreeMap<String, Part>,
    #[serde(default)]
    plugins: Plugins,
}

/// One business's part: what its verbs read and write, with its own
/// optimistic `revision`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Part {
    pub revision: u64,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub models: BTreeMap<String, Model>,
    /// Instance key to the instance the next start loads.
    #[serde(default)]
    pub instances: BTreeMap<String, Instance>,
    /// Assistant instance key to its settings.
    #[serde(default)]
    pub assistants: BTreeMap<String, Assistant>,
    /// A definition id, or `default`, to its route.
    #[serde(default)]
    pub routes: BTreeMap<String, Route>,
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

/// The value checks of one business's pieces, in either form.
struct Pieces<'a> {
    revision: u64,
    limits: &'a Limits,
    models: &'a BTreeMap<String, Model>,
    instances: Vec<&'a BTreeMap<String, Instance>>,
    assistants: Vec<&'a BTreeMap<String, Assistant>>,
    routes: &'a BTreeMap<String, Route>,
}

impl Pieces<'_> {
    fn check_shape(&self) -> Result<(), Code> {
        let bad = Err(Code::OrganizationInvalid);
        if self.revision > MAX_REVISION {
            return bad;
        }
        self.limits.check()?;
        for (name, m) in self.models {
            if !is_model(name) || !super::launch::is_harness(&m.harness) {
                return bad;
            }
        }
        for instances in &self.instances {
            if instances.len() > 256 {
                return bad;
            }
            for (key, i) in *instances {
                if !is_id(key) || !is_id(&i.definition) {
                    return bad;
                }
                check_vars(&i.vars)?;
            }
        }
        for assistants in &self.assistants {
            for (key, a) in *assistants {
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
        for (key, r) in self.routes {
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
        Ok(())
    }

    /// The route checks (see [`Organization::check_routes`]) over these
    /// pieces, with the broker's harness switches.
    fn check_routes(&self, plugins: &Plugins, levels: &HarnessLevels) -> Result<(), Code> {
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
            .iter()
            .flat_map(|a| a.values().map(|a| &a.vars))
            .chain(
                self.instances
                    .iter()
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
            if !plugins.harness_on(&m.harness) {
                return Err(Code::HarnessOff);
            }
            if thinking.is_some_and(|t| !offered.iter().any(|l| l == t)) {
                return Err(Code::ThinkingUnsupported);
            }
        }
        Ok(())
    }
}

impl Part {
    fn pieces(&self) -> Pieces<'_> {
        Pieces {
            revision: self.revision,
            limits: &self.limits,
            models: &self.models,
            instances: vec![&self.instances],
            assistants: vec![&self.assistants],
            routes: &self.routes,
        }
    }

    /// The value checks every write of this part runs.
    pub fn check_shape(&self) -> Result<(), Code> {
        self.pieces().check_shape()
    }

    /// The route checks a write of this part runs, against the harness
    /// switches of `org` (the file as it is now) and the levels read at
    /// start: only the writer's own part is checked, so another
    /// business's routes never refuse its write.
    pub fn check_routes(&self, org: &Organization, levels: &HarnessLevels) -> Result<(), Code> {
        self.pieces().check_routes(org.plugins(), levels)
    }
}

impl Plugins {
    fn check(&self) -> Result<(), Code> {
        for (name, h) in &self.harness {
            let mut seen = BTreeSet::new();
            if !super::launch::is_harness(name)
                || h.levels.len() > 32
                || !h.levels.iter().all(|l| is_word(l) && seen.insert(l))
            {
                return Err(Code::OrganizationInvalid);
            }
        }
        Ok(())
    }

    fn harness_on(&self, name: &str) -> bool {
        self.harness.get(name).is_some_and(|h| h.on)
    }
}

impl OneFile {
    fn pieces(&self) -> Pieces<'_> {
        Pieces {
            revision: self.revision,
            limits: &self.limits,
            models: &self.models,
            instances: self.instances.values().collect(),
            assistants: self.assistants.values().collect(),
            routes: &self.routes,
        }
    }

    /// Business `b`'s part: the top level, with `b`'s instances and
    /// assistants.
    fn part(&self, b: &str) -> Part {
        Part {
            revision: self.revision,
            limits: self.limits.clone(),
            models: self.models.clone(),
            instances: self.instances.get(b).cloned().unwrap_or_default(),
            assistants: self.assistants.get(b).cloned().unwrap_or_default(),
            routes: self.routes.clone(),
        }
    }
}

impl Organization {
    /// Parses and checks a whole file's JSON, in either form (the form for
    /// several when it has `businesses`). Shapes and values only: the
    /// harness checks need the start's levels ([`Organization::check_routes`]).
    pub fn from_json(v: serde_json::Value) -> Result<Organization, Code> {
        let several = v.get("businesses").is_some();
        let form = if several {
            Form::Several(serde_json::from_value(v).map_err(|_| Code::OrganizationInvalid)?)
        } else {
            Form::One(serde_json::from_value(v).map_err(|_| Code::OrganizationInvalid)?)
        };
        let org = Organization { form };
        org.check_shape()?;
        Ok(org)
    }

    /// The value checks every write and every read of the file runs.
    pub fn check_shape(&self) -> Result<(), Code> {
        let bad = Err(Code::OrganizationInvalid);
        match &self.form {
            Form::One(f) => {
                if !f
                    .instances
                    .keys()
                    .chain(f.assistants.keys())
                    .all(|b| is_id(b))
                {
                    return bad;
                }
                f.pieces().check_shape()?;
            }
            Form::Several(f) => {
                for (b, part) in &f.businesses {
                    if !is_id(b) {
                        return bad;
                    }
                    part.check_shape()?;
                }
            }
        }
        self.plugins().check()
    }

    /// The broker's harness switches.
    pub fn plugins(&self) -> &Plugins {
        match &self.form {
            Form::One(f) => &f.plugins,
            Form::Several(f) => &f.plugins,
        }
    }

    /// True for the form for several businesses.
    pub fn is_several(&self) -> bool {
        matches!(self.form, Form::Several(_))
    }

    /// Whether the file switches harness `name` on now (the spec's
    /// `harnessOn`): a harness it does not list is off.
    pub fn harness_on(&self, name: &str) -> bool {
        self.plugins().harness_on(name)
    }

    /// The route checks the start runs over the whole file, against the
    /// levels read then: a model's harness the start did not load refuses
    /// `harness-refused`, one switched off `harness-off`, a thinking level
    /// the harness does not offer `thinking-unsupported`, a model no entry
    /// of `models` names `organization-invalid`. A write checks its own
    /// part only ([`Part::check_routes`]).
    pub fn check_routes(&self, levels: &HarnessLevels) -> Result<(), Code> {
        match &self.form {
            Form::One(f) => f.pieces().check_routes(&f.plugins, levels),
            Form::Several(f) => f
                .businesses
                .values()
                .try_for_each(|p| p.pieces().check_routes(&f.plugins, levels)),
        }
    }

    /// The levels this file offers, for the start.
    pub fn levels(&self) -> HarnessLevels {
        self.plugins()
            .harness
            .iter()
            .map(|(k, h)| (k.clone(), h.levels.clone()))
            .collect()
    }

    /// Business `business`'s part as the file holds it now: in the
    /// one-business form the top level (shared by every business until the
    /// first write splits the file, see [`Organization::with_part`]); in the
    /// form for several its own entry, or an empty part at revision 0 when
    /// it has none yet.
    pub fn part(&self, business: &str) -> Part {
        match &self.form {
            Form::One(f) => f.part(business),
            Form::Several(f) => f.businesses.get(business).cloned().unwrap_or_default(),
        }
    }

    /// This file with `business`'s part replaced by `part`, every other
    /// business's part as it was. A one-business file stays in its form
    /// when `business` is the only business the broker serves (`served`),
    /// and its bytes change only where the part did. Otherwise it becomes
    /// the form for several: each business it held (the served ones and
    /// any its `instances`/`assistants` name) gets its own copy of what it
    /// read until now, and only `business`'s is then replaced.
    pub fn with_part<'a>(
        &self,
        business: &str,
        part: Part,
        served: impl IntoIterator<Item = &'a str>,
    ) -> Organization {
        let served: BTreeSet<&str> = served.into_iter().collect();
        let form = match &self.form {
            Form::One(f) if served.len() == 1 && served.contains(business) => {
                let mut f = f.clone();
                let before = f.part(business);
                f.revision = part.revision;
                f.limits = part.limits;
                f.models = part.models;
                f.routes = part.routes;
                if before.instances != part.instances {
                    f.instances.insert(business.to_string(), part.instances);
                }
                if before.assistants != part.assistants {
                    f.assistants.insert(business.to_string(), part.assistants);
                }
                Form::One(f)
            }
            Form::One(f) => {
                let names: BTreeSet<&str> = served
                    .iter()
                    .copied()
                    .chain(f.instances.keys().map(String::as_str))
                    .chain(f.assistants.keys().map(String::as_str))
                    .chain([business])
                    .collect();
                let mut businesses: BTreeMap<String, Part> = names
                    .into_iter()
                    .map(|b| (b.to_string(), f.part(b)))
                    .collect();
                businesses.insert(business.to_string(), part);
                Form::Several(SeveralFile {
                    businesses,
                    plugins: f.plugins.clone(),
                })
            }
            Form::Several(f) => {
                let mut f = f.clone();
                f.businesses.insert(business.to_string(), part);
                Form::Several(f)
            }
        };
        Organization { form }
    }

    /// The JSON the writer prints.
    pub fn to_json(&self) -> serde_json::Value {
        let v = match &self.form {
            Form::One(f) => serde_json::to_value(f),
            Form::Several(f) => serde_json::to_value(f),
        };
        v.unwrap_or(serde_json::Value::Null)
    }
}

impl Serialize for Organization {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.form {
            Form::One(f) => f.serialize(s),
            Form::Several(f) => f.serialize(s),
        }
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
        let edited = |edit: fn(&mut serde_json::Value)| {
            let mut v = good();
            edit(&mut v);
            Organization::from_json(v).expect("valid shape")
        };
        let off = edited(|v| v["plugins"]["harness"]["pi"]["on"] = json!(false));
        assert_eq!(off.check_routes(&levels), Err(Code::HarnessOff));
        let deep = edited(|v| v["routes"]["default"]["thinking"] = json!("max"));
        assert_eq!(deep.check_routes(&levels), Err(Code::ThinkingUnsupported));
        let mut fewer = levels.clone();
        fewer.remove("claude-code");
        assert_eq!(org.check_routes(&fewer), Err(Code::HarnessRefused));
        assert!(org.harness_on("pi") && !org.harness_on("other"));
        let back = Organization::from_json(org.to_json()).expect("round trip");
        assert_eq!(back, org);
    }

    /// The form for several businesses: each part strict and checked on its
    /// own; the forms don't mix.
    #[test]
    fn the_form_for_several_businesses_has_a_part_each() {
        let part = json!({"revision": 2, "limits": {"runs": 3, "perDefinition": {}},
                          "models": {"local": {"harness": "pi"}},
                          "instances": {"dev": {"definition": "dev", "vars": {}, "launch": true}},
                          "assistants": {}, "routes": {"default": {"model": "local"}}});
        let several = json!({"businesses": {"acme": part, "beta": {"revision": 0}},
                             "plugins": good()["plugins"]});
        let org = Organization::from_json(several.clone()).expect("several");
        assert!(org.is_several());
        assert_eq!(org.part("acme").revision, 2);
        assert_eq!(org.part("beta"), Part::default());
        assert_eq!(org.part("nobody"), Part::default());
        assert_eq!(org.check_routes(&org.levels()), Ok(()));
        assert_eq!(Organization::from_json(org.to_json()), Ok(org));
        type Edit = fn(&mut serde_json::Value);
        let cases: &[(&str, Edit)] = &[
            ("a top-level revision beside businesses", |v| {
                v["revision"] = json!(1)
            }),
            ("top-level limits beside businesses", |v| {
                v["limits"] = json!({})
            }),
            ("a part without a revision", |v| {
                v["businesses"]["beta"] = json!({})
            }),
            ("an unknown key in a part", |v| {
                v["businesses"]["beta"]["plugins"] = json!({})
            }),
            ("a bad business id", |v| {
                v["businesses"]["Beta"] = json!({"revision": 0})
            }),
            ("a route to a model of another part", |v| {
                v["businesses"]["beta"]["routes"] = json!({"default": {"model": "local"}})
            }),
        ];
        for (what, edit) in cases {
            let mut v = several.clone();
            edit(&mut v);
            assert_eq!(
                Organization::from_json(v).err(),
                Some(Code::OrganizationInvalid),
                "{what}"
            );
        }
    }

    /// A write replaces only the writer's part: a one-business file keeps
    /// its form (and every byte the write did not change) on a broker that
    /// serves that business alone, and on a broker that serves several it
    /// becomes the form for several, every business keeping what it read.
    #[test]
    fn a_write_replaces_only_the_writers_part() {
        let org = Organization::from_json(good()).expect("good");
        let mut acme = org.part("acme");
        assert_eq!(acme.revision, 3);
        assert_eq!(acme.assistants.len(), 1);
        acme.revision = 4;
        acme.limits.runs = Some(7);

        let alone = org.with_part("acme", acme.clone(), ["acme"]);
        assert!(!alone.is_several());
        let mut want = good();
        want["revision"] = json!(4);
        want["limits"]["runs"] = json!(7);
        assert_eq!(
            alone.to_json(),
            Organization::from_json(want).expect("w").to_json()
        );

        let split = org.with_part("acme", acme.clone(), ["acme", "beta"]);
        assert!(split.is_several());
        assert_eq!(split.part("acme"), acme);
        let beta = split.part("beta");
        assert_eq!(beta, org.part("beta"), "beta keeps what it read");
        assert_eq!(beta.revision, 3);
        assert_eq!(beta.limits.runs, Some(10));
        assert!(beta.instances.is_empty() && beta.assistants.is_empty());
        assert_eq!(split.levels(), org.levels());

        // Then beta's write leaves acme's part alone.
        let mut b2 = beta.clone();
        b2.revision = 4;
        b2.routes.clear();
        let next = split.with_part("beta", b2.clone(), ["acme", "beta"]);
        assert_eq!(next.part("acme"), acme);
        assert_eq!(next.part("beta"), b2);
    }
}
