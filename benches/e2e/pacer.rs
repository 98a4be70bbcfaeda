//! The mock's pace for content events: a timer with the clock's precision, and a jittered
//! schedule.
//!
//! tokio's timer rounds every deadline up to its next millisecond tick and fires everything due
//! on a tick together. Paced by it, the ~100 streams of the latency scenario, whose starts are
//! spread over the 10 ms pace, sent their events in synchronised bursts of about ten, one burst
//! per millisecond: each event then waited behind the others of its burst in every process
//! after the mock, and the latency figures measured that queue more than a hop. Streams of a
//! real agent are paced by their model's output, not by a shared clock tick. Here each stream
//! owns a `timerfd` (an hrtimer: microsecond precision) and sends its k-th event at
//! `start + k × pace + jitter`, the jitter drawn per event from `[0, pace / 5)` by a generator
//! seeded per stream: events of different streams meet by chance, not by the tick.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

/// A one-shot timer on a `timerfd`, re-armed for each deadline.
pub struct Precise {
    fd: AsyncFd<OwnedFd>,
}

impl Precise {
    pub fn new() -> io::Result<Precise> {
        // SAFETY: plain syscall; the descriptor it returns is owned by the `OwnedFd` below.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: the `OwnedFd` is moved into the `AsyncFd`, which closes it only when dropped;
        // its descriptor stays the same open timer until then.
        let fd = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }?;
        Ok(Precise { fd })
    }

    /// Arms the timer for `at` (at once when `at` has passed).
    pub fn arm(&mut self, at: Instant) -> io::Result<()> {
        let wait = at
            .saturating_duration_since(Instant::now())
            .max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: wait.as_secs() as libc::time_t,
                tv_nsec: wait.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: a valid descriptor and a valid `itimerspec`; the old value is not asked for.
        let set =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if set < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Ready once the armed deadline has passed.
    pub fn poll_fired(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.fd.poll_read_ready(cx))?;
            let mut expirations = [0u8; 8];
            // SAFETY: reads at most 8 bytes into an 8-byte buffer.
            let read = unsafe {
                libc::read(
                    guard.get_inner().as_raw_fd(),
                    expirations.as_mut_ptr().cast(),
                    expirations.len(),
                )
            };
            if read == 8 {
                return Poll::Ready(Ok(()));
            }
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::WouldBlock {
                return Poll::Ready(Err(error));
            }
            guard.clear_ready();
        }
    }
}

/// A stream's schedule: the k-th event at `start + k × pace + jitter_k`.
pub struct Schedule {
    start: Instant,
    pace: Duration,
    next: u64,
    /// xorshift64 state.
    state: u64,
}

impl Schedule {
    /// A schedule from `start`, its jitter seeded by `seed` (any value).
    pub fn new(start: Instant, pace: Duration, seed: u64) -> Schedule {
        Schedule {
            start,
            pace,
            next: 0,
            // xorshift must not start at zero; the odd constant also mixes small seeds.
            state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
        }
    }

    /// When the next event is due.
    pub fn next_at(&mut self) -> Instant {
        let nominal = self.start + self.pace * (self.next as u32 + 1);
        self.next += 1;
        let jitter_span = (self.pace / 5).as_nanos() as u64;
        if jitter_span == 0 {
            return nominal;
        }
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        nominal + Duration::from_nanos(self.state % jitter_span)
    }
}
