//! Folders the children started in an area may only read (`worktree-share`): each folder is
//! bind-mounted read only, in a mount namespace of the child's own, where the child's work sees
//! it (an attempt's worktree) and over the folder itself (the workspace's copy, which a
//! virtualenv's scripts name by its absolute path). A write into either fails (`EROFS`) for the
//! child and everything it starts; other processes, and helixflow itself, see the folders as they
//! are.
//!
//! An unprivileged process gets a mount namespace with a user namespace of its own, in which its
//! user and group map to themselves: the child holds the capabilities it needs to mount only until
//! its `exec`, which drops them (its user is not root there), so neither it nor what it starts can
//! take the mounts back. A child of root needs no user namespace, and root could undo the mounts
//! anyway. Where unprivileged user namespaces are off (a sysctl, an `AppArmor` policy, a
//! container's seccomp filter), [`available`] says why, and the caller falls back.
//!
//! An area is registered by the folder its children start in ([`protect`]); every child whose
//! working folder is inside it is started this way ([`for_folder`]), whatever code starts it:
//! the worker, gate commands, fixes and the verifier alike.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// The mounts a child of an area makes before its `exec`, prepared before the fork (nothing is
/// allocated in the child).
#[derive(Debug)]
pub(crate) struct ReadOnly {
    /// Each folder and where it is mounted read only (the same path for the folder itself).
    binds: Vec<(CString, CString)>,
    /// `/proc/self/uid_map` and `gid_map` for a user namespace; `None` when helixflow is root.
    user: Option<(Vec<u8>, Vec<u8>)>,
}

/// The areas, by the folder their children start in.
static AREAS: Mutex<Vec<(PathBuf, Arc<ReadOnly>)>> = Mutex::new(Vec::new());

/// An area registered by [`protect`]; its children are started plainly again once it is dropped.
#[derive(Debug)]
pub(crate) struct Area {
    root: PathBuf,
}

impl Drop for Area {
    fn drop(&mut self) {
        AREAS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(root, _)| *root != self.root);
    }
}

/// Children started in `root` or below see each `(folder, target)` of `binds` read only at
/// `target`. Paths are absolute.
pub(crate) fn protect(root: &Path, binds: &[(PathBuf, PathBuf)]) -> io::Result<Area> {
    let read_only = Arc::new(ReadOnly::new(binds)?);
    AREAS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((root.to_path_buf(), read_only));
    Ok(Area {
        root: root.to_path_buf(),
    })
}

/// The mounts for a child started in `folder`, when it is in an area.
pub(crate) fn for_folder(folder: &Path) -> Option<Arc<ReadOnly>> {
    AREAS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .find(|(root, _)| folder.starts_with(root))
        .map(|(_, read_only)| Arc::clone(read_only))
}

/// Whether children can be given read-only folders here; `Err` says why not. Found once, by
/// starting a child that mounts a folder of a temporary folder read only and tries to write in it.
pub(crate) fn available() -> Result<(), String> {
    static AVAILABLE: OnceLock<Result<(), String>> = OnceLock::new();
    AVAILABLE.get_or_init(probe).clone()
}

fn probe() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| format!("no temporary folder: {e}"))?;
    let (folder, target) = (dir.path().join("folder"), dir.path().join("target"));
    for made in [&folder, &target] {
        std::fs::create_dir(made).map_err(|e| format!("no temporary folder: {e}"))?;
    }
    let read_only = ReadOnly::new(&[(folder, target.clone())]).map_err(|e| e.to_string())?;
    let cwd = c_path(dir.path()).map_err(|e| e.to_string())?;
    let mut command = std::process::Command::new("/bin/sh");
    command
        .arg("-c")
        .arg("echo x > \"$1/probe\"")
        .arg("sh")
        .arg(&target)
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: `enter` makes only system calls, on memory allocated before the fork.
        unsafe {
            command.pre_exec(move || read_only.enter(&cwd));
        }
    }
    let status = command
        .status()
        .map_err(|e| format!("a mount namespace with a read-only bind mount was refused ({e})"))?;
    if status.success() || target.join("probe").exists() {
        return Err("a read-only bind mount could still be written".to_owned());
    }
    Ok(())
}

/// A path as the system calls take it.
pub(crate) fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
}

