//! The standard process metrics (`process_resident_memory_bytes`, `process_open_fds`, …, no
//! prefix, the names every Prometheus client library exports), read from `/proc/self` at
//! scrape time by a [`ProcessCollector`]. Linux only: elsewhere they are absent.
//!
//! The parsing is written here rather than taken from `procfs`: that crate parses all of
//! `/proc` (and brings its own dependencies) for the five numbers needed here, each a field of
//! a line-oriented text file. The parsers are pure functions of the file's text, return `None`
//! on anything unexpected, and the collector then leaves that metric out of the scrape: an odd
//! kernel never breaks `/metrics`.
//!
//! CPU times and the start time are in clock ticks of `USER_HZ`, which the kernel fixes at 100
//! for everything it reports to user space (`sysconf(_SC_CLK_TCK)` answers the same), so no
//! system call is needed to convert them.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

/// Clock ticks per second in `/proc` (`USER_HZ`).
const TICKS_PER_SECOND: f64 = 100.0;

/// Reads `/proc/self` on every scrape. See the module docs.
#[derive(Debug, Default)]
pub struct ProcessCollector;

/// What `/proc/self/stat` says (times in seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stat {
    /// User plus system CPU time.
    pub cpu_seconds: f64,
    /// Since boot.
    pub start_seconds_after_boot: f64,
    pub virtual_bytes: u64,
}

/// `/proc/self/stat`: the fields after the command name, which is in parentheses and may
/// itself hold spaces and parentheses (hence the last `)`).
pub fn parse_stat(text: &str) -> Option<Stat> {
    let (_, after_comm) = text.rsplit_once(')')?;
    // Field 3 (state) is the first after the command; proc(5) numbers them from 1.
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    let field = |n: usize| -> Option<u64> { fields.get(n.checked_sub(3)?)?.parse().ok() };
    let (utime, stime) = (field(14)?, field(15)?);
    Some(Stat {
        cpu_seconds: utime.saturating_add(stime) as f64 / TICKS_PER_SECOND,
        start_seconds_after_boot: field(22)? as f64 / TICKS_PER_SECOND,
        virtual_bytes: field(23)?,
    })
}

/// `VmRSS` of `/proc/self/status`, in bytes (the file says kB).
pub fn parse_rss(status: &str) -> Option<u64> {
    let value = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))?
        .trim();
    let kib: u64 = value
        .strip_suffix("kB")
        .unwrap_or(value)
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// The soft `Max open files` of `/proc/self/limits`; `None` when unlimited or unreadable.
pub fn parse_max_fds(limits: &str) -> Option<u64> {
    let rest = limits
        .lines()
        .find_map(|line| line.strip_prefix("Max open files"))?;
    rest.split_whitespace().next()?.parse().ok()
}

