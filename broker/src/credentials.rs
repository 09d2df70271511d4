//! Service credentials: references from the business, tokens read once at
//! start and kept only in memory, metadata for the reads.
//!
//! Invariants: a token never leaves this module except into a trusted
//! in-process callback ([`Credentials::use_token`]); no path, variable name
//! or token appears in an error, a log line or a reply. A bad reference
//! refuses the start with a static code.

use crate::config::{BootConfig, Business, Credential};
use crate::error::Code;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Largest credential file.
pub const MAX_FILE: u64 = 16 * 1024;
/// Shortest token.
pub const MIN_TOKEN: usize = 16;
/// The holder of the business's tracker sync identity (`business/@sync`).
pub const SYNC: &str = "@sync";
/// A date this close (or closer) counts as `expiring`.
pub const EXPIRING_DAYS: i64 = 7;

/// A token held in memory; it prints as `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl Secret {
    fn expose(&self) -> &str {
        &self.0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Gitea,
    Vikunja,
}

impl Service {
    pub fn as_str(self) -> &'static str {
        match self {
            Service::Gitea => "gitea",
            Service::Vikunja => "vikunja",
        }
    }

    pub fn parse(s: &str) -> Option<Service> {
        match s {
            "gitea" => Some(Service::Gitea),
            "vikunja" => Some(Service::Vikunja),
            _ => None,
        }
    }
}

/// One loaded credential.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub business: String,
    /// The role instance, or `@sync` for the tracker sync identity.
    pub holder: String,
    pub service: Service,
    pub account: Option<String>,
    /// Days since the Unix epoch of `rotateBy` (Gitea) or `expires` (Vikunja).
    pub date: i64,
    pub date_text: String,
    token: Secret,
}

/// What `status()` reports for one credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Valid,
    Expiring,
    Expired,
    RotationDue,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Valid => "valid",
            State::Expiring => "expiring",
            State::Expired => "expired",
            State::RotationDue => "rotation-due",
        }
    }
}

/// The state of a credential dated `date` (days) at `now_ms`.
pub fn status(service: Service, date: i64, now_ms: i64) -> State {
    let date_ms = date * 86_400_000;
    match service {
        Service::Vikunja if now_ms >= date_ms => State::Expired,
        Service::Gitea if now_ms >= date_ms => State::RotationDue,
        _ if date_ms - now_ms < EXPIRING_DAYS * 86_400_000 => State::Expiring,
        _ => State::Valid,
    }
}

/// Parses a strict `YYYY-MM-DD` into days since the epoch.
pub fn parse_date(s: &str) -> Option<i64> {
    if s.len() != 10 {
        return None;
    }
    let ms = crate::time::parse_canonical(&format!("{s}T00:00:00.000Z"))?;
    Some(ms.div_euclid(86_400_000))
}

/// Validates a token: the opaque alphabet, at least 16 characters, at most
/// one terminal LF (removed).
pub fn parse_token(raw: &[u8]) -> Option<String> {
    let body = raw.strip_suffix(b"\n").unwrap_or(raw);
    let ok = body.len() >= MIN_TOKEN
        && body
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'~' | b'-'));
    ok.then(|| String::from_utf8_lossy(body).into_owned())
}

fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// The broker's own repository root: the workspace this binary was built
/// from (the parent of the `broker` package). The spec has the runtime always
/// exclude its own repository, whatever `repoRoots` says. Never `/`: a
/// workspace built at the file system's root would otherwise exclude every
/// file.
pub fn own_repo_root() -> Option<PathBuf> {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .filter(|p| p.parent().is_some())
        .map(Path::to_path_buf)
}

/// Where no credential file may live: the data root, the broker's own
/// repository, every `repoRoots` entry and every declared project root.
fn forbidden_roots(config: &BootConfig) -> Vec<PathBuf> {
    let mut roots = vec![config.data_root.clone()];
    roots.extend(own_repo_root());
    roots.extend(config.repo_roots.iter().cloned());
    for b in config.businesses.values() {
        roots.extend(b.projects.values().cloned());
    }
    roots
        .into_iter()
        .map(|r| fs::canonicalize(&r).unwrap_or(r))
        .collect()
}

