//! The driver's compiled kernels, kept on disk from one process to the next.
//!
//! Building a kernel is the driver compiling WGSL (through SPIR-V) to the GPU's own code, and
//! on an NVIDIA H100 that took 0.9 s for a rolling ball's RK4 kernel, 1.6 s with projection
//! and 22–24 s for the event kernel of a brick on four contact points (2026-11-27). The
//! device's `KernelCache` (`gpu::cache`) keeps pipelines within a process; this
//! module keeps the driver's compiled code between processes, so that the first step of a
//! process (a study's next run, the next episode batch of a training job, a notebook
//! restarted) loads the kernel instead of compiling it.
//!
//! It is a Vulkan pipeline cache (wgpu's [`wgpu::PipelineCache`]), which the device fills as
//! it builds pipelines and which is written to one file per adapter kind
//! ([`wgpu::util::pipeline_cache_key`]) in the cache directory:
//!
//! * [`PIPELINE_CACHE_ENV`] (`SIMBATCH_PIPELINE_CACHE`) names the directory, or `off`;
//! * else `$XDG_CACHE_HOME/simbatch`, `$HOME/.cache/simbatch` or, on Windows,
//!   `%LOCALAPPDATA%\simbatch`.
//!
//! Most drivers keep a cache of their own as well (NVIDIA's under `~/.cache/nvidia`), but not
//! every setting lets them (a container whose home is not kept, a driver cache too small for
//! the event kernels, a driver told not to); this one is the application's, under the user's
//! control. Other backends (Metal, DX12) and adapters without the feature have no
//! application-managed cache in wgpu, and go on without one.
//!
//! Nothing here can fail a computation: a file that cannot be read, is corrupt, was written by
//! another wgpu or driver version, or another adapter, is ignored (wgpu validates a header and
//! the driver its own); a file that cannot be written is logged once, and the device stops
//! writing it. The file is replaced atomically (written aside, then renamed), so processes
//! sharing the directory never read half a file. A cache file larger than [`MAX_PIPELINE_CACHE_BYTES`] is not loaded and
//! the process starts it afresh with its own kernels (a Vulkan cache cannot be pruned).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The environment variable naming the pipeline cache's directory, or `off` (also `0`,
/// `false`, `none` or empty) for none.
pub const PIPELINE_CACHE_ENV: &str = "SIMBATCH_PIPELINE_CACHE";

/// Largest cache file loaded (256 MiB); larger ones are started afresh.
pub const MAX_PIPELINE_CACHE_BYTES: u64 = 256 << 20;

/// Least time between two saves after quick builds: a test suite that builds a hundred small
/// kernels in a row writes the file at its first build, then at most this often, and once
/// more when the device is dropped (a cache of many kernels is tens of MiB).
const SAVE_INTERVAL: Duration = Duration::from_secs(2);

/// A build at least this long is saved at once, whenever the last save was: it is what the
/// cache is for (the brick's event kernel took 22–24 s on an H100), and writing the file takes
/// a small part of it.
const SLOW_BUILD: Duration = Duration::from_millis(500);

/// Where a device keeps its pipeline cache (module doc).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PipelineCacheSetting {
    /// [`PIPELINE_CACHE_ENV`] when set, else the user's cache directory (module doc).
    #[default]
    FromEnvironment,
    /// This directory (made when missing).
    Directory(PathBuf),
    /// No cache on disk: every process compiles its kernels (or the driver's own cache
    /// answers).
    Off,
}

impl PipelineCacheSetting {
    /// The directory this setting names, from the process's environment for
    /// [`FromEnvironment`](Self::FromEnvironment); `None` when off or when no directory can be
    /// told (no home).
    pub fn directory(&self) -> Option<PathBuf> {
        match self {
            Self::FromEnvironment => directory_from(
                std::env::var_os(PIPELINE_CACHE_ENV),
                std::env::var_os("XDG_CACHE_HOME"),
                std::env::var_os("HOME"),
                std::env::var_os("LOCALAPPDATA"),
            ),
            Self::Directory(dir) => Some(dir.clone()),
            Self::Off => None,
        }
    }
}

/// The cache directory from the environment's values: `setting` (a directory, or one of the
/// words for none), else `xdg/simbatch`, `home/.cache/simbatch`, `local_app_data/simbatch`.
/// Relative `XDG_CACHE_HOME` values are ignored, as the XDG specification says.
pub(crate) fn directory_from(
    setting: Option<OsString>,
    xdg: Option<OsString>,
    home: Option<OsString>,
    local_app_data: Option<OsString>,
) -> Option<PathBuf> {
    if let Some(value) = setting {
        let word = value.to_string_lossy().trim().to_ascii_lowercase();
        return match word.as_str() {
            "" | "off" | "0" | "false" | "none" => None,
            _ => Some(PathBuf::from(value)),
        };
    }
    let non_empty = |v: Option<OsString>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(xdg) = non_empty(xdg).filter(|p| p.is_absolute()) {
        return Some(xdg.join("simbatch"));
    }
    if let Some(home) = non_empty(home) {
        return Some(home.join(".cache").join("simbatch"));
    }
    non_empty(local_app_data).map(|dir| dir.join("simbatch"))
}

