//! Real git repositories for the tests of remote imports: a bare repository with a work tree that
//! commits and pushes to it, a `git daemon` serving it on 127.0.0.1, and a `git` on `PATH` that
//! notes every call before it runs the real one.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A bare repository `lib.git` and a work tree (`work/`) whose commits are pushed to it.
pub(crate) struct Repo {
    dir: tempfile::TempDir,
}

/// Runs git in `folder` with a fixed identity and no signing, whatever the machine's settings.
pub(crate) fn git(folder: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args([
            "-c",
            "user.name=helixflow",
            "-c",
            "user.email=helixflow@example.com",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "tag.gpgsign=false",
        ])
        .args(args)
        .current_dir(folder)
        .stdin(Stdio::null())
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

impl Repo {
    /// An empty repository.
    pub(crate) fn new() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        git(
            dir.path(),
            &["init", "--quiet", "--bare", "-b", "main", "lib.git"],
        );
        git(dir.path(), &["init", "--quiet", "-b", "main", "work"]);
        git(
            &dir.path().join("work"),
            &["remote", "add", "origin", "../lib.git"],
        );
        Repo { dir }
    }

    /// The folder that holds the bare repository (`lib.git`), for `git daemon`.
    pub(crate) fn base(&self) -> &Path {
        self.dir.path()
    }

    /// The bare repository.
    pub(crate) fn bare(&self) -> PathBuf {
        self.dir.path().join("lib.git")
    }

    /// `git+file://…/lib.git//FILE`.
    pub(crate) fn url(&self, file: &str) -> String {
        format!("git+file://{}//{file}", self.bare().display())
    }

    /// The repository part of [`Repo::url`].
    pub(crate) fn repository(&self) -> String {
        format!("git+file://{}", self.bare().display())
    }

    /// Writes a file of the work tree.
    pub(crate) fn write(&self, path: &str, text: &str) -> &Self {
        let full = self.dir.path().join("work").join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
        self
    }

    /// Commits everything and pushes `main`; the commit's id.
    pub(crate) fn commit(&self, message: &str) -> String {
        let work = self.dir.path().join("work");
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "--quiet", "-m", message]);
        git(&work, &["push", "--quiet", "origin", "main"]);
        git(&work, &["rev-parse", "HEAD"])
    }

    /// Points the tag `name` at the last commit (moving it when it exists) and pushes it.
    pub(crate) fn tag(&self, name: &str) {
        let work = self.dir.path().join("work");
        git(&work, &["tag", "--force", "-a", "-m", name, name]);
        git(&work, &["push", "--quiet", "--force", "origin", name]);
    }
}

/// A `git daemon` serving the repositories below a folder on 127.0.0.1, on a free port. It is
/// killed when dropped, which a failing test does too as it unwinds; should the test's thread
/// end otherwise, the kernel kills it (`PR_SET_PDEATHSIG`).
pub(crate) struct Daemon {
    child: Child,
    /// Its port.
    pub(crate) port: u16,
}

impl Daemon {
    /// Serves `base` (every repository below it) read-only.
    pub(crate) fn serve(base: &Path) -> Daemon {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        // `git-daemon` itself, not `git daemon`: git would run it as a child of its own, which
        // killing `git` leaves running.
        let exec_path = Command::new("git")
            .arg("--exec-path")
            .output()
            .expect("git runs");
        let exec_path = String::from_utf8_lossy(&exec_path.stdout).trim().to_owned();
        let mut command = Command::new(Path::new(&exec_path).join("git-daemon"));
        command
            .arg("--reuseaddr")
            .arg("--export-all")
            .arg("--listen=127.0.0.1")
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", base.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = command.spawn().expect("git daemon starts");
        let daemon = Daemon { child, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "git daemon did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        daemon
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A folder with a `git` that notes each call (its arguments, one line) in `calls.log` beside
/// it, waits `pause` seconds before an `archive`, and then runs the real git.
pub(crate) struct GitSpy {
    dir: tempfile::TempDir,
}

impl GitSpy {
    pub(crate) fn new(pause: &str) -> GitSpy {
        let real = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|dir| dir.join("git"))
            .find(|candidate| candidate.is_file())
            .expect("git on PATH");
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let log = dir.path().join("calls.log");
        let script = format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nif [ \"$1\" = archive ]; then sleep {pause}; fi\nexec '{}' \"$@\"\n",
            log.display(),
            real.display()
        );
        let spy = bin.join("git");
        std::fs::write(&spy, script).unwrap();
        let mut permissions = std::fs::metadata(&spy).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
        std::fs::set_permissions(&spy, permissions).unwrap();
        GitSpy { dir }
    }

    /// `PATH` with the spy first.
    pub(crate) fn path(&self) -> String {
        let rest = std::env::var("PATH").unwrap_or_default();
        format!("{}:{rest}", self.dir.path().join("bin").display())
    }

    /// The calls so far, one per line.
    pub(crate) fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("calls.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Forgets the calls so far.
    pub(crate) fn clear(&self) {
        let _ = std::fs::remove_file(self.dir.path().join("calls.log"));
    }
}