/// Reads a file reference under every rule: absolute, outside the forbidden
/// roots, a regular non-symlink file we own with mode exactly 0600, at most
/// 16 KiB, opened with O_NOFOLLOW and matched by device and inode.
fn read_file(path: &Path, roots: &[PathBuf]) -> Result<Vec<u8>, Code> {
    use std::os::unix::ffi::OsStrExt;
    if !path.is_absolute() || path.as_os_str().as_bytes().contains(&0) {
        return Err(Code::CredentialPath);
    }
    let md = fs::symlink_metadata(path).map_err(|_| Code::CredentialMissing)?;
    if md.file_type().is_symlink() || !md.file_type().is_file() {
        return Err(Code::CredentialUnsafe);
    }
    if md.uid() != euid() || md.mode() & 0o7777 != 0o600 {
        return Err(Code::CredentialUnsafe);
    }
    if md.len() > MAX_FILE {
        return Err(Code::CredentialSize);
    }
    // Resolve the directory (a symlinked parent must not hide a repo root).
    let parent = path.parent().ok_or(Code::CredentialPath)?;
    let real = fs::canonicalize(parent)
        .map_err(|_| Code::CredentialMissing)?
        .join(path.file_name().ok_or(Code::CredentialPath)?);
    if roots.iter().any(|r| real.starts_with(r)) {
        return Err(Code::CredentialPath);
    }
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|_| Code::CredentialUnsafe)?;
    let fmd = f.metadata().map_err(|_| Code::CredentialUnsafe)?;
    if fmd.dev() != md.dev() || fmd.ino() != md.ino() || !fmd.file_type().is_file() {
        return Err(Code::CredentialUnsafe);
    }
    let mut bytes = Vec::new();
    f.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| Code::CredentialUnsafe)?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(Code::CredentialSize);
    }
    Ok(bytes)
}

fn load_one(
    business: &Business,
    holder: &str,
    service: Service,
    c: &Credential,
    account: Option<String>,
    roots: &[PathBuf],
) -> Result<Loaded, Code> {
    let date_text = match service {
        Service::Gitea if c.expires.is_none() => c.rotate_by.clone(),
        Service::Vikunja if c.rotate_by.is_none() => c.expires.clone(),
        _ => None,
    }
    .ok_or(Code::CredentialDate)?;
    let date = parse_date(&date_text).ok_or(Code::CredentialDate)?;
    let raw = match (&c.file, &c.env) {
        (Some(path), None) => read_file(path, roots)?,
        // In `mosaic-bus` the variable leaves the environment once read
        // (`crate::environ`).
        (None, Some(var)) => crate::environ::credential(var)
            .ok_or(Code::CredentialMissing)?
            .into_encoded_bytes(),
        _ => return Err(Code::InvalidBusiness),
    };
    let token = parse_token(&raw).ok_or(Code::CredentialFormat)?;
    Ok(Loaded {
        business: business.id.clone(),
        holder: holder.to_string(),
        service,
        account,
        date,
        date_text,
        token: Secret(token),
    })
}

/// Every credential the host loaded, in load order.
#[derive(Debug, Default)]
pub struct Credentials {
    loaded: Vec<Loaded>,
}

impl Credentials {
    /// Loads every reference of every business: role instances in order,
    /// then the tracker sync identity.
    pub fn load(config: &BootConfig) -> Result<Credentials, Code> {
        let roots = forbidden_roots(config);
        let mut loaded = Vec::new();
        for b in config.businesses.values() {
            for (inst, role) in &b.roles {
                if let Some(c) = &role.gitea {
                    loaded.push(load_one(b, inst, Service::Gitea, c, None, &roots)?);
                }
                if let Some(c) = &role.vikunja {
                    let account = role.tracker_bot.clone().or_else(|| c.bot.clone());
                    loaded.push(load_one(b, inst, Service::Vikunja, c, account, &roots)?);
                }
            }
            if let Some(c) = &b.sync {
                loaded.push(load_one(
                    b,
                    SYNC,
                    Service::Vikunja,
                    c,
                    c.bot.clone(),
                    &roots,
                )?);
            }
        }
        Ok(Credentials { loaded })
    }

