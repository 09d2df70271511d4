//! Bounded framing: one JSON line per connection, read under a size cap and
//! a deadline. No verb handler ever sees bytes.

use crate::error::Code;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// The request cap (newline included), the save verb's larger cap and the
/// frame deadline, from the wire crate.
pub use mosaic_wire::limits::{
    FRAME_DEADLINE, REQUEST_MAX as MAX_REQUEST, SAVE_REQUEST_MAX as MAX_SAVE_REQUEST,
};

/// How many frames may be past the ordinary cap at once, across every
/// connection. Only the human's editor sends such frames, one save at a
/// time, so a few slots are plenty; the bound keeps a flood of large frames
/// to a few MiB instead of the save cap times the connection cap. A frame
/// takes a slot only once its peer was let past the cap (the caller's
/// `admit`: the server lets only the human shim's process through), so a
/// process that is no shim can't take them (issue 29).
pub const LARGE_FRAME_SLOTS: usize = 8;

static LARGE_FRAMES: AtomicUsize = AtomicUsize::new(0);

/// A slot for one frame past the ordinary cap; given back when dropped,
/// which is when the request that carried the frame is done with it.
#[derive(Debug)]
pub struct LargeSlot(());

impl LargeSlot {
    fn take() -> Option<LargeSlot> {
        LARGE_FRAMES
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < LARGE_FRAME_SLOTS).then_some(n + 1)
            })
            .ok()
            .map(|_| LargeSlot(()))
    }
}

