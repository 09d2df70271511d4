//! EOF-framed single requests: one JSON object, one newline, then the client
//! half-closes. Bounded by `FRAME_MAX` bytes and the connection deadline.

use super::code::Code;
use std::io::{ErrorKind, Read};
use std::os::unix::net::UnixStream;
use std::time::Instant;

/// Largest frame, newline included.
pub const FRAME_MAX: usize = 64 * 1024;

/// Read exactly one newline-terminated frame followed by EOF. Returns the
/// bytes before the newline.
pub fn read_frame(mut stream: &UnixStream, deadline: Instant) -> Result<Vec<u8>, Code> {
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    let mut chunk = [0u8; 8192];
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Err(Code::DeadlineExceeded);
        }
        stream
            .set_read_timeout(Some(deadline - now))
            .map_err(|_| Code::Internal)?;
        let n = match stream.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(Code::DeadlineExceeded)
            }
            Err(_) => return Err(Code::UnterminatedFrame),
        };
        if n == 0 {
            // EOF: valid only right after the one newline.
            return match buf.iter().position(|&b| b == b'\n') {
                Some(i) if i + 1 == buf.len() => {
                    buf.truncate(i);
                    Ok(buf)
                }
                Some(_) => Err(Code::MultipleFrames),
                None => Err(Code::UnterminatedFrame),
            };
        }
        let got = chunk.get(..n).ok_or(Code::Internal)?;
        let had_newline = buf.contains(&b'\n');
        if had_newline {
            // Anything after the newline, at once or later, is a second frame.
            return Err(Code::MultipleFrames);
        }
        buf.extend_from_slice(got);
        if let Some(i) = buf.iter().position(|&b| b == b'\n') {
            if i + 1 != buf.len() {
                return Err(Code::MultipleFrames);
            }
        }
        if buf.len() > FRAME_MAX {
            return Err(Code::FrameTooLarge);
        }
    }
}
