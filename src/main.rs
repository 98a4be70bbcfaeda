//! The `dialect-proxy` binary: the command line (`dialect_proxy::cli`) and the process's memory
//! allocator.
//!
//! # Allocator
//!
//! The gateway holds large, short-lived buffers: AAP session histories of up to
//! `max_history_bytes` each, request bodies, aggregated messages. With the system allocator
//! (glibc) memory freed by deleting or expiring sessions mostly stays in the process: glibc
//! raises its mmap threshold after freeing large mapped blocks, so later large buffers come
//! from per-thread arenas, whose free pages are only given back from the top of the heap. A
//! flood of sessions then keeps the process's resident size near its peak after they are gone.
//!
//! jemalloc (`tikv-jemallocator`) returns freed pages to the system on a schedule:
//! - `background_thread:true`: a jemalloc thread purges unused pages, so memory goes back even
//!   while no request allocates (purging otherwise happens only inside allocator calls);
//! - `dirty_decay_ms:1000`: freed pages are kept for reuse for about a second, then purged;
//! - `muzzy_decay_ms:0`: purged pages are released at once (`MADV_DONTNEED`), not left to
//!   the kernel's leisure (`MADV_FREE`), so the resident size falls when the pages go;
//! - `narenas:1`: one arena for every thread. With an arena per thread (jemalloc's default),
//!   a stream's state lands in the arena of whichever worker ran its task at the time, and the
//!   share of the live state each arena holds drifts with the scheduler's balance: one arena's
//!   slabs empty slowly while another's fill, and the resident size wanders by megabytes for
//!   minutes under a steady load (`benches/RESULTS.md`, the soak). The threads' caches take
//!   most allocations without the arena's lock, and the workers are as many as the CPUs; a
//!   host with many cores may trade memory for less contention with
//!   `_RJEM_MALLOC_CONF=narenas:<n>`.
//!
//! The options are read from the `malloc_conf` symbol jemalloc looks for at start-up (named
//! `_rjem_malloc_conf`, as `tikv-jemalloc-sys` builds jemalloc with the `_rjem_` prefix);
//! `MALLOC_CONF`-style overrides still apply through `_RJEM_MALLOC_CONF` in the environment.
//! Only the binary uses it: the library and its tests keep the system allocator. Built without
//! the `jemalloc` feature, the binary keeps it too, for heap profilers that follow malloc.

use std::process::ExitCode;

#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's start-up options; see the module docs. A `const char *` for C: a nullable
/// reference has a pointer's layout.
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[export_name = "_rjem_malloc_conf"]
pub static MALLOC_CONF: Option<&'static std::ffi::c_char> = Some(
    // SAFETY: the pointer comes from a string literal, valid and immutable for the whole run.
    unsafe { &*c"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,narenas:1".as_ptr() },
);

fn main() -> ExitCode {
    match dialect_proxy::cli::main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // For an operator: the message and its causes, never a backtrace.
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
