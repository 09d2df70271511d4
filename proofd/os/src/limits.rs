//! File-descriptor limits and the connection caps sized from them, shared
//! by the two daemons that accept local connections (`mosaic-bus`'s client
//! socket and `mosaic-leased`).
//!
//! Both raise their soft `RLIMIT_NOFILE` to the hard limit at start (the
//! soft limit is often 1,024 while the hard one is far higher), then size
//! how many connections they keep open from the soft limit in force:
//! [`connection_cap`] keeps `reserve` descriptors for everything that is not
//! a connection (the store, the proof helper, `/proc` reads, logs) and
//! allows `per_connection` descriptors to each one, up to a ceiling that
//! bounds memory (and, for the lease broker, threads).

/// `RLIMIT_NOFILE`'s soft and hard values, or `None` when it can't be read.
pub fn nofile() -> Option<(u64, u64)> {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).ok()
}

/// The most descriptors a process may have: `/proc/sys/fs/nr_open`
/// (an infinite hard limit still can't raise the soft one past it).
fn nr_open() -> u64 {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1024 * 1024)
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (or to `nr_open` when
/// the hard limit is infinite) and returns the soft limit in force after,
/// raised or not. Nothing here can fail the start: a limit that stays low
/// only makes the caps smaller.
pub fn raise_nofile() -> u64 {
    let Some((soft, hard)) = nofile() else {
        return 1024;
    };
    let target = if hard == libc::RLIM_INFINITY {
        nr_open()
    } else {
        hard
    };
    if soft >= target {
        return soft;
    }
    if nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, target, hard)
        .is_ok()
    {
        target
    } else {
        soft
    }
}

/// The soft `RLIMIT_NOFILE` in force now (1,024 when it can't be read).
pub fn soft_nofile() -> u64 {
    nofile().map(|(soft, _)| soft).unwrap_or(1024)
}

/// How many connections to keep open with `soft` descriptors: what is left
/// after `reserve`, divided by `per_connection`, between `floor` and
/// `ceiling`.
pub fn connection_cap(
    soft: u64,
    reserve: u64,
    per_connection: u64,
    floor: usize,
    ceiling: usize,
) -> usize {
    let spare = soft.saturating_sub(reserve) / per_connection.max(1);
    usize::try_from(spare)
        .unwrap_or(usize::MAX)
        .clamp(floor, ceiling)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_follow_the_limit_within_their_bounds() {
        assert_eq!(connection_cap(1024, 256, 2, 16, 8192), 384);
        assert_eq!(connection_cap(20000, 256, 2, 16, 8192), 8192);
        assert_eq!(connection_cap(100, 256, 2, 16, 8192), 16);
        assert_eq!(connection_cap(512, 64, 0, 16, 8192), 448);
    }

    #[test]
    fn raising_reaches_the_hard_limit() {
        let after = raise_nofile();
        let (soft, hard) = nofile().unwrap();
        assert_eq!(after, soft);
        if hard != libc::RLIM_INFINITY {
            assert_eq!(soft, hard);
        }
    }
}
