//! What snapshots need of the system that the standard library does not offer everywhere: a
//! file's modification and inode change times to the nanosecond, its inode number and permission
//! bits, telling a symlink met by `O_NOFOLLOW`, writing permission bits, making a symlink, and the
//! clock files are stamped from. Chosen once, in the [facade](super); apart from these, only the
//! walkers (one per system, chosen in `walk/mod.rs`) ask the system anything it does not offer
//! everywhere.

use std::ffi::OsStr;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, ErrorKind};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// Modification time in nanoseconds since the Unix epoch.
pub(super) fn mtime_ns(meta: &Metadata) -> i128 {
    i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec())
}

/// Inode change time in nanoseconds since the Unix epoch.
pub(super) fn ctime_ns(meta: &Metadata) -> i128 {
    i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec())
}

/// Inode number.
pub(super) fn inode(meta: &Metadata) -> u64 {
    meta.ino()
}

/// Permission bits (and the file type bits above them).
pub(super) fn mode(meta: &Metadata) -> u32 {
    meta.mode()
}

/// Whether an open failed because `O_NOFOLLOW` met a symlink.
pub(super) fn met_symlink(err: &io::Error) -> bool {
    err.raw_os_error() == Some(libc::ELOOP)
}

/// Options that create a new file only its owner can read and write, until its permission bits
/// are set.
pub(super) fn create_new_private() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    options.mode(0o600);
    options
}

/// Sets the permission bits of `file` to those of `mode`.
pub(super) fn set_mode(file: &File, mode: u32) -> io::Result<()> {
    file.set_permissions(fs::Permissions::from_mode(mode & 0o7777))
}

/// Creates a symlink to the kept target.
pub(super) fn make_symlink(path: &Path, target: &[u8]) -> io::Result<()> {
    let target = OsStr::from_bytes(target);
    match std::os::unix::fs::symlink(target, path) {
        Err(err) if err.kind() == ErrorKind::AlreadyExists => {
            fs::remove_file(path)?;
            std::os::unix::fs::symlink(target, path)?;
        }
        other => other?,
    }
    Ok(())
}

/// Now, on the clock the kernel stamps files with. Linux stamps files from the coarse clock, which
/// can lag the precise one by a tick: a file written just after the snapshot began must not look
/// older than the snapshot.
pub(super) fn file_clock_now() -> i128 {
    #[cfg(target_os = "linux")]
    {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid, writable timespec and the clock id is a constant Linux knows.
        if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &raw mut now) } == 0 {
            return i128::from(now.tv_sec) * 1_000_000_000 + i128::from(now.tv_nsec);
        }
    }
    nanos_since_epoch(SystemTime::now())
}

fn nanos_since_epoch(time: SystemTime) -> i128 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i128::try_from(after.as_nanos()).unwrap_or(i128::MAX),
        Err(before) => -i128::try_from(before.duration().as_nanos()).unwrap_or(i128::MAX),
    }
}

/// Copies the regular file `from` to `to` (which must not exist) with its permission bits: a
/// copy-on-write clone (`FICLONE`) where the file system offers one (btrfs, XFS), which shares
/// the blocks until either file is written, else a copy (`copy_file_range` through `fs::copy`).
/// Returns whether it was a clone.
pub(super) fn clone_or_copy(from: &Path, to: &Path) -> io::Result<bool> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let source = File::open(from)?;
        let mode = source.metadata()?.permissions().mode() & 0o7777;
        let target = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(to)?;
        // SAFETY: an ioctl on two descriptors this function owns.
        if unsafe { libc::ioctl(target.as_raw_fd(), libc::FICLONE, source.as_raw_fd()) } == 0 {
            target.set_permissions(fs::Permissions::from_mode(mode))?;
            return Ok(true);
        }
        drop(target);
        fs::remove_file(to)?;
    }
    fs::copy(from, to)?;
    Ok(false)
}
