//! The wall clock the pure converters are handed ([`Clock::Wall`]): the one place the
//! gateway reads the system time for event timestamps.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::event::Clock;

/// Milliseconds since the epoch (0 before it, saturating far after).
pub fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The system clock, for pipelines that stamp events.
pub const WALL: Clock = Clock::Wall(wall_ms);
