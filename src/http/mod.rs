//! The leaf HTTP layer.

pub mod body;
pub mod clock;
pub mod headers;
pub mod stall;
pub mod upstream;
