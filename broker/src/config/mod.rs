//! The boot config and the normalized business, validated at the edge.
//!
//! Serde shapes live here and nowhere else; the rest of the broker sees the
//! plain structs these produce.

pub mod actions;
mod business;
mod launch;
pub mod organization;

pub use business::{Business, Credential, Role};
pub use launch::LaunchRecord;

use crate::error::Code;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `sealSeconds`: the default, and the bounds a boot config may give (the
/// sealer, `crate::sealer`, seals that often).
pub const SEAL_SECONDS_DEFAULT: u64 = 10;
pub const SEAL_SECONDS_MIN: u64 = 1;
pub const SEAL_SECONDS_MAX: u64 = 3600;

/// A validated boot config.
#[derive(Debug, Clone)]
pub struct BootConfig {
    pub data_root: PathBuf,
    pub businesses: BTreeMap<String, Business>,
    pub launches: Vec<LaunchRecord>,
    pub readers: Vec<String>,
    pub repo_roots: Vec<PathBuf>,
    pub requirements: Option<PathBuf>,
    /// The organization file (`organization`), when the boot names one.
    pub organization: Option<PathBuf>,
    pub shims: Shims,
    /// `sealSeconds`: a seal follows any commit within this many seconds
    /// (1 to 3600, default 10).
    pub seal_seconds: u64,
}

/// Absolute paths of the human and tester shims.
#[derive(Debug, Clone)]
pub struct Shims {
    pub human: PathBuf,
    pub tester: PathBuf,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawConfig {
    data_root: String,
    businesses: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    launches: Vec<serde_json::Value>,
    #[serde(default)]
    readers: Vec<String>,
    #[serde(default)]
    repo_roots: Vec<String>,
    #[serde(default)]
    requirements: Option<String>,
    #[serde(default)]
    organization: Option<String>,
    #[serde(default)]
    shims: Option<RawShims>,
    #[serde(default)]
    seal_seconds: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShims {
    human: String,
    tester: String,
}

/// The identifier pattern of businesses, instances and definitions.
pub fn is_id(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_')
}

pub(crate) fn abs_path(s: &str) -> Result<PathBuf, Code> {
    let p = PathBuf::from(s);
    if s.is_empty() || !p.is_absolute() || s.contains('\0') {
        return Err(Code::InvalidConfig);
    }
    Ok(p)
}

impl BootConfig {
    /// The business `id` names, else `unknown-business`.
    pub fn business(&self, id: &str) -> Result<&Business, Code> {
        self.businesses.get(id).ok_or(Code::UnknownBusiness)
    }

    /// Validates a boot config (the `config` object of the boot message).
    pub fn from_json(v: serde_json::Value) -> Result<BootConfig, Code> {
        let raw: RawConfig = serde_json::from_value(v).map_err(|_| Code::InvalidConfig)?;
        let data_root = PathBuf::from(&raw.data_root);
        if !data_root.is_absolute() {
            return Err(Code::DataRoot);
        }
        let mut businesses = BTreeMap::new();
        for (id, b) in raw.businesses {
            let b = Business::from_json(&id, b)?;
            businesses.insert(id, b);
        }
        let mut launches = Vec::with_capacity(raw.launches.len());
        for l in raw.launches {
            launches.push(LaunchRecord::from_json(l)?);
        }
        for r in &raw.readers {
            if !businesses.contains_key(r) {
                return Err(Code::UnknownBusiness);
            }
        }
        let repo_roots = raw
            .repo_roots
            .iter()
            .map(|s| abs_path(s))
            .collect::<Result<Vec<_>, _>>()?;
        let requirements = raw.requirements.as_deref().map(abs_path).transpose()?;
        let organization = raw.organization.as_deref().map(abs_path).transpose()?;
        let shims = match raw.shims {
            Some(s) => Shims {
                human: abs_path(&s.human)?,
                tester: abs_path(&s.tester)?,
            },
            None => default_shims(),
        };
        let seal_seconds = raw.seal_seconds.unwrap_or(SEAL_SECONDS_DEFAULT);
        if !(SEAL_SECONDS_MIN..=SEAL_SECONDS_MAX).contains(&seal_seconds) {
            return Err(Code::InvalidConfig);
        }
        Ok(BootConfig {
            seal_seconds,
            data_root,
            businesses,
            launches,
            readers: raw.readers,
            repo_roots,
            requirements,
            organization,
            shims,
        })
    }
}

/// The shims beside the running `mosaic-bus`.
fn default_shims() -> Shims {
    let dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.to_path_buf()))
        .unwrap_or_else(|| PathBuf::from("/"));
    Shims {
        human: dir.join("mosaic-human-cli"),
        tester: dir.join("mosaic-tester-cli"),
    }
}

/// Loads the requirements file: `{prd, version, requirements:[{id,title}]}`.
/// A bad file refuses the start.
pub fn load_requirements(path: &std::path::Path) -> Result<serde_json::Value, Code> {
    use std::io::Read;
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Req {
        id: String,
        title: String,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        prd: String,
        version: String,
        requirements: Vec<Req>,
    }
    let f = std::fs::File::open(path).map_err(|_| Code::InvalidRequirements)?;
    let mut bytes = Vec::new();
    f.take(1 << 20)
        .read_to_end(&mut bytes)
        .map_err(|_| Code::InvalidRequirements)?;
    let file: File = serde_json::from_slice(&bytes).map_err(|_| Code::InvalidRequirements)?;
    let mut seen = std::collections::HashSet::new();
    for r in &file.requirements {
        if !is_requirement_id(&r.id) || r.title.is_empty() || !seen.insert(r.id.clone()) {
            return Err(Code::InvalidRequirements);
        }
    }
    Ok(serde_json::json!({
        "prd": file.prd,
        "version": file.version,
        "requirements": file.requirements.iter()
            .map(|r| serde_json::json!({"id": r.id, "title": r.title}))
            .collect::<Vec<_>>(),
    }))
}

/// `REQ-[A-Z]+-[1-9][0-9]*`.
pub fn is_requirement_id(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("REQ-") else {
        return false;
    };
    let Some((area, num)) = rest.split_once('-') else {
        return false;
    };
    !area.is_empty()
        && area.bytes().all(|c| c.is_ascii_uppercase())
        && num
            .bytes()
            .next()
            .is_some_and(|c| (b'1'..=b'9').contains(&c))
        && num.bytes().all(|c| c.is_ascii_digit())
}

/// An identifier a launcher picks for why a run ended: 1 to 64 of `[a-z0-9._-]`.
pub fn is_reason(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn business() -> Value {
        json!({"id": "acme", "human": "Ada",
               "arbiters": {"technical": "pm", "delivery": "pm"},
               "roles": {"pm": {"authority": {"withinRole": [], "crossRole": []}}}})
    }

    fn launch() -> Value {
        json!({"business": "acme", "role": "pm", "run": "run-1", "harness": "pi",
               "pid": 4242, "startTime": 17})
    }

    fn base() -> Value {
        json!({"dataRoot": "/abs/root", "businesses": {"acme": business()}})
    }

    /// One boot config per case: (what, edit, code or accepted).
    #[test]
    fn config_rules_one_case_each() {
        type Edit = fn(&mut Value);
        let ok: Option<Code> = None;
        let cases: &[(&str, Edit, Option<Code>)] = &[
            ("minimal", |_| {}, ok),
            (
                "every key",
                |c| {
                    c["launches"] = json!([launch()]);
                    c["readers"] = json!(["acme"]);
                    c["repoRoots"] = json!(["/abs/repo"]);
                    c["requirements"] = json!("/abs/requirements.json");
                    c["organization"] = json!("/abs/organization.json");
                    c["shims"] = json!({"human": "/abs/h", "tester": "/abs/t"});
                },
                ok,
            ),
            (
                "no businesses at all is a config",
                |c| c["businesses"] = json!({}),
                ok,
            ),
            (
                "unknown key",
                |c| c["extra"] = json!(1),
                Some(Code::InvalidConfig),
            ),
            ("sealSeconds 1", |c| c["sealSeconds"] = json!(1), ok),
            ("sealSeconds 3600", |c| c["sealSeconds"] = json!(3600), ok),
            (
                "sealSeconds 0",
                |c| c["sealSeconds"] = json!(0),
                Some(Code::InvalidConfig),
            ),
            (
                "sealSeconds 3601",
                |c| c["sealSeconds"] = json!(3601),
                Some(Code::InvalidConfig),
            ),
            (
                "sealSeconds not an integer",
                |c| c["sealSeconds"] = json!(1.5),
                Some(Code::InvalidConfig),
            ),
            (
                "sealSeconds a string",
                |c| c["sealSeconds"] = json!("10"),
                Some(Code::InvalidConfig),
            ),
            (
                "dataRoot missing",
                |c| {
                    c.as_object_mut().expect("object").remove("dataRoot");
                },
                Some(Code::InvalidConfig),
            ),
            (
                "dataRoot not a string",
                |c| c["dataRoot"] = json!(7),
                Some(Code::InvalidConfig),
            ),
            (
                "dataRoot relative",
                |c| c["dataRoot"] = json!("rel/root"),
                Some(Code::DataRoot),
            ),
            (
                "dataRoot empty",
                |c| c["dataRoot"] = json!(""),
                Some(Code::DataRoot),
            ),
            (
                "businesses missing",
                |c| {
                    c.as_object_mut().expect("object").remove("businesses");
                },
                Some(Code::InvalidConfig),
            ),
            (
                "businesses a list",
                |c| c["businesses"] = json!([business()]),
                Some(Code::InvalidConfig),
            ),
            (
                "a business not an object",
                |c| c["businesses"]["acme"] = json!(1),
                Some(Code::InvalidBusiness),
            ),
            (
                "a business under another key",
                |c| {
                    c["businesses"] = json!({"other": business()});
                },
                Some(Code::InvalidBusiness),
            ),
            (
                "launches not a list",
                |c| c["launches"] = json!({}),
                Some(Code::InvalidConfig),
            ),
            (
                "a launch without pid",
                |c| {
                    let mut l = launch();
                    l.as_object_mut().expect("object").remove("pid");
                    c["launches"] = json!([l]);
                },
                Some(Code::InvalidLaunch),
            ),
            (
                "a launch with an unknown key",
                |c| {
                    let mut l = launch();
                    l["surprise"] = json!("x");
                    c["launches"] = json!([l]);
                },
                Some(Code::InvalidLaunch),
            ),
            (
                "a launch with a bad harness",
                |c| {
                    let mut l = launch();
                    l["harness"] = json!("Claude Code");
                    c["launches"] = json!([l]);
                },
                Some(Code::InvalidHarness),
            ),
            (
                "readers name no business",
                |c| c["readers"] = json!(["nobody"]),
                Some(Code::UnknownBusiness),
            ),
            (
                "readers not strings",
                |c| c["readers"] = json!([1]),
                Some(Code::InvalidConfig),
            ),
            (
                "repoRoots relative",
                |c| c["repoRoots"] = json!(["repo"]),
                Some(Code::InvalidConfig),
            ),
            (
                "requirements relative",
                |c| c["requirements"] = json!("req.json"),
                Some(Code::InvalidConfig),
            ),
            (
                "organization relative",
                |c| c["organization"] = json!("organization.json"),
                Some(Code::InvalidConfig),
            ),
            (
                "shims relative",
                |c| {
                    c["shims"] = json!({"human": "h", "tester": "/abs/t"});
                },
                Some(Code::InvalidConfig),
            ),
            (
                "shims without tester",
                |c| c["shims"] = json!({"human": "/abs/h"}),
                Some(Code::InvalidConfig),
            ),
            (
                "shims with an unknown key",
                |c| {
                    c["shims"] = json!({"human": "/abs/h", "tester": "/abs/t", "x": "/abs/x"});
                },
                Some(Code::InvalidConfig),
            ),
        ];
        let mut wrong = Vec::new();
        for (what, edit, want) in cases {
            let mut c = base();
            edit(&mut c);
            let got = BootConfig::from_json(c).err();
            if got != *want {
                wrong.push(format!("{what}: got {got:?}, want {want:?}"));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    /// `{prd, version, requirements:[{id,title}]}`; a bad file refuses the
    /// start with `invalid-requirements`.
    #[test]
    fn requirements_file_rules_one_case_each() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = json!({"prd": "PRD", "version": "1.6",
                          "requirements": [{"id": "REQ-MSG-1", "title": "Messages"}]});
        let cases: &[(&str, Option<Value>, bool)] = &[
            ("good", Some(good.clone()), true),
            (
                "empty list",
                Some(json!({"prd": "PRD", "version": "1", "requirements": []})),
                true,
            ),
            ("missing file", None, false),
            (
                "missing prd",
                Some(json!({"version": "1", "requirements": []})),
                false,
            ),
            (
                "missing requirements",
                Some(json!({"prd": "PRD", "version": "1"})),
                false,
            ),
            (
                "unknown key",
                Some(json!({"prd": "P", "version": "1", "requirements": [], "x": 1})),
                false,
            ),
            (
                "bad id",
                Some(json!({"prd": "P", "version": "1",
                                   "requirements": [{"id": "REQ-msg-1", "title": "t"}]})),
                false,
            ),
            (
                "id numbered from zero",
                Some(json!({"prd": "P", "version": "1",
                                   "requirements": [{"id": "REQ-MSG-0", "title": "t"}]})),
                false,
            ),
            (
                "duplicate id",
                Some(json!({"prd": "P", "version": "1",
                                   "requirements": [{"id": "REQ-A-1", "title": "t"},
                                                    {"id": "REQ-A-1", "title": "u"}]})),
                false,
            ),
            (
                "empty title",
                Some(json!({"prd": "P", "version": "1",
                                   "requirements": [{"id": "REQ-A-1", "title": ""}]})),
                false,
            ),
            (
                "extra key in a requirement",
                Some(json!({"prd": "P", "version": "1",
                                   "requirements": [{"id": "REQ-A-1", "title": "t", "x": 1}]})),
                false,
            ),
        ];
        for (i, (what, body, ok)) in cases.iter().enumerate() {
            let path = dir.path().join(format!("r{i}.json"));
            if let Some(b) = body {
                std::fs::write(&path, b.to_string()).expect("write");
            }
            let got = load_requirements(&path);
            if *ok {
                assert_eq!(got.as_ref().ok(), body.as_ref(), "{what}");
            } else {
                assert_eq!(got.err(), Some(Code::InvalidRequirements), "{what}");
            }
        }
        let path = dir.path().join("not-json");
        std::fs::write(&path, b"{prd").expect("write");
        assert_eq!(
            load_requirements(&path).err(),
            Some(Code::InvalidRequirements)
        );
    }
}
