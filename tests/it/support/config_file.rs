//! `ConfigFile`: a gateway configuration written to a file of its own for one test, rewritten
//! at will (reload tests) and removed when dropped.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct ConfigFile(PathBuf);

impl ConfigFile {
    /// `text` in a new file whose name starts with `name` and is unique in the test run.
    pub fn new(name: &str, text: &str) -> ConfigFile {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "dp-it-{name}-{}-{}.toml",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let file = ConfigFile(path);
        file.write(text);
        file
    }

    /// Replaces the file's content.
    pub fn write(&self, text: &str) {
        std::fs::write(&self.0, text).expect("write the config file");
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The path as a command-line argument.
    pub fn arg(&self) -> &str {
        self.0.to_str().expect("UTF-8 temp path")
    }
}

impl Drop for ConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