/// `btime` of `/proc/stat`: the boot time, in seconds since the epoch.
pub fn parse_boot_time(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|line| line.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// Entries of `/proc/self/fd` (the directory's own descriptor among them, as other clients
/// count it).
fn open_fds() -> Option<u64> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count() as u64)
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: Option<f64>,
) -> Result<(), std::fmt::Error> {
    let Some(value) = value else { return Ok(()) };
    let metric = ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, unit, metric.metric_type())?)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stat = read("/proc/self/stat").as_deref().and_then(parse_stat);
        if let Some(stat) = stat {
            let cpu = ConstCounter::new(stat.cpu_seconds);
            cpu.encode(encoder.encode_descriptor(
                "process_cpu",
                "Total user and system CPU time spent",
                Some(&Unit::Seconds),
                cpu.metric_type(),
            )?)?;
        }
        let start = stat.zip(read("/proc/stat").as_deref().and_then(parse_boot_time));
        gauge(
            &mut encoder,
            "process_start_time",
            "Start time of the process since the Unix epoch",
            Some(&Unit::Seconds),
            start.map(|(stat, boot)| boot as f64 + stat.start_seconds_after_boot),
        )?;
        gauge(
            &mut encoder,
            "process_virtual_memory",
            "Virtual memory size",
            Some(&Unit::Bytes),
            stat.map(|s| s.virtual_bytes as f64),
        )?;
        gauge(
            &mut encoder,
            "process_resident_memory",
            "Resident memory size",
            Some(&Unit::Bytes),
            read("/proc/self/status")
                .as_deref()
                .and_then(parse_rss)
                .map(|b| b as f64),
        )?;
        gauge(
            &mut encoder,
            "process_open_fds",
            "Open file descriptors",
            None,
            open_fds().map(|n| n as f64),
        )?;
        gauge(
            &mut encoder,
            "process_max_fds",
            "The soft limit on open file descriptors",
            None,
            read("/proc/self/limits")
                .as_deref()
                .and_then(parse_max_fds)
                .map(|n| n as f64),
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A command name with spaces and a parenthesis, as a process may name itself.
    const STAT: &str = "4242 (dialect (x) proxy) S 1 4242 4242 0 -1 4194560 1234 0 0 0 \
        250 75 0 0 20 0 5 0 123456 987654321 2048 18446744073709551615 1 1 0 0 0 0 0 4096 \
        17927 0 0 0 17 1 0 0 0 0 0\n";

    #[test]
    fn stat_fields_are_read_after_the_last_parenthesis() {
        let stat = parse_stat(STAT).unwrap();
        assert_eq!(stat.cpu_seconds, 3.25);
        assert_eq!(stat.start_seconds_after_boot, 1234.56);
        assert_eq!(stat.virtual_bytes, 987_654_321);
    }

    #[test]
    fn odd_stat_text_gives_nothing() {
        for text in [
            "",
            "4242 dialect-proxy S 1",
            "4242 (x) S 1 2 3",
            "4242 (x) S 1 4242 4242 0 -1 4194560 1234 0 0 0 lots 75 0 0 20 0 5 0 1 2 3",
        ] {
            assert_eq!(parse_stat(text), None, "{text:?}");
        }
    }

    #[test]
    fn rss_comes_from_status_in_bytes() {
        let status =
            "Name:\tdialect-proxy\nVmPeak:\t  30000 kB\nVmRSS:\t   12345 kB\nThreads:\t5\n";
        assert_eq!(parse_rss(status), Some(12345 * 1024));
        assert_eq!(parse_rss("Name:\tx\n"), None);
        assert_eq!(parse_rss("VmRSS:\t   many kB\n"), None);
    }

    #[test]
    fn the_soft_descriptor_limit_is_the_first_number() {
        let limits =
            "Limit                     Soft Limit           Hard Limit           Units     \n\
            Max cpu time              unlimited            unlimited            seconds   \n\
            Max open files            1024                 524288               files     \n";
        assert_eq!(parse_max_fds(limits), Some(1024));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(parse_max_fds(unlimited), None);
        assert_eq!(parse_max_fds(""), None);
    }

    #[test]
    fn boot_time_is_the_btime_line() {
        let stat = "cpu  1 2 3 4\nintr 5\nctxt 6\nbtime 1700000000\nprocesses 7\n";
        assert_eq!(parse_boot_time(stat), Some(1_700_000_000));
        assert_eq!(parse_boot_time("btime soon\n"), None);
    }

    #[test]
    fn this_process_is_described_plausibly() {
        let mut text = String::new();
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(ProcessCollector));
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let value = |name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in\n{text}"))
        };
        assert!(value("process_resident_memory_bytes") > 1e6, "{text}");
        assert!(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
        assert!(value("process_open_fds") >= 3.0);
        assert!(value("process_max_fds") >= value("process_open_fds"));
        assert!(value("process_cpu_seconds_total") >= 0.0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = value("process_start_time_seconds");
        assert!(start > 1e9 && start <= now + 1.0, "{start} vs now {now}");
    }
}
