//! Random identifiers: capabilities (256-bit, base64url) and record ids (UUID v4).

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

/// A fresh UUID v4 in its lowercase hyphenated form.
pub fn uuid() -> String {
    let mut b = random::<16>();
    b[6] = (b[6] & 0x0f) | 0x40;
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

#[cfg(test)]
mod tests {
    #[test]
    fn shapes() {
        let c = super::capability();
        assert_eq!(c.len(), 43);
        assert_ne!(c, super::capability());
        assert!(super::is_uuid(&super::uuid()));
    }
}
