//! The organization file on disk: a bounded read, and the one writer (an
//! atomic 0600 replace: a temp file beside it, written and fsynced, renamed
//! over the file, then the directory fsynced), plus what the broker holds
//! of it from the start ([`OrgFile`]).
//!
//! A crash at any point leaves the old file or the new one, never a torn
//! one (`tests/tests/organization.rs::a_writer_killed_mid_write_leaves_the_old_or_the_new_file`).
//! The shape and its checks are `config::organization`.

use crate::config::organization::{HarnessLevels, Organization};
use crate::error::Code;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The largest organization file the broker reads.
pub const MAX_BYTES: u64 = 1 << 20;

/// The file named by the boot key `organization`, and the harness levels
/// read from it at start.
#[derive(Debug, Clone)]
pub struct OrgFile {
    pub path: PathBuf,
    pub levels: HarnessLevels,
}

impl OrgFile {
    /// Reads the file at start: it must be there and valid, and its
    /// routes must pass against its own levels.
    pub fn load(path: &Path) -> Result<(OrgFile, Organization), Code> {
        let org = read(path)?;
        let levels = org.levels();
        org.check_routes(&levels)?;
        Ok((
            OrgFile {
                path: path.to_path_buf(),
                levels,
            },
            org,
        ))
    }

    /// The file as it is now.
    pub fn read(&self) -> Result<Organization, Code> {
        read(&self.path)
    }
}

/// Reads and checks the file: a regular file (not a symlink) of at most
/// [`MAX_BYTES`], owned by this user; else `organization-unavailable`, and
/// a file that does not parse or check `organization-invalid`.
pub fn read(path: &Path) -> Result<Organization, Code> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|_| Code::OrganizationUnavailable)?;
    let meta = f.metadata().map_err(|_| Code::OrganizationUnavailable)?;
    let uid = nix::unistd::geteuid().as_raw();
    if !meta.is_file() || meta.uid() != uid {
        return Err(Code::OrganizationUnavailable);
    }
    let mut bytes = Vec::new();
    f.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| Code::OrganizationUnavailable)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(Code::OrganizationInvalid);
    }
    let v: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|_| Code::OrganizationInvalid)?;
    Organization::from_json(v)
}

/// The temp file a write goes through: beside the file, so the rename
/// stays in one filesystem.
pub fn temp_path(path: &Path) -> Result<PathBuf, Code> {
    let name = path.file_name().ok_or(Code::OrganizationUnavailable)?;
    let mut tmp = std::ffi::OsString::from(".");
    tmp.push(name);
    tmp.push(".tmp");
    Ok(path.with_file_name(tmp))
}

/// Replaces the file with `org`, atomically: write a 0600 temp file beside
/// it and fsync it, rename it over the file, fsync the directory. A
/// failure before the rename answers `organization-unavailable` and leaves
/// the old file in place.
pub fn write(path: &Path, org: &Organization) -> Result<(), Code> {
    let mut text = serde_json::to_vec_pretty(org).map_err(|_| Code::OrganizationInvalid)?;
    text.push(b'\n');
    let tmp = temp_path(path)?;
    let dir = path.parent().ok_or(Code::OrganizationUnavailable)?;
    let fail = |_| Code::OrganizationUnavailable;
    // A temp file a crashed write left behind is ours to replace; a
    // symlink there is removed, never followed.
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail(e)),
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)
        .map_err(fail)?;
    let written = f.write_all(&text).and_then(|()| f.sync_all());
    drop(f);
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(e));
    }
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(e));
    }
    // The new file is in place: a failed directory sync is logged, not
    // answered as a failure the caller would take for "nothing changed".
    if std::fs::File::open(dir).and_then(|d| d.sync_all()).is_err() {
        tracing::warn!("organization file replaced, its directory not synced");
    }
    Ok(())
}
