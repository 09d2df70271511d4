//! A thin VFS over SQLite's own `unix` VFS that hands each WAL append to the
//! kernel in one write instead of two per frame.
//!
//! Why: SQLite writes every WAL frame as two `pwrite`s (a 24-byte header,
//! then the page). A `message.send` commits about nine frames, so eighteen
//! small unaligned writes precede each COMMIT's fsync. On the virtual disks
//! this broker was measured on, a write costs about 5 µs, and an fsync after
//! many small writes costs more than after one write of the same bytes
//! (docs/performance.md). Gathering a transaction's frames and writing them
//! with one call saves those calls.
//!
//! What it changes, and what it does not:
//! - Only files SQLite opens as a WAL (`SQLITE_OPEN_WAL`) are wrapped; the
//!   database file, its shared-memory index and temporary files go straight
//!   to `unix`, which also keeps doing all locking.
//! - Appends that continue the pending run are held in memory (at most
//!   [`MAX_PENDING`] bytes) until the page of a commit frame (a frame header
//!   whose "database size after commit" field is not zero) has been
//!   appended: then the run is written at once. Every other operation on the
//!   WAL — the sync, a read, a size query, a truncate, a file control,
//!   close, or a write that does not continue the run — first writes the
//!   pending bytes, in order, and only then runs. So the file's contents as
//!   seen through any call are exactly what SQLite wrote, and a sync covers
//!   every byte written before it.
//! - Nothing becomes visible earlier or durable later than without the shim:
//!   every commit frame reaches the kernel before SQLite returns from
//!   writing it, so before SQLite syncs (synchronous=FULL) or publishes the
//!   commit in the WAL index, in any synchronous mode. A crash before that
//!   loses the same thing the kernel's page cache would: an unacknowledged
//!   transaction, which recovery ignores.
//! - A failed write surfaces as the failing call's error, and the pending
//!   bytes are dropped, as a failed `pwrite` leaves them unwritten.

use rusqlite::ffi;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

/// The name connections open the store with.
pub const NAME: &str = "mosaic-wal";
/// The same, as SQLite keeps it.
const NAME_C: &CStr = c"mosaic-wal";

/// Most bytes held before they are written anyway (a large transaction).
pub const MAX_PENDING: usize = 1 << 20;

/// Largest single write handed to `unix`, whose `pwrite` takes at most
/// 128 KiB − 1 bytes per call.
const MAX_WRITE: usize = 124 * 1024;

/// SQLite's `unix` VFS, which does the real work.
struct Vfs {
    real: *mut ffi::sqlite3_vfs,
}
// SAFETY: sqlite3_vfs objects are immutable once registered and SQLite
// itself calls them from any thread.
unsafe impl Send for Vfs {}
unsafe impl Sync for Vfs {}

static REGISTERED: OnceLock<Option<Vfs>> = OnceLock::new();

/// The run of appends not yet handed to the kernel.
#[derive(Default)]
struct Pending {
    offset: i64,
    bytes: Vec<u8>,
    /// The last append was a commit frame's header: its page comes next.
    commit_next: bool,
}

/// The size of a WAL frame header.
const FRAME_HEADER: usize = 24;

/// Whether `header` is a commit frame's header: bytes 4..8 hold the
/// database size after the commit, zero in every other frame.
fn is_commit_header(header: &[u8]) -> bool {
    header.len() == FRAME_HEADER && header[4..8] != [0, 0, 0, 0]
}

/// Our part of a wrapped WAL file; the `unix` file follows it in the same
/// allocation, at [`REAL_OFFSET`].
#[repr(C)]
struct Wrapped {
    base: ffi::sqlite3_file,
    pending: *mut Pending,
}

const REAL_OFFSET: usize = std::mem::size_of::<Wrapped>().next_multiple_of(16);

fn real_file(f: *mut ffi::sqlite3_file) -> *mut ffi::sqlite3_file {
    // SAFETY (of the callers' use): xOpen got at least REAL_OFFSET +
    // szOsFile(unix) bytes for every file of this VFS.
    f.cast::<u8>().wrapping_add(REAL_OFFSET).cast()
}

