//! The `mosaic-bus` process's own environment: a credential handed to the
//! broker in a variable leaves it once read.
//!
//! `credentials.rs` reads an environment reference once, at boot. In the
//! `mosaic-bus` binary ([`own`] called first thing in `main`) the value is
//! then taken out: out of the live environment, so no child the broker
//! starts later inherits it (the proof helper gets an empty environment
//! anyway, `mosaic_proofd::proof::client`), and out of the block the
//! kernel shows as `/proc/<pid>/environ` (the bytes the kernel placed at
//! exec, which removing a variable leaves where they were: they are
//! overwritten with zeros). It is kept in memory here instead, so a later
//! boot of the same process (control mode) finds it again.
//!
//! An embedding host (`runtime::start_broker` in its own process) never
//! calls [`own`]: its environment is its own, and is only read.
//!
//! Threads: the environment is changed at a boot, not before any thread
//! exists (the boot config names the variables, and it arrives on the host
//! channel after the signal thread started). The threads there are then
//! the signal thread (blocked reading its pipe), in control mode the accept
//! thread (blocked in `accept`), and the boot's own: none reads the
//! environment. Rust's own readers take std's environment lock, which
//! `remove_var` takes too; glibc's `unsetenv` only moves pointers within
//! the `environ` array and frees nothing, so even a C reader racing it
//! would see a whole string or none.

use std::collections::{HashMap, HashSet};
use std::ffi::{CString, OsString};
use std::sync::{Mutex, OnceLock};

/// The addresses of the values of the environment the process started
/// with (set by [`own`]): only those bytes are ever overwritten.
static INITIAL: OnceLock<HashSet<usize>> = OnceLock::new();

/// Variables taken out, by name, with their values.
static TAKEN: Mutex<Option<HashMap<String, OsString>>> = Mutex::new(None);

/// Marks the environment as the broker's own: from now on a credential
/// read from it is taken out (see the module's notes). Call once, first
/// in `main`, before any thread and before anything sets a variable.
pub fn own() {
    let mut initial = HashSet::new();
    for (name, _) in std::env::vars_os() {
        if let Some(at) = CString::new(name.into_encoded_bytes())
            .ok()
            .and_then(|n| value_at(&n))
        {
            initial.insert(at);
        }
    }
    let _ = INITIAL.set(initial);
}

/// Where the live environment holds `name`'s value, if it holds it.
fn value_at(name: &CString) -> Option<usize> {
    // SAFETY: `name` is NUL-terminated; getenv only reads the environment,
    // and the pointer is looked at as a number, never followed here.
    let p = unsafe { libc::getenv(name.as_ptr()) };
    (!p.is_null()).then_some(p as usize)
}

/// A credential variable's value, as [`own`] left the process: read and
/// taken out (or found where an earlier boot took it), or only read when
/// the environment is not the broker's. `name` is a config's variable name
/// (upper-case letters, digits, `_`: `config::business`).
pub fn credential(name: &str) -> Option<OsString> {
    let Some(initial) = INITIAL.get() else {
        return std::env::var_os(name);
    };
    let mut taken = TAKEN.lock().unwrap_or_else(|p| p.into_inner());
    let taken = taken.get_or_insert_with(HashMap::new);
    if let Some(v) = taken.get(name) {
        return Some(v.clone());
    }
    let value = std::env::var_os(name)?;
    let well_formed = !name.is_empty() && !name.contains(['=', '\0']);
    if !well_formed {
        return Some(value);
    }
    let at = CString::new(name)
        .ok()
        .and_then(|n| value_at(&n))
        .filter(|at| initial.contains(at));
    std::env::remove_var(name);
    if let Some(at) = at {
        let len = value.as_encoded_bytes().len();
        // SAFETY: `at` is where the kernel put this variable's value at
        // exec (it was among the initial values `own` saw, and still the
        // live one just now), inside the process's own writable initial
        // stack block, `len` bytes long before its NUL. The variable has
        // just been removed, so nothing in the process refers to those
        // bytes any more; only the kernel reads them, for
        // `/proc/<pid>/environ`.
        unsafe { std::ptr::write_bytes(at as *mut u8, 0, len) };
    }
    taken.insert(name.to_string(), value.clone());
    Some(value)
}
