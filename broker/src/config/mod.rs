//! The boot config and the normalized business, validated at the edge.
//!
//! Serde shapes live here and nowhere else; the rest of the broker sees the
//! plain structs these produce.

mod business;
mod launch;

pub use business::{Business, Credential, Role};
pub use launch::LaunchRecord;

use crate::error::Code;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A validated boot config.
#[derive(Debug, Clone)]
pub struct BootConfig {
    pub data_root: PathBuf,
    pub businesses: BTreeMap<String, Business>,
    pub launches: Vec<LaunchRecord>,
    pub readers: Vec<String>,
    pub repo_roots: Vec<PathBuf>,
    pub requirements: Option<PathBuf>,
    pub shims: Shims,
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
    shims: Option<RawShims>,
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
        let shims = match raw.shims {
            Some(s) => Shims {
                human: abs_path(&s.human)?,
                tester: abs_path(&s.tester)?,
            },
            None => default_shims(),
        };
        Ok(BootConfig {
            data_root,
            businesses,
            launches,
            readers: raw.readers,
            repo_roots,
            requirements,
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