/// Registers the VFS once (not as the default); false if `unix` is missing.
pub fn register() -> bool {
    REGISTERED
        .get_or_init(|| {
            // SAFETY: sqlite3_vfs_find/register are thread-safe; the copy is
            // leaked so it outlives every connection, as SQLite requires.
            unsafe {
                let real = ffi::sqlite3_vfs_find(c"unix".as_ptr());
                if real.is_null() {
                    return None;
                }
                let mut ours: ffi::sqlite3_vfs = *real;
                ours.zName = NAME_C.as_ptr();
                ours.szOsFile = (REAL_OFFSET as c_int).checked_add((*real).szOsFile)?;
                ours.pNext = std::ptr::null_mut();
                ours.xOpen = Some(x_open);
                let ours = Box::into_raw(Box::new(ours));
                if ffi::sqlite3_vfs_register(ours, 0) != ffi::SQLITE_OK {
                    return None;
                }
                Some(Vfs { real })
            }
        })
        .is_some()
}

fn real_vfs() -> *mut ffi::sqlite3_vfs {
    match REGISTERED.get() {
        Some(Some(v)) => v.real,
        _ => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn x_open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    // SAFETY: SQLite calls xOpen with `file` pointing to szOsFile bytes
    // (REAL_OFFSET plus the unix file's size, set in `register`) and
    // `name`/`out_flags` valid for the call; `real` is the registered unix
    // VFS, checked non-null.
    unsafe {
        let real = real_vfs();
        if real.is_null() {
            return ffi::SQLITE_CANTOPEN;
        }
        let Some(open) = (*real).xOpen else {
            return ffi::SQLITE_CANTOPEN;
        };
        if flags & ffi::SQLITE_OPEN_WAL == 0 {
            // Not a WAL: the unix file itself, at the start of the allocation.
            return open(real, name, file, flags, out_flags);
        }
        let w = file.cast::<Wrapped>();
        (*w).base.pMethods = std::ptr::null();
        (*w).pending = std::ptr::null_mut();
        let rc = open(real, name, real_file(file), flags, out_flags);
        if rc != ffi::SQLITE_OK || (*real_file(file)).pMethods.is_null() {
            return if rc == ffi::SQLITE_OK {
                ffi::SQLITE_CANTOPEN
            } else {
                rc
            };
        }
        (*w).pending = Box::into_raw(Box::default());
        (*w).base.pMethods = &METHODS;
        ffi::SQLITE_OK
    }
}

/// The unix file's methods.
unsafe fn methods(f: *mut ffi::sqlite3_file) -> &'static ffi::sqlite3_io_methods {
    // SAFETY: callers pass a file of this VFS whose unix file at
    // `real_file(f)` opened successfully (x_open sets our methods only then),
    // so its `pMethods` points to the unix VFS's static methods.
    unsafe { &*(*real_file(f)).pMethods }
}

/// Calls the unix file's method `$m` with `$args`, or answers `$missing`
/// if it has none.
macro_rules! forward {
    ($f:expr, $m:ident($($arg:expr),*) or $missing:expr) => {
        match methods($f).$m {
            Some(m) => m(real_file($f), $($arg),*),
            None => $missing,
        }
    };
}

/// The same, after the pending run is written; a failed write is the answer.
macro_rules! flush_then {
    ($f:expr, $m:ident($($arg:expr),*) or $missing:expr) => {
        match flush($f) {
            ffi::SQLITE_OK => forward!($f, $m($($arg),*) or $missing),
            rc => rc,
        }
    };
}