/// A device's pipeline cache and the file it is kept in.
#[derive(Debug)]
pub struct PipelineCacheFile {
    cache: wgpu::PipelineCache,
    path: PathBuf,
    loaded_bytes: usize,
    saves: Mutex<Saves>,
}

/// What has been written so far.
#[derive(Debug, Default)]
struct Saves {
    /// When the file was last written by this device.
    last: Option<Instant>,
    /// Whether pipelines were built since.
    pending: bool,
    /// Bytes in the last write.
    bytes: usize,
    /// Whether a write failed: the device stops trying (one warning, not one per build).
    failed: bool,
}

impl Saves {
    /// Whether a build that took `took` is written now ([`PipelineCacheFile::built`]).
    fn due(&self, took: Duration) -> bool {
        let quiet = self.last.is_none_or(|t| t.elapsed() >= SAVE_INTERVAL);
        self.pending && !self.failed && (took >= SLOW_BUILD || quiet)
    }
}

impl PipelineCacheFile {
    /// The cache of `device` (on adapter `info`) kept in directory `dir`, with what an earlier
    /// process left there; `None` where the adapter has no application-managed cache (the
    /// device must have been opened with [`wgpu::Features::PIPELINE_CACHE`]).
    pub(crate) fn open(
        device: &wgpu::Device,
        info: &wgpu::AdapterInfo,
        dir: &Path,
    ) -> Option<Self> {
        if !device.features().contains(wgpu::Features::PIPELINE_CACHE) {
            return None;
        }
        let key = wgpu::util::pipeline_cache_key(info)?;
        let path = dir.join(format!("{key}.bin"));
        let data = read_bounded(&path);
        let loaded_bytes = data.as_ref().map_or(0, Vec::len);
        // Data from another adapter is an error wgpu raises even with `fallback` (the others
        // — truncated, corrupt, outdated — it falls back on): caught (`create`) and retried
        // empty, never left for the device's uncaptured-error record.
        let (cache, loaded_bytes) = match create(device, data.as_deref()) {
            Ok(cache) => (cache, loaded_bytes),
            Err(e) => {
                log::warn!(
                    "simbatch: pipeline cache {} refused on {} ({e}); starting it afresh",
                    path.display(),
                    info.name
                );
                // Without data only a device out of memory can refuse: then no cache at all.
                (create(device, None).ok()?, 0)
            }
        };
        Some(Self {
            cache,
            path,
            loaded_bytes,
            saves: Mutex::new(Saves::default()),
        })
    }

    /// The wgpu cache, for pipeline descriptors.
    pub(crate) fn cache(&self) -> &wgpu::PipelineCache {
        &self.cache
    }

    /// The file the cache is kept in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes read from the file when the device opened (0 when there was none, or it was
    /// too large or refused).
    pub fn loaded_bytes(&self) -> usize {
        self.loaded_bytes
    }

