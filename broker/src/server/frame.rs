//! Bounded framing: one JSON line per connection, read under a size cap and
//! a deadline. No verb handler ever sees bytes.

use crate::error::Code;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// The request cap (newline included), the save verb's larger cap and the
/// frame deadline, from the wire crate.
pub use mosaic_wire::limits::{
    FRAME_DEADLINE, REQUEST_MAX as MAX_REQUEST, SAVE_REQUEST_MAX as MAX_SAVE_REQUEST,
};

/// Reads one frame: the bytes before the first newline. Refuses a frame
/// that is too large, not finished within the deadline, ended by EOF, or
/// followed by bytes already received.
///
/// A frame may pass `max` (newline included) up to `max_large` only to be
/// judged by its verb afterwards (the one verb allowed a larger envelope,
/// [`mosaic_wire::limits::SAVE_VERB`]: the caller checks). Once past `max`,
/// a frame that ends badly (EOF, the deadline) is `request-too-large`: it
/// was over every other verb's cap already.
pub async fn read_frame<R: AsyncReadExt + Unpin>(
    r: &mut R,
    max: usize,
    max_large: usize,
    deadline: Duration,
) -> Result<Vec<u8>, Code> {
    let over = |buf: &Vec<u8>, code: Code| {
        if buf.len() >= max {
            Code::RequestTooLarge
        } else {
            code
        }
    };
    let mut buf = Vec::with_capacity(1024);
    let work = async {
        loop {
            // Up to 8 KiB per read, straight into the buffer: no chunk array
            // in the future (it would be copied whenever the task moves).
            let start = buf.len();
            buf.reserve(8192);
            let room = buf.capacity() - start;
            let n = (&mut *r)
                .take(room.min(8192) as u64)
                .read_buf(&mut buf)
                .await
                .map_err(|_| over(&buf, Code::InvalidRequest))?;
            if n == 0 {
                return Err(over(&buf, Code::InvalidRequest));
            }
            if let Some(pos) = buf[start..].iter().position(|&b| b == b'\n') {
                let end = start + pos;
                if end + 1 > max_large {
                    return Err(Code::RequestTooLarge);
                }
                if buf.len() > end + 1 {
                    return Err(Code::InvalidRequest);
                }
                buf.truncate(end);
                return Ok(());
            }
            if buf.len() >= max_large {
                return Err(Code::RequestTooLarge);
            }
        }
    };
    match tokio::time::timeout(deadline, work).await {
        Ok(Ok(())) => Ok(buf),
        Ok(Err(c)) => Err(c),
        Err(_) => Err(over(&buf, Code::RequestTimeout)),
    }
}