/// Writes the pending run, if any; its bytes are dropped either way.
unsafe fn flush(f: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: `f` is a file of this VFS (see `methods`), so it starts with a
    // `Wrapped` whose `pending` is null or the box x_open leaked; only
    // SQLite's one thread using this file touches it.
    unsafe {
        let p = (*f.cast::<Wrapped>()).pending;
        if p.is_null() || (*p).bytes.is_empty() {
            return ffi::SQLITE_OK;
        }
        let Some(write) = methods(f).xWrite else {
            (*p).bytes.clear();
            (*p).commit_next = false;
            return ffi::SQLITE_IOERR_WRITE;
        };
        let mut rc = ffi::SQLITE_OK;
        let mut offset = (*p).offset;
        for chunk in (*p).bytes.chunks(MAX_WRITE) {
            // Both fit: chunks are at most MAX_WRITE bytes.
            let n = chunk.len() as c_int;
            rc = write(real_file(f), chunk.as_ptr().cast(), n, offset);
            if rc != ffi::SQLITE_OK {
                break;
            }
            offset += chunk.len() as i64;
        }
        (*p).bytes.clear();
        (*p).commit_next = false;
        if (*p).bytes.capacity() > MAX_PENDING {
            (*p).bytes.shrink_to(MAX_PENDING);
        }
        rc
    }
}

unsafe extern "C" fn x_write(
    f: *mut ffi::sqlite3_file,
    data: *const c_void,
    amt: c_int,
    offset: i64,
) -> c_int {
    // SAFETY: SQLite calls this method only on a file this VFS opened (x_open
    // installed METHODS after the unix file opened), so `f` is a live
    // `Wrapped` followed by the unix file, and the pointer arguments are valid
    // as the sqlite3_io_methods contract says.
    unsafe {
        let p = (*f.cast::<Wrapped>()).pending;
        let Ok(n) = usize::try_from(amt) else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        if !p.is_null() && n <= MAX_PENDING {
            // Whether this is the page of a commit frame whose header came last.
            let commit_page = (*p).commit_next;
            let run_end = (*p).offset.checked_add((*p).bytes.len() as i64);
            let continues = (*p).bytes.is_empty() || run_end == Some(offset);
            if !(continues && (*p).bytes.len() + n <= MAX_PENDING) {
                // Not an append to the run (or it would grow too big): the run
                // goes to the kernel first, and this write starts a new one.
                let rc = flush(f);
                if rc != ffi::SQLITE_OK {
                    return rc;
                }
            }
            if (*p).bytes.is_empty() {
                (*p).offset = offset;
            }
            let bytes = std::slice::from_raw_parts(data.cast::<u8>(), n);
            (*p).bytes.extend_from_slice(bytes);
            if commit_page {
                // The commit frame is complete: it goes to the kernel now.
                return flush(f);
            }
            (*p).commit_next = is_commit_header(bytes);
            return ffi::SQLITE_OK;
        }
        flush_then!(f, xWrite(data, amt, offset) or ffi::SQLITE_IOERR_WRITE)
    }
}

