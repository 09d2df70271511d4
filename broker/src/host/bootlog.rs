//! Log lines held back until the boot is settled.
//!
//! A refused boot prints exactly one line on stderr, `{"error":CODE}`
//! (DESIGN.md), so a host can read it as the whole of stderr. Whatever the
//! broker logs before that point (the proof helper starting, a store check
//! failing) is held here when [`hold`] was called: a successful boot
//! [`release`]s it to stderr in order, a refused one drops it with the
//! process. Modes without a one-line contract (the control socket, the
//! demo) never hold.

use std::io::Write;
use std::sync::Mutex;

/// Most bytes held; later lines are dropped (a boot logs a few lines).
const MAX_HELD: usize = 64 * 1024;

/// `Some(lines)` while holding, `None` once lines go straight to stderr.
static HELD: Mutex<Option<Vec<u8>>> = Mutex::new(None);

/// From now until [`release`], log lines are held instead of written.
pub fn hold() {
    if let Ok(mut g) = HELD.lock() {
        g.get_or_insert_with(Vec::new);
    }
}

/// Writes the held lines to stderr and stops holding.
pub fn release() {
    let held = HELD.lock().ok().and_then(|mut g| g.take());
    if let Some(lines) = held {
        let _ = std::io::stderr().write_all(&lines);
    }
}

/// The log writer: held bytes while holding, stderr otherwise.
pub struct Writer;

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut g) = HELD.lock() {
            if let Some(held) = g.as_mut() {
                if held.len() + buf.len() <= MAX_HELD {
                    held.extend_from_slice(buf);
                }
                return Ok(buf.len());
            }
        }
        std::io::stderr().write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_lines_wait_for_release_and_then_pass_through() {
        hold();
        assert_eq!(Writer.write(b"one\n").ok(), Some(4));
        assert_eq!(
            HELD.lock().ok().and_then(|g| g.clone()),
            Some(b"one\n".to_vec())
        );
        release();
        assert!(HELD.lock().map(|g| g.is_none()).unwrap_or(false));
        // Released: nothing is held any more.
        assert_eq!(Writer.write(b"two\n").ok(), Some(4));
        assert!(HELD.lock().map(|g| g.is_none()).unwrap_or(false));
    }
}
