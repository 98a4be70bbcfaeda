//! The mapping tables of a `--mappings DIR` (or the file's `mappings`): read from the directory
//! here, parsed by [`crate::mapping`], which does no I/O.

use std::path::Path;

use super::ConfigError;
use crate::mapping::{Mappings, AGUI_ALIASES_FILE, HAI_TABLES_FILE};

/// Loads the tables of `dir`; a file missing from it keeps the compiled-in default.
pub fn load_mappings(dir: &Path) -> Result<Mappings, ConfigError> {
    let agui = read(dir, AGUI_ALIASES_FILE)?;
    let hai = read(dir, HAI_TABLES_FILE)?;
    Ok(Mappings::from_texts(texts(&agui), texts(&hai))?)
}

fn texts(read: &Option<(String, String)>) -> Option<(&str, &str)> {
    read.as_ref()
        .map(|(text, origin)| (text.as_str(), origin.as_str()))
}

/// The text of `dir/name` and its name for errors; `None` when there is no such file.
fn read(dir: &Path, name: &str) -> Result<Option<(String, String)>, ConfigError> {
    let path = dir.join(name);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some((text, path.display().to_string()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ConfigError::Read { path, source }),
    }
}
