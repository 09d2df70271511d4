//! Identifiers: the random ones made here (capabilities, 256-bit base64url;
//! record ids, UUID v7) and the task refs recognised here.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

fn random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    // The OS RNG failing is not recoverable for a security component.
    if getrandom::getrandom(&mut b).is_err() {
        tracing::error!(code = "rng-failed", "the OS random number generator failed");
        std::process::abort();
    }
    b
}

/// A fresh 256-bit capability, base64url without padding (43 characters).
pub fn capability() -> String {
    URL_SAFE_NO_PAD.encode(random::<32>())
}

/// A store's id (`meta.store_id`): 128 bits from the OS RNG, lowercase hex.
pub fn store_id() -> String {
    random::<16>().iter().map(|b| format!("{b:02x}")).collect()
}

/// 16 bytes from the OS RNG, drawn 512 at a time per thread: record ids are
/// made on the writer thread, two per message, and one `getrandom` call per
/// id was a system call per id. (Capabilities draw theirs directly.)
fn random_16() -> [u8; 16] {
    use std::cell::RefCell;
    thread_local! {
        static POOL: RefCell<([u8; 512], usize)> = const { RefCell::new(([0u8; 512], 512)) };
    }
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        if p.1 + 16 > p.0.len() {
            p.0 = random::<512>();
            p.1 = 0;
        }
        let at = p.1;
        let mut out = [0u8; 16];
        out.copy_from_slice(&p.0[at..at + 16]);
        // Handed-out bytes are wiped, so they are never given out twice.
        p.0[at..at + 16].fill(0);
        p.1 = at + 16;
        out
    })
}

/// A fresh UUID v7 (RFC 9562) in its lowercase hyphenated form: 48 bits of
/// Unix milliseconds, then 74 random bits from the OS RNG.
///
/// Time-ordered rather than v4's all-random because every id goes into a
/// UNIQUE index: random keys put each new row in a different leaf page of
/// `messages.id` and `events.id` (two more pages written to the WAL per
/// request, and per request of a group commit), while ids made in the same
/// millisecond share the rightmost leaves. The creation time the id reveals
/// is the row's `at` anyway.
pub fn uuid() -> String {
    let mut b = random_16();
    let ms = u64::try_from(crate::time::now_ms()).unwrap_or(0);
    b[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
    b[6] = (b[6] & 0x0f) | 0x70;
    b[8] = (b[8] & 0x3f) | 0x80;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(36);
    for (i, x) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(char::from(HEX[usize::from(x >> 4)]));
        s.push(char::from(HEX[usize::from(x & 0x0f)]));
    }
    s
}

/// True for a lowercase hyphenated UUID.
pub fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, &c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(&c),
        })
}

/// A task ref, the one form every path accepts: `vikunja:<project>/<task>`,
/// both decimal ids of 1 to 18 digits (`vikunja:3/41`). The task tracker
/// is Vikunja; the sync records its tasks under this form and every verb,
/// host op and trail looks them up by it.
pub fn is_task_ref(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("vikunja:") else {
        return false;
    };
    let Some((project, task)) = rest.split_once('/') else {
        return false;
    };
    let digits = |x: &str| !x.is_empty() && x.len() <= 18 && x.bytes().all(|b| b.is_ascii_digit());
    digits(project) && digits(task)
}

#[cfg(test)]
mod tests {
    #[test]
    fn shapes() {
        let c = super::capability();
        assert_eq!(c.len(), 43);
        assert_ne!(c, super::capability());
        assert!(super::is_uuid(&super::uuid()));
        let many: std::collections::HashSet<String> = (0..100).map(|_| super::uuid()).collect();
        assert_eq!(many.len(), 100);
        assert!(many.iter().all(|u| super::is_uuid(u)));
        // Version 7, RFC variant, and the Unix milliseconds first.
        let before = crate::time::now_ms();
        let a = super::uuid();
        let after = crate::time::now_ms();
        assert_eq!(&a[14..15], "7");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"));
        let ms = i64::from_str_radix(&a[..13].replace('-', ""), 16).unwrap();
        assert!((before..=after).contains(&ms), "{a}: {before}..={after}");
    }

    #[test]
    fn task_refs() {
        for ok in ["vikunja:3/41", "vikunja:12/1", "vikunja:0/0"] {
            assert!(super::is_task_ref(ok), "{ok}");
        }
        for bad in [
            "vikunja:3",
            "vikunja:/41",
            "vikunja:3/",
            "vikunja:a/1",
            "vikunja:3/4a",
            "vikunja:3/41/2",
            "vikunja:1234567890123456789/1",
            "Vikunja:3/41",
            "jira:3/41",
            "gitea:3/41",
            ":3/41",
            "3/41",
            "",
        ] {
            assert!(!super::is_task_ref(bad), "{bad}");
        }
    }

    /// Many UUIDs each keep the fixed bits (version 7, the RFC variant)
    /// and the random ones beside them: the nibble after the version and
    /// the variant's two random bits take more than one value. A store id
    /// is 32 lowercase hex digits, fresh each time; `is_uuid` takes no other
    /// form. (`cargo mutants`:
    /// docs/testing.md.)
    #[test]
    fn uuids_keep_their_fixed_bits_and_their_random_ones() {
        let many: Vec<String> = (0..200).map(|_| super::uuid()).collect();
        for u in &many {
            assert_eq!(&u[14..15], "7", "{u}");
            assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"), "{u}");
        }
        let values = |i: usize| {
            many.iter()
                .map(|u| u[i..i + 1].to_string())
                .collect::<std::collections::HashSet<_>>()
                .len()
        };
        assert!(values(15) > 1, "the nibble after the version");
        assert!(values(19) > 1, "the variant's random bits");
        let (a, b) = (super::store_id(), super::store_id());
        assert_eq!(a.len(), 32, "{a}");
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)),
            "{a}"
        );
        assert_ne!(a, b);
        // `is_uuid` takes exactly that form.
        let good = super::uuid();
        assert!(super::is_uuid(&good));
        for bad in [
            String::new(),
            good[..35].to_string(),
            format!("{good}0"),
            "0189ABCD-0000-7000-8000-000000000000".to_string(),
            good.replace('-', "0"),
            "g".repeat(36),
        ] {
            assert!(!super::is_uuid(&bad), "{bad}");
        }
    }
}
