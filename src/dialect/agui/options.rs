//! The AG-UI reader's per-route choices, shared by its slow and fast paths.

use super::fix::Timestamps;

/// The name of the `CUSTOM` event some vendors use as a global error signal (row 25).
pub const SYSTEM_EXCEPTION: &str = "SYSTEM_EXCEPTION";

/// Per-route choices where `dialects.md` offers alternatives; the defaults are its defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReaderOptions {
    /// Row 17.
    pub timestamps: Timestamps,
    /// Row 13: a patch path without its leading `/` is repaired (`false`: the event is dropped).
    pub drop_unrooted_patches: bool,
    /// Row 25: `CUSTOM SYSTEM_EXCEPTION` passes as a plain `CUSTOM` instead of ending the run.
    pub system_exception_passthrough: bool,
}
