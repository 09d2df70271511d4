//! The broker's clock: canonical millisecond UTC timestamps that strictly
//! increase across every row the broker writes, also after a reopen.

/// Hands out `YYYY-MM-DDTHH:mm:ss.sssZ` strings, each later than the last.
#[derive(Debug)]
pub struct Clock {
    last_ms: i64,
}

impl Clock {
    /// A clock that will never hand out a time at or before `floor_ms`.
    pub fn starting_after(floor_ms: i64) -> Clock {
        Clock { last_ms: floor_ms }
    }

    /// The next timestamp: now, or one millisecond past the last one during bursts.
    pub fn tick(&mut self) -> String {
        let now = now_ms();
        self.last_ms = if now > self.last_ms {
            now
        } else {
            self.last_ms + 1
        };
        format_ms(self.last_ms)
    }

    /// The last timestamp handed out, in milliseconds.
    pub fn last_ms(&self) -> i64 {
        self.last_ms
    }
}

pub use crate::time::{format_ms, now_ms, parse_canonical};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_increases() {
        let mut c = Clock::starting_after(now_ms() + 10_000);
        let a = c.tick();
        let b = c.tick();
        assert!(b > a, "{b} must sort after {a}");
        assert_eq!(parse_canonical(&a).map(format_ms), Some(a.clone()));
        assert_eq!(format_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_ms(1_709_251_199_999), "2024-02-29T23:59:59.999Z");
        assert_eq!(format_ms(253_402_300_799_999), "9999-12-31T23:59:59.999Z");
        for ms in [0i64, 951_782_400_000, 1_900_000_000_123, 4_102_444_800_000] {
            assert_eq!(parse_canonical(&format_ms(ms)), Some(ms));
        }
        assert_eq!(
            parse_canonical("2024-02-29T23:59:59.999Z"),
            Some(1_709_251_199_999)
        );
        for bad in [
            "2023-02-29T00:00:00.000Z",
            "2024-01-01T00:00:00Z",
            "2024-01-01 00:00:00.000Z",
            "2024-01-01T24:00:00.000Z",
            "2024-13-01T00:00:00.000Z",
        ] {
            assert_eq!(parse_canonical(bad), None, "{bad}");
        }
    }
}