impl ReadOnly {
    fn new(binds: &[(PathBuf, PathBuf)]) -> io::Result<ReadOnly> {
        let binds = binds
            .iter()
            .map(|(folder, target)| Ok((c_path(folder)?, c_path(target)?)))
            .collect::<io::Result<Vec<_>>>()?;
        // SAFETY: plain system calls without arguments.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let user = (uid != 0).then(|| {
            (
                format!("{uid} {uid} 1\n").into_bytes(),
                format!("{gid} {gid} 1\n").into_bytes(),
            )
        });
        Ok(ReadOnly { binds, user })
    }

    /// Between fork and exec: the child's own namespaces, the folders mounted read only, and its
    /// working folder entered again (it may be below a mount). Only system calls, on memory
    /// allocated before the fork.
    pub(crate) fn enter(&self, cwd: &CString) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            self.enter_linux(cwd)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = cwd;
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "read-only folders need Linux's mount namespaces",
            ))
        }
    }

    #[cfg(target_os = "linux")]
    fn enter_linux(&self, cwd: &CString) -> io::Result<()> {
        let check = |result: libc::c_int| {
            if result == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        };
        let none = std::ptr::null::<libc::c_char>();
        // SAFETY: system calls on NUL-terminated strings and a zeroed `statvfs` owned here.
        unsafe {
            match &self.user {
                Some((uid_map, gid_map)) => {
                    check(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS))?;
                    // Kernels before 3.19 have no such file, and need no "deny".
                    let _ = write_file(c"/proc/self/setgroups", b"deny");
                    write_file(c"/proc/self/uid_map", uid_map)?;
                    write_file(c"/proc/self/gid_map", gid_map)?;
                }
                None => check(libc::unshare(libc::CLONE_NEWNS))?,
            }
            // Nothing mounted here reaches the namespace helixflow is in.
            check(libc::mount(
                none,
                c"/".as_ptr(),
                none,
                libc::MS_REC | libc::MS_SLAVE,
                std::ptr::null(),
            ))?;
            for (folder, target) in &self.binds {
                check(libc::mount(
                    folder.as_ptr(),
                    target.as_ptr(),
                    none,
                    libc::MS_BIND,
                    std::ptr::null(),
                ))?;
                // A remount must keep the flags the mount has (`nosuid`, `nodev`, …): in a user
                // namespace they are locked.
                let mut stat: libc::statvfs = std::mem::zeroed();
                check(libc::statvfs(target.as_ptr(), &raw mut stat))?;
                check(libc::mount(
                    none,
                    target.as_ptr(),
                    none,
                    libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | kept_flags(stat.f_flag),
                    std::ptr::null(),
                ))?;
            }
            check(libc::chdir(cwd.as_ptr()))
        }
    }
}

/// The mount flags `statvfs` reports that a read-only remount must keep.
#[cfg(target_os = "linux")]
fn kept_flags(reported: libc::c_ulong) -> libc::c_ulong {
    [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ]
    .iter()
    .filter(|(st, _)| reported & st != 0)
    .fold(0, |flags, (_, ms)| flags | ms)
}

/// Writes `bytes` to the file at `path` with one `write`, between fork and exec.
#[cfg(target_os = "linux")]
unsafe fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: the caller's: plain system calls on a NUL-terminated path and a live buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let error = io::Error::last_os_error();
        libc::close(fd);
        if usize::try_from(written).ok() == Some(bytes.len()) {
            Ok(())
        } else {
            Err(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_of_an_area_read_its_folders_but_cannot_write_them() {
        if let Err(why) = available() {
            eprintln!("read-only folders are not available here: {why}");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (folder, area) = (dir.path().join("folder"), dir.path().join("area"));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("kept.txt"), "before").unwrap();
        std::fs::create_dir_all(area.join("shared")).unwrap();
        let registered = protect(
            &area,
            &[
                (folder.clone(), area.join("shared")),
                (folder.clone(), folder.clone()),
            ],
        )
        .unwrap();
        let read_only = for_folder(&area.join("sub")).unwrap();
        assert!(for_folder(dir.path()).is_none());
        let cwd = c_path(&area).unwrap();
        let mut command = std::process::Command::new("/bin/sh");
        command.arg("-c").arg(
            "cat shared/kept.txt; echo changed > shared/kept.txt; echo x > \"$1/kept.txt\"; echo y > \"$1/new.txt\"; echo fine > own.txt",
        );
        command.arg("sh").arg(&folder).current_dir(&area);
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: `enter` makes only system calls, on memory allocated before the fork.
            unsafe {
                command.pre_exec(move || read_only.enter(&cwd));
            }
        }
        let out = command.output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "before");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr)
                .matches("Read-only file system")
                .count(),
            3,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            std::fs::read_to_string(folder.join("kept.txt")).unwrap(),
            "before"
        );
        assert!(!folder.join("new.txt").exists());
        assert_eq!(
            std::fs::read_to_string(area.join("own.txt")).unwrap(),
            "fine\n"
        );
        // helixflow itself sees the folders as they are.
        assert_eq!(std::fs::read_dir(area.join("shared")).unwrap().count(), 0);
        drop(registered);
        assert!(for_folder(&area).is_none());
    }
}