unsafe extern "C" fn x_close(f: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite calls this method only on a file this VFS opened (x_open
    // installed METHODS after the unix file opened), so `f` is a live
    // `Wrapped` followed by the unix file, and the pointer arguments are valid
    // as the sqlite3_io_methods contract says.
    unsafe {
        let rc = flush(f);
        let w = f.cast::<Wrapped>();
        if !(*w).pending.is_null() {
            drop(Box::from_raw((*w).pending));
            (*w).pending = std::ptr::null_mut();
        }
        let closed = forward!(f, xClose() or ffi::SQLITE_OK);
        (*w).base.pMethods = std::ptr::null();
        if rc != ffi::SQLITE_OK {
            rc
        } else {
            closed
        }
    }
}

unsafe extern "C" fn x_read(
    f: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amt: c_int,
    offset: i64,
) -> c_int {
    // SAFETY: SQLite calls this method only on a file this VFS opened (x_open
    // installed METHODS after the unix file opened), so `f` is a live
    // `Wrapped` followed by the unix file, and the pointer arguments are valid
    // as the sqlite3_io_methods contract says.
    unsafe {
        match flush(f) {
            ffi::SQLITE_OK => forward!(f, xRead(buf, amt, offset) or ffi::SQLITE_IOERR_READ),
            _ => ffi::SQLITE_IOERR_READ,
        }
    }
}

unsafe extern "C" fn x_truncate(f: *mut ffi::sqlite3_file, size: i64) -> c_int {
    // SAFETY: SQLite calls this method only on a file this VFS opened (x_open
    // installed METHODS after the unix file opened), so `f` is a live
    // `Wrapped` followed by the unix file, and the pointer arguments are valid
    // as the sqlite3_io_methods contract says.
    unsafe { flush_then!(f, xTruncate(size) or ffi::SQLITE_IOERR_TRUNCATE) }
}

unsafe extern "C" fn x_sync(f: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    // SAFETY: SQLite calls this method only on a file this VFS opened (x_open
    // installed METHODS after the unix file opened), so `f` is a live
    // `Wrapped` followed by the unix file, and the pointer arguments are valid
    // as the sqlite3_io_methods contract says.
    unsafe { flush_then!(f, xSync(flags) or ffi::SQLITE_IOERR_FSYNC) }
}

unsafe extern "C" fn x_file_size(f: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    // SAFETY: SQLite calls this method only on a file this VFS opened (x_open
    // installed METHODS after the unix file opened), so `f` is a live
    // `Wrapped` followed by the unix file, and the pointer arguments are valid
    // as the sqlite3_io_methods contract says.
    unsafe { flush_then!(f, xFileSize(size) or ffi::SQLITE_IOERR_FSTAT) }
}

unsafe extern "C" fn x_lock(f: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    // SAFETY: SQLite calls this method only on a file this VFS opened (x_open
    // installed METHODS after the unix file opened), so `f` is a live
    // `Wrapped` followed by the unix file, and the pointer arguments are valid
    // as the sqlite3_io_methods contract says.
    unsafe { forward!(f, xLock(level) or ffi::SQLITE_OK) }
}

unsafe extern "C" fn x_unlock(f: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    // SAFETY: SQLite calls this method only on a file this VFS opened (x_open
    // installed METHODS after the unix file opened), so `f` is a live
    // `Wrapped` followed by the unix file, and the pointer arguments are valid
    // as the sqlite3_io_methods contract says.
    unsafe { forward!(f, xUnlock(level) or ffi::SQLITE_OK) }
}

unsafe extern "C" fn x_check_reserved_lock(f: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    // SAFETY: SQLite calls this method only on a file this VFS opened (x_open
    // installed METHODS after the unix file opened), so `f` is a live
    // `Wrapped` followed by the unix file, and the pointer arguments are valid
    // as the sqlite3_io_methods contract says.
    unsafe {
        forward!(f, xCheckReservedLock(out) or {
            *out = 0;
            ffi::SQLITE_OK
        })
    }
}

unsafe extern "C" fn x_file_control(
    f: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    // SAFETY: SQLite calls this method only on a file this VFS opened (x_open
    // installed METHODS after the unix file opened), so `f` is a live
    // `Wrapped` followed by the unix file, and the pointer arguments are valid
    // as the sqlite3_io_methods contract says.
    unsafe { flush_then!(f, xFileControl(op, arg) or ffi::SQLITE_NOTFOUND) }
}

unsafe extern "C" fn x_sector_size(f: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite calls this method only on a file this VFS opened (x_open
    // installed METHODS after the unix file opened), so `f` is a live
    // `Wrapped` followed by the unix file, and the pointer arguments are valid
    // as the sqlite3_io_methods contract says.
    unsafe { forward!(f, xSectorSize() or 4096) }
}

unsafe extern "C" fn x_device_characteristics(f: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite calls this method only on a file this VFS opened (x_open
    // installed METHODS after the unix file opened), so `f` is a live
    // `Wrapped` followed by the unix file, and the pointer arguments are valid
    // as the sqlite3_io_methods contract says.
    unsafe { forward!(f, xDeviceCharacteristics() or 0) }
}

unsafe extern "C" fn x_shm_map(
    f: *mut ffi::sqlite3_file,
    region: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: SQLite calls this method only on a file this VFS opened (x_open
    // installed METHODS after the unix file opened), so `f` is a live
    // `Wrapped` followed by the unix file, and the pointer arguments are valid
    // as the sqlite3_io_methods contract says.
    unsafe { forward!(f, xShmMap(region, size, extend, out) or ffi::SQLITE_IOERR_SHMMAP) }
}

unsafe extern "C" fn x_shm_lock(
    f: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    // SAFETY: SQLite calls this method only on a file this VFS opened (x_open
    // installed METHODS after the unix file opened), so `f` is a live
    // `Wrapped` followed by the unix file, and the pointer arguments are valid
    // as the sqlite3_io_methods contract says.
    unsafe { forward!(f, xShmLock(offset, n, flags) or ffi::SQLITE_IOERR_SHMLOCK) }
}

unsafe extern "C" fn x_shm_barrier(f: *mut ffi::sqlite3_file) {
    // SAFETY: SQLite calls this method only on a file this VFS opened (x_open
    // installed METHODS after the unix file opened), so `f` is a live
    // `Wrapped` followed by the unix file, and the pointer arguments are valid
    // as the sqlite3_io_methods contract says.
    unsafe { forward!(f, xShmBarrier() or ()) }
}

unsafe extern "C" fn x_shm_unmap(f: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    // SAFETY: SQLite calls this method only on a file this VFS opened (x_open
    // installed METHODS after the unix file opened), so `f` is a live
    // `Wrapped` followed by the unix file, and the pointer arguments are valid
    // as the sqlite3_io_methods contract says.
    unsafe { forward!(f, xShmUnmap(delete) or ffi::SQLITE_OK) }
}

unsafe extern "C" fn x_fetch(
    f: *mut ffi::sqlite3_file,
    offset: i64,
    amt: c_int,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: SQLite calls this method only on a file this VFS opened (x_open
    // installed METHODS after the unix file opened), so `f` is a live
    // `Wrapped` followed by the unix file, and the pointer arguments are valid
    // as the sqlite3_io_methods contract says.
    unsafe {
        flush_then!(f, xFetch(offset, amt, out) or {
            *out = std::ptr::null_mut();
            ffi::SQLITE_OK
        })
    }
}

unsafe extern "C" fn x_unfetch(f: *mut ffi::sqlite3_file, offset: i64, p: *mut c_void) -> c_int {
    // SAFETY: SQLite calls this method only on a file this VFS opened (x_open
    // installed METHODS after the unix file opened), so `f` is a live
    // `Wrapped` followed by the unix file, and the pointer arguments are valid
    // as the sqlite3_io_methods contract says.
    unsafe { forward!(f, xUnfetch(offset, p) or ffi::SQLITE_OK) }
}

/// Version 3 methods: the unix VFS's files have all of them.
static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved_lock),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device_characteristics),
    xShmMap: Some(x_shm_map),
    xShmLock: Some(x_shm_lock),
    xShmBarrier: Some(x_shm_barrier),
    xShmUnmap: Some(x_shm_unmap),
    xFetch: Some(x_fetch),
    xUnfetch: Some(x_unfetch),
};

#[cfg(test)]
mod tests {
    #[test]
    fn both_spellings_of_the_name_agree() {
        assert_eq!(super::NAME_C.to_str(), Ok(super::NAME));
    }

    #[test]
    fn only_a_frame_header_with_a_commit_size_is_a_commit_header() {
        let mut h = [0u8; super::FRAME_HEADER];
        h[3] = 7; // page number 7
        assert!(!super::is_commit_header(&h));
        h[7] = 9; // database size 9 pages after commit
        assert!(super::is_commit_header(&h));
        assert!(!super::is_commit_header(&h[..20]), "not a frame header");
        assert!(!super::is_commit_header(&[1u8; 4096]), "a page");
    }
}
