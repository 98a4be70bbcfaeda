//! Build metadata for `dialect_proxy_build_info`: the commit the binary is built from, as
//! `DIALECT_PROXY_BUILD_COMMIT`. From the `DIALECT_PROXY_COMMIT` environment variable when set
//! (image builds, which have no `.git`), else from `git rev-parse` when the sources are a
//! checkout (a worktree's `.git` is a file: git finds its directory), else `unknown`. Never
//! fails the build.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=DIALECT_PROXY_COMMIT");
    let commit = match std::env::var("DIALECT_PROXY_COMMIT") {
        Ok(commit) if !commit.trim().is_empty() => commit.trim().to_owned(),
        _ => {
            watch_git_head();
            git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_owned())
        }
    };
    println!("cargo:rustc-env=DIALECT_PROXY_BUILD_COMMIT={commit}");
}

/// Output of a git command run in the package's directory, if it succeeded.
fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(manifest_dir())
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Reruns this script when the checkout moves to another commit: `HEAD` changes on a checkout,
/// the branch's ref (loose or packed) on a commit. Only files that exist are named, since cargo
/// reruns on every build for a missing one.
fn watch_git_head() {
    let mut files = vec![git_path("HEAD"), git_path("packed-refs")];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        files.push(git_path(&branch));
    }
    for file in files.into_iter().flatten() {
        if file.is_file() {
            println!("cargo:rerun-if-changed={}", file.display());
        }
    }
}

/// Where git keeps `name` (`git rev-parse --git-path`), made absolute.
fn git_path(name: &str) -> Option<PathBuf> {
    let path = PathBuf::from(git(&["rev-parse", "--git-path", name])?);
    Some(if path.is_absolute() {
        path
    } else {
        Path::new(&manifest_dir()).join(path)
    })
}