    /// Every loaded token, for the known-token check.
    pub fn tokens(&self) -> impl Iterator<Item = &str> {
        self.loaded.iter().map(|l| l.token.expose())
    }

    /// Rows of the `credentials` read for one business.
    pub fn rows(&self, business: &str, now_ms: i64) -> Vec<serde_json::Value> {
        self.loaded
            .iter()
            .filter(|l| l.business == business)
            .map(|l| {
                serde_json::json!({
                    "service": l.service.as_str(),
                    "account": match l.service { Service::Gitea => None, Service::Vikunja => l.account.clone() },
                    "role": if l.holder == SYNC { "tracker sync" } else { l.holder.as_str() },
                    "dateKind": match l.service { Service::Gitea => "rotateBy", Service::Vikunja => "expires" },
                    "date": l.date_text,
                    "state": status(l.service, l.date, now_ms).as_str(),
                })
            })
            .collect()
    }

    /// `credentialStatus`: one holder's `{service, date, state}` rows; the
    /// holder is a role instance or [`SYNC`] for the tracker sync identity.
    pub fn status_rows(&self, business: &str, role: &str, now_ms: i64) -> Vec<serde_json::Value> {
        self.loaded
            .iter()
            .filter(|l| l.business == business && l.holder == role)
            .map(|l| {
                serde_json::json!({
                    "service": l.service.as_str(),
                    "date": l.date_text,
                    "state": status(l.service, l.date, now_ms).as_str(),
                })
            })
            .collect()
    }

    /// The trusted in-process use: `key` is `business/instance` (or
    /// `business/@sync`). The callback alone sees the token; its error, or a
    /// Vikunja token used from midnight UTC of its expiry, is `service-failed`
    /// or `credential-expired`.
    pub fn use_token<T, E>(
        &self,
        key: &str,
        service: Service,
        now_ms: i64,
        f: impl FnOnce(&str) -> Result<T, E>,
    ) -> Result<T, Code> {
        let (business, holder) = key.split_once('/').ok_or(Code::UnknownRole)?;
        let l = self
            .loaded
            .iter()
            .find(|l| l.business == business && l.holder == holder && l.service == service)
            .ok_or(Code::UnknownRole)?;
        if l.service == Service::Vikunja && status(l.service, l.date, now_ms) == State::Expired {
            return Err(Code::CredentialExpired);
        }
        f(l.token.expose()).map_err(|_| Code::ServiceFailed)
    }
}

/// The loaded credentials as the host's trusted in-process adapters reach
/// them: the spec's `runtime.credentials` (3i L241), from
/// `runtime::Runtime::credentials`. It holds the same tokens as the
/// writer's `Core` (read once at start, shared, never changed), so a use
/// runs on the adapter's own thread: a callback that waits on a service
/// holds up no request.
#[derive(Clone)]
pub struct Adapters {
    loaded: std::sync::Arc<Credentials>,
    known: crate::tokens::KnownTokens,
}

impl std::fmt::Debug for Adapters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Adapters({} loaded)", self.loaded.loaded.len())
    }
}

impl Adapters {
    pub fn new(loaded: std::sync::Arc<Credentials>) -> Adapters {
        let known = crate::tokens::KnownTokens::new(loaded.tokens().map(str::to_string).collect());
        Adapters { loaded, known }
    }

