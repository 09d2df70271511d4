//! The data root and `bus/`: ownership, modes, symlink refusal and the
//! exclusive writer lock, which nothing ever reclaims.

use crate::error::Code;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// File names under `<dataRoot>/bus/`.
pub const BUS_DIR: &str = "bus";
pub const DB_FILE: &str = "bus.sqlite";
pub const LOCK_FILE: &str = "writer.lock";
pub const SOCKET_FILE: &str = "bus.sock";
/// The seals over the store's evidence (`docs/seals.md`).
pub const SEALS_FILE: &str = "seals.sqlite";

/// `bus/` with the writer lock held. Dropping it does not remove the lock:
/// only an orderly close does ([`BusDir::release`]), so a crash leaves it.
#[derive(Debug)]
pub struct BusDir {
    pub dir: PathBuf,
    lock_ino: u64,
}

fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Checks an existing path is not a symlink, has the given file type, is owned
/// by us, and grants nothing to group or others.
pub fn check_private(path: &Path, want_dir: bool) -> Result<bool, Code> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(_) => Err(Code::UnsafePath),
        Ok(md) => {
            let ft = md.file_type();
            let type_ok = if want_dir { ft.is_dir() } else { ft.is_file() };
            if ft.is_symlink() || !type_ok || md.uid() != euid() || md.mode() & 0o077 != 0 {
                return Err(Code::UnsafePath);
            }
            Ok(true)
        }
    }
}

/// `dataRoot` must be an absolute path to an existing directory (not a
/// symlink) owned by us: `data-root` otherwise.
pub fn check_data_root(data_root: &Path) -> Result<(), Code> {
    if !data_root.is_absolute() {
        return Err(Code::DataRoot);
    }
    let md = fs::symlink_metadata(data_root).map_err(|_| Code::DataRoot)?;
    if !md.file_type().is_dir() || md.uid() != euid() {
        return Err(Code::DataRoot);
    }
    Ok(())
}

impl BusDir {
    /// Validates `dataRoot`, creates or checks `bus/`, and takes `writer.lock`.
    pub fn acquire(data_root: &Path) -> Result<BusDir, Code> {
        check_data_root(data_root)?;
        let dir = data_root.join(BUS_DIR);
        if !check_private(&dir, true)? {
            fs::DirBuilder::new()
                .mode(0o700)
                .create(&dir)
                .map_err(|_| Code::UnsafePath)?;
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))
                .map_err(|_| Code::UnsafePath)?;
        }
        let lock_path = dir.join(LOCK_FILE);
        let mut lock = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&lock_path)
            .map_err(|e| {
                // A lock left by a broker is a regular file (whatever its
                // mode or owner); a symlink or anything else there is not a
                // lock but an unsafe path, as everywhere else under `bus/`.
                let left_by_a_broker =
                    fs::symlink_metadata(&lock_path).is_ok_and(|md| md.file_type().is_file());
                if e.kind() == std::io::ErrorKind::AlreadyExists && left_by_a_broker {
                    Code::WriterLocked
                } else {
                    Code::UnsafePath
                }
            })?;
        let _ = writeln!(lock, "{}", std::process::id());
        let _ = lock.sync_all();
        let lock_ino = lock.metadata().map(|m| m.ino()).unwrap_or(0);
        Ok(BusDir { dir, lock_ino })
    }

    pub fn db_path(&self) -> PathBuf {
        self.dir.join(DB_FILE)
    }

    pub fn socket_path(&self) -> PathBuf {
        self.dir.join(SOCKET_FILE)
    }

    pub fn seals_path(&self) -> PathBuf {
        self.dir.join(SEALS_FILE)
    }

    /// Removes the socket and the lock after an orderly close. The lock is
    /// removed only if it is still the file this broker created.
    pub fn release(&self) {
        let _ = fs::remove_file(self.socket_path());
        self.release_lock();
    }

    /// Removes only the lock (if still ours): a refused start, which never
    /// bound the socket, leaves whatever is at `bus.sock` as it found it.
    pub fn release_lock(&self) {
        let lock_path = self.dir.join(LOCK_FILE);
        if let Ok(md) = fs::symlink_metadata(&lock_path) {
            if md.ino() == self.lock_ino {
                let _ = fs::remove_file(&lock_path);
            }
        }
    }
}
