//! What the broker's in-process tests share: a private data root, and a
//! real `Core` on a real store in one, taking requests through
//! `handlers::dispatch` as the socket does once the caller is resolved.
//! Each test file that wants it says `mod common;`.

#![allow(dead_code)]

use mosaic_bus::config::BootConfig;
use mosaic_bus::core::{Caller, Core};
use mosaic_bus::error::Code;
use mosaic_bus::handlers::dispatch;
use mosaic_bus::store::root::BusDir;
use mosaic_bus::store::Store;
use serde_json::Value;
use std::sync::Arc;

/// A data root only we may enter (mode 0700, as the broker requires),
/// removed on drop.
pub fn private_root() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(
        d.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod");
    d
}

/// `private_root()` with the bus folder's lock taken in it.
pub fn private_bus() -> (tempfile::TempDir, BusDir) {
    let d = private_root();
    let bus = BusDir::acquire(d.path()).expect("acquire");
    (d, bus)
}

/// A `git` in `repo` that reads no system or global config and commits as
/// `author` (committer `test`), for a test's own setup of a repository.
pub fn git_in(repo: &std::path::Path, author: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new("git");
    cmd.current_dir(repo)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", repo)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", author)
        .env("GIT_AUTHOR_EMAIL", "a@example.invalid")
        .env("GIT_COMMITTER_NAME", "test")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid");
    cmd
}

/// A `Core` on a fresh store in a private data root; the lock is given
/// back on drop.
pub struct Inproc {
    _dir: tempfile::TempDir,
    pub bus: BusDir,
    pub core: Core,
}

impl Inproc {
    /// Boots `config` (a boot config without `dataRoot`: the private root
    /// is put in).
    pub fn boot(mut config: Value) -> Inproc {
        let (dir, bus) = private_bus();
        config["dataRoot"] = Value::from(dir.path().to_str().expect("utf-8"));
        let cfg = BootConfig::from_json(config).expect("config");
        let store = Store::open(&bus.db_path()).expect("store");
        let core = Core::new(store, Arc::new(cfg));
        Inproc {
            _dir: dir,
            bus,
            core,
        }
    }

    /// One request from `c`; `args` left out unless it is an object.
    pub fn call(&mut self, c: &Caller, verb: &str, args: Value) -> Result<Value, Code> {
        let args = match args {
            Value::Object(m) => Some(m),
            _ => None,
        };
        dispatch(&mut self.core, c, verb, args)
    }

    /// The result of a request that must succeed.
    pub fn ok(&mut self, c: &Caller, verb: &str, args: Value) -> Value {
        match self.call(c, verb, args.clone()) {
            Ok(v) => v,
            Err(e) => panic!("{verb} {args}: {e}"),
        }
    }
}

impl Drop for Inproc {
    fn drop(&mut self) {
        self.bus.release();
    }
}
