//! JSON's safe integers: the range a number survives a round trip through a
//! JavaScript host unchanged (`Number.MAX_SAFE_INTEGER`). Ids echoed back,
//! process start times and the lease broker's generations stay inside it.

/// The largest safe integer, 2^53 - 1.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// True when `n` is a safe integer (either sign).
pub const fn is_safe_i64(n: i64) -> bool {
    n.unsigned_abs() <= MAX_SAFE_INTEGER
}

/// True when `n` is a safe integer.
pub const fn is_safe_u64(n: u64) -> bool {
    n <= MAX_SAFE_INTEGER
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_edges() {
        assert_eq!(MAX_SAFE_INTEGER, 9_007_199_254_740_991);
        assert!(is_safe_i64(9_007_199_254_740_991));
        assert!(is_safe_i64(-9_007_199_254_740_991));
        assert!(!is_safe_i64(9_007_199_254_740_992));
        assert!(!is_safe_i64(-9_007_199_254_740_992));
        assert!(!is_safe_i64(i64::MIN));
        assert!(is_safe_u64(MAX_SAFE_INTEGER));
        assert!(!is_safe_u64(MAX_SAFE_INTEGER + 1));
    }
}