    /// Bytes this device last wrote to the file (0 before its first write).
    pub fn saved_bytes(&self) -> usize {
        self.lock().bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Saves> {
        // The record is plain values, consistent whatever a panicking holder left.
        self.saves.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// After a pipeline was built in `took`: writes the file now if the build was slow
    /// ([`SLOW_BUILD`]) or this device has not written it in the last [`SAVE_INTERVAL`], else
    /// leaves it for the next build or the drop.
    pub(crate) fn built(&self, took: Duration) {
        let due = {
            let mut saves = self.lock();
            saves.pending = !saves.failed;
            saves.due(took)
        };
        if due {
            self.save();
        }
    }

    /// Writes the cache's data to the file (aside, then renamed over it); a failure is logged.
    pub fn save(&self) {
        let Some(data) = self.cache.get_data() else {
            return;
        };
        let mut saves = self.lock();
        saves.last = Some(Instant::now());
        saves.pending = false;
        if data.len() as u64 > MAX_PIPELINE_CACHE_BYTES {
            log::warn!(
                "simbatch: pipeline cache of {} MiB not written (over {} MiB)",
                data.len() >> 20,
                MAX_PIPELINE_CACHE_BYTES >> 20
            );
            return;
        }
        match write_atomically(&self.path, &data) {
            Ok(()) => saves.bytes = data.len(),
            Err(e) => {
                saves.failed = true;
                log::warn!(
                    "simbatch: pipeline cache not written to {}: {e}; this device stops trying",
                    self.path.display()
                );
            }
        }
    }
}

impl Drop for PipelineCacheFile {
    fn drop(&mut self) {
        if self.lock().pending {
            self.save();
        }
    }
}

/// A pipeline cache on `device` from `data`, or wgpu's error when it refused it (data made for
/// another adapter, or no memory), caught here in error scopes of every kind rather than left
/// for the device's uncaptured-error record, which would fail the next readback.
fn create(device: &wgpu::Device, data: Option<&[u8]>) -> Result<wgpu::PipelineCache, wgpu::Error> {
    let scopes = [
        wgpu::ErrorFilter::Internal,
        wgpu::ErrorFilter::OutOfMemory,
        wgpu::ErrorFilter::Validation,
    ]
    .map(|filter| device.push_error_scope(filter));
    // SAFETY: the data is what `PipelineCache::get_data` wrote for an adapter of this key (or
    // anything else in a file someone replaced); wgpu checks its header — magic, version,
    // adapter, validation key, length — and the driver checks its own header in turn, so data
    // from another device, driver or wgpu version is refused or ignored, never used as code.
    // What stays unproven is a file forged with valid headers, which wgpu's docs leave to the
    // application: the cache lives in the user's own directory.
    let cache = unsafe {
        device.create_pipeline_cache(&wgpu::PipelineCacheDescriptor {
            label: Some("simbatch pipeline cache"),
            data,
            fallback: true,
        })
    };
    // Popped innermost first; every scope is popped whatever an earlier one held.
    let mut refused = None;
    for scope in scopes.into_iter().rev() {
        if let Some(e) = pollster::block_on(scope.pop()) {
            refused.get_or_insert(e);
        }
    }
    match refused {
        None => Ok(cache),
        Some(e) => Err(e),
    }
}

/// The file's bytes, unless it is missing, unreadable or over [`MAX_PIPELINE_CACHE_BYTES`].
fn read_bounded(path: &Path) -> Option<Vec<u8>> {
    let size = std::fs::metadata(path).ok()?.len();
    if size > MAX_PIPELINE_CACHE_BYTES {
        log::warn!(
            "simbatch: pipeline cache {} is {} MiB, over {} MiB: started afresh",
            path.display(),
            size >> 20,
            MAX_PIPELINE_CACHE_BYTES >> 20
        );
        return None;
    }
    std::fs::read(path).ok()
}

/// Writes `data` to `path` through a file beside it (named for this process and call), renamed
/// over `path` once complete; the directory is made when missing.
fn write_atomically(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static WRITES: AtomicU64 = AtomicU64::new(0);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut aside = path.as_os_str().to_owned();
    aside.push(format!(
        ".{}-{}.tmp",
        std::process::id(),
        WRITES.fetch_add(1, Ordering::Relaxed)
    ));
    let aside = PathBuf::from(aside);
    let written = std::fs::write(&aside, data).and_then(|()| std::fs::rename(&aside, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&aside);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::{SAVE_INTERVAL, SLOW_BUILD, Saves, directory_from};
    use std::ffi::OsString;
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    #[test]
    fn the_first_build_and_slow_ones_are_saved_at_once_quick_ones_at_intervals() {
        let quick = Duration::from_millis(50);
        let never = Saves {
            pending: true,
            ..Saves::default()
        };
        assert!(never.due(quick), "the first build");
        let just = Saves {
            last: Some(Instant::now()),
            ..never
        };
        assert!(!just.due(quick), "a quick build right after a save waits");
        assert!(just.due(SLOW_BUILD), "a slow one does not");
        let Some(earlier) = Instant::now().checked_sub(SAVE_INTERVAL + quick) else {
            return; // A clock this close to its origin cannot go back that far.
        };
        let quiet = Saves {
            last: Some(earlier),
            ..never
        };
        assert!(quiet.due(quick), "past the interval");
        let failed = Saves {
            failed: true,
            ..never
        };
        assert!(
            !failed.due(SLOW_BUILD),
            "a device whose write failed stops trying"
        );
    }

    fn some(s: &str) -> Option<OsString> {
        Some(OsString::from(s))
    }

    #[test]
    fn the_cache_directory_follows_the_setting_then_the_platforms_cache_home() {
        // The variable wins, a directory or a word for none.
        assert_eq!(
            directory_from(some("/data/kernels"), some("/x"), some("/home/u"), None),
            Some(PathBuf::from("/data/kernels"))
        );
        for off in ["off", "OFF", "0", "false", "none", "", "  off "] {
            assert_eq!(
                directory_from(some(off), some("/x"), some("/h"), None),
                None
            );
        }
        // Else XDG's cache home (absolute only), else ~/.cache, else Windows' local data.
        assert_eq!(
            directory_from(None, some("/var/cache/u"), some("/home/u"), None),
            Some(PathBuf::from("/var/cache/u/simbatch"))
        );
        assert_eq!(
            directory_from(None, some("relative"), some("/home/u"), None),
            Some(PathBuf::from("/home/u/.cache/simbatch"))
        );
        assert_eq!(
            directory_from(None, some(""), some("/home/u"), None),
            Some(PathBuf::from("/home/u/.cache/simbatch"))
        );
        assert_eq!(
            directory_from(None, None, None, some("C:/Users/u/AppData/Local")),
            Some(PathBuf::from("C:/Users/u/AppData/Local/simbatch"))
        );
        assert_eq!(directory_from(None, None, some(""), None), None);
    }
}
