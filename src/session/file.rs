//! The durable store of one gateway: a directory holding an embedded database.
//!
//! Not built yet: opening it fails.

use std::path::Path;

use super::backend::OpenError;
use super::{MemoryStore, SessionLimits};

/// See the module docs.
pub type FileStore = MemoryStore;

impl MemoryStore {
    /// Opens (or creates) the store in `path`.
    pub async fn open(path: &Path, _limits: SessionLimits) -> Result<FileStore, OpenError> {
        Err(OpenError::File {
            path: path.to_owned(),
            reason: "not built yet".into(),
        })
    }
}