    /// `credentials.use('business/instance', service, callback)`: the
    /// callback alone receives the token (`business/@sync` for the
    /// business's tracker sync identity), and what it returns comes back.
    /// Refusals: a service other than `gitea` or `vikunja` is
    /// `invalid-request`; no such credential `unknown-role`; a Vikunja token
    /// from midnight UTC of its expiry `credential-expired`; the callback's
    /// own error (whatever it says) `service-failed`; a returned value that
    /// holds a loaded token (in a string, key or number, once serialised)
    /// `known-token`, the value dropped. Nothing is logged or stored.
    pub fn use_token<T, E>(
        &self,
        key: &str,
        service: &str,
        callback: impl FnOnce(&str) -> Result<T, E>,
    ) -> Result<T, Code>
    where
        T: serde::Serialize,
    {
        let service = Service::parse(service).ok_or(Code::InvalidRequest)?;
        let now = crate::time::now_ms();
        let out = self.loaded.use_token(key, service, now, callback)?;
        let shown = serde_json::to_value(&out).map_err(|_| Code::ServiceFailed)?;
        self.known.check(&shown)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000;

    #[test]
    fn tokens() {
        assert_eq!(
            parse_token(b"abcdefghijklmnop"),
            Some("abcdefghijklmnop".into())
        );
        assert_eq!(
            parse_token(b"abcdefghijklmnop\n"),
            Some("abcdefghijklmnop".into())
        );
        assert_eq!(
            parse_token(b"A-b.c_d~e0123456789"),
            Some("A-b.c_d~e0123456789".into())
        );
        for bad in [
            &b"short"[..],
            b"abcdefghijklmno",
            b"abcdefghijklmno\n",
            b"abcdefghijklmnop\n\n",
            b"abcdefghijklmnop\r\n",
            b"abcdefgh ijklmnop",
            b"abcdefghijklmnop+",
            b"\nabcdefghijklmnop",
            b"",
        ] {
            assert_eq!(parse_token(bad), None, "{bad:?}");
        }
        assert_eq!(format!("{:?}", Secret("x".repeat(20))), "<redacted>");
    }

    #[test]
    fn dates_are_strict() {
        assert_eq!(parse_date("1970-01-02"), Some(1));
        for bad in [
            "2027-3-01",
            "2027-02-30",
            "2027-03-01T00:00",
            "20270301",
            " 2027-03-01",
        ] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn states() {
        let d = 20_000; // a day number
        let midnight = d * DAY;
        // Vikunja: expired from midnight UTC on the expiry date.
        assert_eq!(status(Service::Vikunja, d, midnight - 1), State::Expiring);
        assert_eq!(status(Service::Vikunja, d, midnight), State::Expired);
        assert_eq!(
            status(Service::Vikunja, d, midnight - 7 * DAY),
            State::Valid
        );
        assert_eq!(
            status(Service::Vikunja, d, midnight - 7 * DAY + 1),
            State::Expiring
        );
        // Gitea: rotation due is a warning, never expired.
        assert_eq!(
            status(Service::Gitea, d, midnight + 100 * DAY),
            State::RotationDue
        );
        assert_eq!(status(Service::Gitea, d, midnight - DAY), State::Expiring);
        assert_eq!(status(Service::Gitea, d, midnight - 30 * DAY), State::Valid);
    }

    #[test]
    fn use_gives_the_token_only_to_the_callback() {
        let mk = |service, date| Loaded {
            business: "acme".into(),
            holder: "pm".into(),
            service,
            account: None,
            date,
            date_text: String::new(),
            token: Secret("t0k3n-abcdefghijklmnop".into()),
        };
        let c = Credentials {
            loaded: vec![mk(Service::Gitea, 10), mk(Service::Vikunja, 20)],
        };
        let now = 15 * DAY;
        let len = c.use_token("acme/pm", Service::Gitea, now, |t| Ok::<_, ()>(t.len()));
        assert_eq!(len, Ok(22));
        // Rotation due is a warning only; Vikunja refuses from midnight of expiry.
        assert_eq!(
            c.use_token("acme/pm", Service::Vikunja, 20 * DAY, |_| Ok::<_, ()>(())),
            Err(Code::CredentialExpired)
        );
        assert_eq!(
            c.use_token("acme/pm", Service::Vikunja, now, |_| Err::<(), _>(
                "boom: t0k3n"
            )),
            Err(Code::ServiceFailed)
        );
        assert_eq!(
            c.use_token("acme/cto", Service::Gitea, now, |_| Ok::<_, ()>(())),
            Err(Code::UnknownRole)
        );
        assert_eq!(c.tokens().count(), 2);
    }
}
