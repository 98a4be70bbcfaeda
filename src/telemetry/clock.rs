//! The log lines' timestamps ([`LogTime`]): RFC 3339 in UTC with microseconds, the layout of
//! `tracing_subscriber`'s `SystemTime` (`2026-11-30T14:04:00.621029Z`).
//!
//! Hand-written because that timer formats the whole date through `core::fmt` for every line,
//! about 2,300 instructions, more than a tenth of the line a stream's end writes; here the part
//! up to the second is formatted once a second (per thread) and the rest is six digits.

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

/// See the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogTime;

thread_local! {
    /// The last second written on this thread, and its text up to the seconds' digits.
    static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

impl FormatTime for LogTime {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        let Ok(since) = SystemTime::now().duration_since(UNIX_EPOCH) else {
            // A clock before 1970: tracing's own timer knows how to write it.
            return tracing_subscriber::fmt::time::SystemTime.format_time(w);
        };
        write_at(w, since.as_secs(), since.subsec_micros())
    }
}

/// Writes the instant `secs` seconds and `micros` microseconds after the Unix epoch.
fn write_at(w: &mut impl fmt::Write, secs: u64, micros: u32) -> fmt::Result {
    SECOND.with(|second| {
        let mut second = second.try_borrow_mut().map_err(|_| fmt::Error)?;
        if second.0 != secs {
            second.1.clear();
            write_second(&mut second.1, secs)?;
            second.0 = secs;
        }
        w.write_str(&second.1)?;
        let mut digits = *b".000000Z";
        let mut rest = micros;
        for digit in digits[1..7].iter_mut().rev() {
            // `rest % 10` is below 10.
            *digit = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        // Only ASCII digits and punctuation went in.
        w.write_str(std::str::from_utf8(&digits).map_err(|_| fmt::Error)?)
    })
}

/// `YYYY-MM-DDTHH:MM:SS` for `secs` seconds after the epoch (UTC, proleptic Gregorian).
fn write_second(out: &mut String, secs: u64) -> fmt::Result {
    let days = secs / 86_400;
    let in_day = secs % 86_400;
    let (year, month, day) = civil(days);
    write!(
        out,
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        in_day / 3600,
        in_day / 60 % 60,
        in_day % 60
    )
}

/// The Gregorian date `days` days after 1970-01-01, counted in 400-year eras (146,097 days
/// each), whose years start on 1 March so that the leap day ends the year.
fn civil(days: u64) -> (u64, u64, u64) {
    // Days since 0000-03-01 (719,468 days before the epoch).
    let days = days + 719_468;
    let era = days / 146_097;
    let day_of_era = days % 146_097;
    // Years of the era: 365 days each, one more every 4 years but not every 100, again every 400.
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    // Months from March: 31, 30, 31, 30, 31, 31, 30, 31, 30, 31, 31, 28/29 days, which
    // (153 × m + 2) / 5 counts for m months.
    let march_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * march_month + 2) / 5 + 1;
    let (month, year_shift) = if march_month < 10 {
        (march_month + 3, 0)
    } else {
        (march_month - 9, 1)
    };
    (era * 400 + year_of_era + year_shift, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64, micros: u32) -> String {
        let mut out = String::new();
        write_at(&mut out, secs, micros).unwrap();
        out
    }

    /// Dates worked out by hand: the epoch, leap days (a year divisible by 4, by 400, and a
    /// century that is not a leap year), the ends of months and years.
    #[test]
    fn known_instants() {
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(at(59, 999_999), "1970-01-01T00:00:59.999999Z");
        assert_eq!(at(86_399, 7), "1970-01-01T23:59:59.000007Z");
        // 1972 is a leap year: 1970 and 1971 have 365 days, then 31 + 28 days to 29 February.
        assert_eq!(at((730 + 59) * 86_400, 0), "1972-02-29T00:00:00.000000Z");
        assert_eq!(at((730 + 60) * 86_400, 0), "1972-03-01T00:00:00.000000Z");
        // 2000-01-01 is 10,957 days after the epoch (30 years, 7 leap days); 2000 is a leap year.
        assert_eq!(at(10_957 * 86_400, 0), "2000-01-01T00:00:00.000000Z");
        assert_eq!(at((10_957 + 59) * 86_400, 0), "2000-02-29T00:00:00.000000Z");
        assert_eq!(
            at((10_957 + 365) * 86_400, 0),
            "2000-12-31T00:00:00.000000Z"
        );
        // 2100 is not: 2100-01-01 is 47,482 days after the epoch (130 years, 32 leap days).
        assert_eq!(at((47_482 + 59) * 86_400, 0), "2100-03-01T00:00:00.000000Z");
        // 2026-11-30T14:04:00Z: 20,454 days (56 years, 14 leap days) plus 333 days of 2026.
        let day = 20_454 + 333;
        assert_eq!(
            at(day * 86_400 + 14 * 3600 + 4 * 60, 621_029),
            "2026-11-30T14:04:00.621029Z"
        );
    }

    /// The same second twice, then the next: the cached text follows the clock.
    #[test]
    fn the_cached_second_follows_the_clock() {
        assert_eq!(at(1_000_000_000, 1), "2001-09-09T01:46:40.000001Z");
        assert_eq!(at(1_000_000_000, 2), "2001-09-09T01:46:40.000002Z");
        assert_eq!(at(1_000_000_001, 3), "2001-09-09T01:46:41.000003Z");
        assert_eq!(at(999_999_999, 4), "2001-09-09T01:46:39.000004Z");
    }

    /// Written as tracing's own timer writes the time, to the second (the two read the clock
    /// at different instants; a second that ticks in between is read again).
    #[test]
    fn laid_out_as_tracings_timer() {
        let mut ours = String::new();
        let mut theirs = String::new();
        for _ in 0..3 {
            ours.clear();
            theirs.clear();
            LogTime.format_time(&mut Writer::new(&mut ours)).unwrap();
            tracing_subscriber::fmt::time::SystemTime
                .format_time(&mut Writer::new(&mut theirs))
                .unwrap();
            if ours[..19] == theirs[..19] {
                break;
            }
        }
        assert_eq!(ours.len(), theirs.len(), "{ours} {theirs}");
        assert_eq!(ours[..19], theirs[..19]);
        assert!(ours.ends_with('Z') && ours.as_bytes()[19] == b'.', "{ours}");
    }
}
