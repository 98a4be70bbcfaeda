//! How much of the machine the benchmark had: a thread pinned to each CPU in turn reads the
//! clock in a loop for a while, nothing else of the benchmark running, and every gap between
//! two readings longer than [`GAP`] is time that CPU ran something else (on a virtual machine,
//! mostly the host running other guests, which the guest's load average does not show). Taken
//! at the start and the end of a run: latency differences of tens of microseconds between
//! comparators mean little when the CPUs lose that much many times a second.

use std::time::{Duration, Instant};

/// A gap counted as lost time.
const GAP: Duration = Duration::from_micros(10);
/// A gap long enough to hold several events of the latency scenario.
const LONG: Duration = Duration::from_micros(50);

/// What one CPU lost over one probe.
pub struct Lost {
    pub cpu: usize,
    /// Share of the probe's time lost in gaps over [`GAP`].
    pub share: f64,
    /// Gaps over [`LONG`] per second.
    pub long_per_s: f64,
    pub worst: Duration,
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CPU {}: {:.1} % of the time lost in gaps over {} µs, {:.0} gaps over {} µs per second, \
             worst {} µs",
            self.cpu,
            self.share * 100.0,
            GAP.as_micros(),
            self.long_per_s,
            LONG.as_micros(),
            self.worst.as_micros()
        )
    }
}

/// Probes `cpu` for `length`; `None` when the thread cannot be pinned there.
pub fn probe(cpu: usize, length: Duration) -> Option<Lost> {
    std::thread::spawn(move || {
        pin(cpu)?;
        let start = Instant::now();
        let (mut lost, mut long, mut worst) = (Duration::ZERO, 0u64, Duration::ZERO);
        let mut last = start;
        while last.duration_since(start) < length {
            let now = Instant::now();
            let gap = now.duration_since(last);
            if gap > GAP {
                lost += gap;
                worst = worst.max(gap);
                if gap > LONG {
                    long += 1;
                }
            }
            last = now;
        }
        let secs = last.duration_since(start).as_secs_f64();
        Some(Lost {
            cpu,
            share: lost.as_secs_f64() / secs,
            long_per_s: long as f64 / secs,
            worst,
        })
    })
    .join()
    .ok()
    .flatten()
}

fn pin(cpu: usize) -> Option<()> {
    // SAFETY: a zeroed `cpu_set_t` is an empty set; the calls only read and write that set and
    // set the calling thread's affinity.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        (libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0)
            .then_some(())
    }
}