impl Drop for LargeSlot {
    fn drop(&mut self) {
        LARGE_FRAMES.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One frame's bytes, and its large-frame slot when it passed the
/// ordinary cap (hold the frame and the slot together).
#[derive(Debug)]
pub struct Frame {
    pub bytes: Vec<u8>,
    pub slot: Option<LargeSlot>,
}

/// Reads one frame: the bytes before the first newline. Refuses a frame
/// that is too large, not finished within the deadline, ended by EOF, or
/// followed by bytes already received.
///
/// A frame may pass `max` (newline included) up to `max_large` only to be
/// judged by its verb afterwards (the one verb allowed a larger envelope,
/// [`mosaic_wire::limits::SAVE_VERB`]: the caller checks). Once past `max`,
/// a frame that ends badly (EOF, the deadline) is `request-too-large`: it
/// was over every other verb's cap already. Growing past `max` is first
/// put to `admit` (once; the read waits for its answer, within the
/// deadline), then takes one of the [`LARGE_FRAME_SLOTS`]; refused, or
/// with no slot free, the frame is `request-too-large` at once.
pub async fn read_frame<R, A, F>(
    r: &mut R,
    max: usize,
    max_large: usize,
    deadline: Duration,
    admit: A,
) -> Result<Frame, Code>
where
    R: AsyncReadExt + Unpin,
    A: FnOnce() -> F,
    F: std::future::Future<Output = bool>,
{
    let over = |buf: &Vec<u8>, code: Code| {
        if buf.len() >= max {
            Code::RequestTooLarge
        } else {
            code
        }
    };
    let mut buf = Vec::with_capacity(1024);
    let mut slot = None;
    let mut admit = Some(admit);
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
            if buf.len() >= max && slot.is_none() {
                let admitted = match admit.take() {
                    Some(admit) => admit().await,
                    None => false,
                };
                if !admitted {
                    return Err(Code::RequestTooLarge);
                }
                slot = Some(LargeSlot::take().ok_or(Code::RequestTooLarge)?);
            }
        }
    };
    match tokio::time::timeout(deadline, work).await {
        Ok(Ok(())) => Ok(Frame { bytes: buf, slot }),
        Ok(Err(c)) => Err(c),
        Err(_) => Err(over(&buf, Code::RequestTimeout)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    const MAX: usize = 64 * 1024;
    const LARGE: usize = 1024 * 1024 + MAX;
    const LONG: Duration = Duration::from_secs(60);

    async fn yes() -> bool {
        true
    }

    /// The slots are process-wide: the tests that count them take turns.
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    #[tokio::test(flavor = "current_thread")]
    async fn frames_past_the_ordinary_cap_share_a_bounded_number_of_slots() {
        let _serial = SERIAL.lock().await;
        let pending = vec![b'p'; MAX + 8192];
        // Eight unfinished frames past the cap take every slot.
        let mut writers = Vec::new();
        let mut readers = Vec::new();
        for _ in 0..LARGE_FRAME_SLOTS {
            let (mut w, mut r) = tokio::io::duplex(4 * MAX);
            w.write_all(&pending).await.unwrap();
            writers.push(w);
            readers.push(tokio::spawn(async move {
                read_frame(&mut r, MAX, LARGE, LONG, yes)
                    .await
                    .map(|f| f.bytes.len())
            }));
        }
        while LARGE_FRAMES.load(Ordering::Acquire) < LARGE_FRAME_SLOTS {
            tokio::task::yield_now().await;
        }
        // A ninth is too large as soon as it passes the cap, though its
        // writer is still open and it is under the save verb's cap.
        let (mut w, mut r) = tokio::io::duplex(4 * MAX);
        w.write_all(&pending).await.unwrap();
        assert_eq!(
            read_frame(&mut r, MAX, LARGE, LONG, yes).await.unwrap_err(),
            Code::RequestTooLarge
        );
        // A frame under the cap needs no slot.
        let (mut w2, mut r2) = tokio::io::duplex(4 * MAX);
        w2.write_all(b"{}\n").await.unwrap();
        let small = read_frame(&mut r2, MAX, LARGE, LONG, yes).await.unwrap();
        assert_eq!(
            (small.bytes.as_slice(), small.slot.is_none()),
            (&b"{}"[..], true)
        );
        // One unfinished frame ends (its writer hangs up): its slot comes
        // back, and a finished large frame takes it, held with its bytes.
        drop(writers.remove(0));
        assert_eq!(
            readers.remove(0).await.unwrap().unwrap_err(),
            Code::RequestTooLarge
        );
        let (mut w3, mut r3) = tokio::io::duplex(4 * MAX);
        w3.write_all(&pending).await.unwrap();
        w3.write_all(b"\n").await.unwrap();
        let big = read_frame(&mut r3, MAX, LARGE, LONG, yes).await.unwrap();
        assert_eq!((big.bytes.len(), big.slot.is_some()), (pending.len(), true));
        assert_eq!(LARGE_FRAMES.load(Ordering::Acquire), LARGE_FRAME_SLOTS);
        drop(big);
        assert_eq!(LARGE_FRAMES.load(Ordering::Acquire), LARGE_FRAME_SLOTS - 1);
        drop(writers);
        for r in readers {
            assert_eq!(r.await.unwrap().unwrap_err(), Code::RequestTooLarge);
        }
        assert_eq!(LARGE_FRAMES.load(Ordering::Acquire), 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_frame_goes_past_the_cap_only_when_admitted_and_is_asked_once() {
        let _serial = SERIAL.lock().await;
        use std::sync::atomic::AtomicUsize;
        let asked = AtomicUsize::new(0);
        let ask = |answer: bool| {
            let asked = &asked;
            move || async move {
                asked.fetch_add(1, Ordering::SeqCst);
                answer
            }
        };
        // Under the cap: never asked.
        let (mut w, mut r) = tokio::io::duplex(4 * MAX);
        w.write_all(b"{}\n").await.unwrap();
        assert!(read_frame(&mut r, MAX, LARGE, LONG, ask(false))
            .await
            .is_ok());
        assert_eq!(asked.load(Ordering::SeqCst), 0);
        // Past it and refused: too large at once, no slot taken, though
        // the writer is still open and under the save verb's cap.
        let before = LARGE_FRAMES.load(Ordering::Acquire);
        let (mut w, mut r) = tokio::io::duplex(4 * MAX);
        w.write_all(&vec![b'p'; MAX + 8192]).await.unwrap();
        assert_eq!(
            read_frame(&mut r, MAX, LARGE, LONG, ask(false))
                .await
                .unwrap_err(),
            Code::RequestTooLarge
        );
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        assert_eq!(LARGE_FRAMES.load(Ordering::Acquire), before);
        // Admitted: asked once however many reads follow, and it holds
        // a slot.
        let (mut w, mut r) = tokio::io::duplex(4 * MAX);
        w.write_all(&vec![b'p'; 3 * MAX]).await.unwrap();
        w.write_all(b"\n").await.unwrap();
        let f = read_frame(&mut r, MAX, LARGE, LONG, ask(true))
            .await
            .unwrap();
        assert_eq!((f.bytes.len(), f.slot.is_some()), (3 * MAX, true));
        assert_eq!(asked.load(Ordering::SeqCst), 2);
        drop(w);
    }
}
