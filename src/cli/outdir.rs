//! A study's output directory: made under a lock (`.NAME.lock`, create-new with the owner's
//! PID; a dead owner's lock is taken over), filled in a `.NAME.partial-*` directory and renamed
//! into place, so a reader never sees half a study.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::CliError;

pub(super) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CliError + '_ {
    move |source| CliError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// An output directory being written; renamed into place by [`OutDir::commit`], removed when
/// dropped uncommitted (an error midway leaves nothing that looks like a result).
///
/// While it lives it holds a lock file `.NAME.lock` beside the target, so two runs writing the
/// same directory at once do not overwrite each other: the second is refused, naming the first
/// one's process. A lock or `.NAME.partial-*` directory left by a killed run (its process gone)
/// is cleaned up by the next run.
#[derive(Debug)]
pub struct OutDir {
    target: PathBuf,
    partial: PathBuf,
    lock: PathBuf,
    committed: bool,
}

/// Whether `dir` is a simbatch study output (it holds a `manifest.json` written by `run` or
/// `merge`), the only kind of directory `--force` replaces.
pub fn is_study_output(dir: &Path) -> bool {
    let Ok(text) = fs::read_to_string(dir.join("manifest.json")) else {
        return false;
    };
    serde_json::from_str::<Value>(&text)
        .is_ok_and(|m| m.get("simbatch").is_some() && m.get("scenario").is_some())
}

/// Whether process `pid` is alive (Linux: `/proc`; elsewhere assumed alive, so a stale lock is
/// reported rather than taken over).
fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    let proc_root = Path::new("/proc");
    if proc_root.join("self").exists() {
        proc_root.join(pid.to_string()).exists()
    } else {
        true
    }
}

impl OutDir {
    /// Starts writing `target`. An existing `target` is refused unless `force`, and even then
    /// replaced only when it is a study output ([`is_study_output`]): `--force` never deletes
    /// anything else.
    pub fn create(target: &Path, force: bool) -> Result<OutDir, CliError> {
        if target.exists() {
            if !force {
                return Err(CliError::OutputExists(target.display().to_string()));
            }
            if !target.is_dir() || !is_study_output(target) {
                return Err(CliError::NotStudyOutput(target.display().to_string()));
            }
        }
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .filter(|n| n != ".." && n != ".")
            .ok_or_else(|| CliError::NotStudyOutput(target.display().to_string()))?;
        let parent = target
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        fs::create_dir_all(parent).map_err(io(parent))?;
        let lock = parent.join(format!(".{name}.lock"));
        take_lock(&lock, target)?;
        // We hold the lock: any partial directory of this target is a killed run's leftover.
        if let Ok(entries) = fs::read_dir(parent) {
            let prefix = format!(".{name}.partial-");
            for e in entries.flatten() {
                let file = e.file_name().to_string_lossy().to_string();
                // `.NAME.partial-PID` or `.NAME.partial-PID.old`, nothing else.
                let is_ours = file.strip_prefix(&prefix).is_some_and(|rest| {
                    let pid = rest.strip_suffix(".old").unwrap_or(rest);
                    !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())
                });
                if is_ours {
                    let _ = fs::remove_dir_all(e.path());
                }
            }
        }
        let partial = parent.join(format!(".{name}.partial-{}", std::process::id()));
        let made = fs::create_dir_all(partial.join("plots")).map_err(io(&partial));
        if let Err(e) = made {
            let _ = fs::remove_file(&lock);
            return Err(e);
        }
        Ok(OutDir {
            target: target.to_path_buf(),
            partial,
            lock,
            committed: false,
        })
    }

    /// Where files go until the commit.
    pub fn path(&self) -> &Path {
        &self.partial
    }

    /// Moves the finished directory into place (replacing an old study output when forced).
    pub fn commit(mut self) -> Result<PathBuf, CliError> {
        if self.target.exists() {
            let old = self.partial.with_extension("old");
            fs::rename(&self.target, &old).map_err(io(&self.target))?;
            fs::rename(&self.partial, &self.target).map_err(io(&self.target))?;
            fs::remove_dir_all(&old).map_err(io(&old))?;
        } else {
            fs::rename(&self.partial, &self.target).map_err(io(&self.target))?;
        }
        self.committed = true;
        Ok(self.target.clone())
    }
}

/// Takes the lock file `lock` for `target` (created exclusively, holding our PID); a lock whose
/// process is gone is taken over, a live one refused.
fn take_lock(lock: &Path, target: &Path) -> Result<(), CliError> {
    for _ in 0..2 {
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(lock)
        {
            Ok(mut f) => {
                let _ = write!(f, "{}", std::process::id());
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let holder = fs::read_to_string(lock)
                    .ok()
                    .and_then(|t| t.trim().parse::<u32>().ok());
                match holder {
                    Some(pid) if process_alive(pid) => {
                        return Err(CliError::Locked {
                            target: target.display().to_string(),
                            pid,
                            lock: lock.display().to_string(),
                        });
                    }
                    // A killed run's lock (or an unreadable one): take it over.
                    _ => {
                        let _ = fs::remove_file(lock);
                    }
                }
            }
            Err(e) => return Err(io(lock)(e)),
        }
    }
    Err(CliError::Locked {
        target: target.display().to_string(),
        pid: 0,
        lock: lock.display().to_string(),
    })
}

impl Drop for OutDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.partial);
        }
        let _ = fs::remove_file(&self.lock);
    }
}
