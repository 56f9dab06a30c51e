//! Supervising one child process. Every child helixflow starts — agents, verifiers, `run` steps,
//! gate commands, fixes, `escalate` — goes through [`run`]:
//!
//! - it runs in its own process group, in the given working directory, with helixflow's environment
//!   plus the given additions (later ones win);
//! - its argv is passed as given, never through a shell (only [`ChildSpec::shell`], for trusted text
//!   from the pipeline file, asks for `sh -c`);
//! - its standard output and standard error go to two log files, never held whole in memory:
//!   streamed through the redactor when there are secrets or an idle timeout to watch, otherwise
//!   written by the child itself;
//! - on a timeout (`timeout`, `idle-timeout`) or a soft cancel, the whole group gets TERM, then after
//!   the grace period KILL; a hard cancel sends KILL at once;
//! - no orphans: when the child exits on its own, whatever it left running in its group (a
//!   background server, a forgotten `sleep &`) is stopped the same way (TERM, grace, KILL) before
//!   [`run`] returns; so is whatever left the group on purpose (`setsid`, a double fork), found
//!   through the subreaper (see [`tree`]).

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub(crate) mod group;
pub(crate) mod procfs;
pub(crate) mod readonly;
pub(crate) mod shell;
pub(crate) mod tree;
pub(crate) mod watchdog;

use crate::event::{ChildExit, TimeoutKind};
use crate::redact::{RedactStream, Redactor};
use group::{group_alive, signal_group};

/// The grace period between TERM and KILL unless a [`ChildSpec`] says otherwise.
pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// How often the group is checked while waiting for it to end after a signal.
const POLL: Duration = Duration::from_millis(20);

/// How long to wait, after KILL, for the group's processes to disappear; SIGKILL cannot be caught,
/// so only a process stuck in the kernel (uninterruptible I/O) can outlast it.
const KILL_WAIT: Duration = Duration::from_secs(2);

/// How long to keep reading output after the group has ended. Once every process of the group is
/// gone the pipes reach their end at once; only a process that left the group (`setsid`) can keep
/// them open, and helixflow does not wait for it.
const DRAIN: Duration = Duration::from_secs(2);

/// Size of one read from a child's output.
const CHUNK: usize = 64 * 1024;

/// Two-level cancellation: `soft` (first Ctrl-C, run timeout): TERM, grace, KILL; `hard` (second
/// Ctrl-C): KILL at once.
#[derive(Debug, Clone, Default)]
pub struct Cancel {
    /// Stop children gracefully: TERM to the group, the grace period, then KILL.
    pub soft: CancellationToken,
    /// Stop children now: KILL to the group.
    pub hard: CancellationToken,
}

impl Cancel {
    /// Whether either level has been triggered.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.soft.is_cancelled() || self.hard.is_cancelled()
    }
}

/// What to start.
#[derive(Debug, Clone)]
pub struct ChildSpec {
    /// The program: a name looked up on `PATH`, or a path.
    pub program: OsString,
    /// The arguments after the program, passed as they are.
    pub args: Vec<OsString>,
    /// The working directory (the workspace).
    pub cwd: PathBuf,
    /// Added to helixflow's environment, in order; a later entry wins over an earlier one.
    pub env: Vec<(OsString, OsString)>,
    /// Written to standard input, which is then closed; `None` connects standard input to
    /// `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    /// The log file for standard output (created or truncated).
    pub stdout: PathBuf,
    /// The log file for standard error (created or truncated); a different file from `stdout`.
    pub stderr: PathBuf,
    /// Wall-clock limit.
    pub timeout: Option<Duration>,
    /// Longest time without output on either stream.
    pub idle_timeout: Option<Duration>,
    /// Time between TERM and KILL.
    pub grace: Duration,
    /// Applied to both logs.
    pub redactor: Arc<Redactor>,
    /// Start the child from tokio's blocking pool. `posix_spawn` waits for the child's `exec`;
    /// when more children start at once than there are cores, those waits would hold up the one
    /// thread that drives every phase (but the hand-off costs more than it saves when they
    /// do not).
    pub spawn_in_pool: bool,
    /// Make the child a subreaper too, so that what it detaches stays below it while it runs
    /// (agents and verifiers). Without it (the pipeline's own commands: `run` steps, gate
    /// commands), the child starts the fast way (`posix_spawn`) and what it detaches is adopted
    /// by helixflow, which stops it all the same when a child ends.
    pub keeps_what_it_detaches: bool,
    /// The command, when this is `sh -c COMMAND`: started without the shell when it is a plain
    /// list of words (see [`shell`]).
    shell_command: Option<String>,
}

impl ChildSpec {
    /// `sh -c COMMAND`, for `run` steps, gate commands, fixes and `escalate`: trusted text from the
    /// pipeline file only.
    pub fn shell(
        command: &str,
        cwd: &Path,
        stdout: impl Into<PathBuf>,
        stderr: impl Into<PathBuf>,
    ) -> Self {
        let mut spec = Self::new(
            // POSIX puts the shell at /bin/sh; a PATH search costs a failed exec per folder.
            OsString::from("/bin/sh"),
            vec![OsString::from("-c"), OsString::from(command)],
            cwd,
            stdout.into(),
            stderr.into(),
        );
        spec.shell_command = Some(command.to_owned());
        spec.keeps_what_it_detaches = false;
        spec
    }

    /// The program `argv[0]` with the arguments `argv[1..]`, passed as they are (no shell); an
    /// empty `argv` is an error.
    pub fn argv(
        argv: &[String],
        cwd: &Path,
        stdout: impl Into<PathBuf>,
        stderr: impl Into<PathBuf>,
    ) -> io::Result<Self> {
        let Some((program, rest)) = argv.split_first() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "cannot start a command with no program: the argv is empty",
            ));
        };
        Ok(Self::new(
            OsString::from(program),
            rest.iter().map(OsString::from).collect(),
            cwd,
            stdout.into(),
            stderr.into(),
        ))
    }

    /// A spec with no environment additions, no standard input, no limits, the default grace period
    /// and no secrets to redact.
    fn new(
        program: OsString,
        args: Vec<OsString>,
        cwd: &Path,
        stdout: PathBuf,
        stderr: PathBuf,
    ) -> Self {
        Self {
            program,
            args,
            cwd: cwd.to_path_buf(),
            env: Vec::new(),
            stdin: None,
            stdout,
            stderr,
            timeout: None,
            idle_timeout: None,
            grace: DEFAULT_GRACE,
            redactor: Arc::new(Redactor::default()),
            spawn_in_pool: false,
            keeps_what_it_detaches: true,
            shell_command: None,
        }
    }
}

/// Why supervision stopped the child before it exited.
#[derive(Debug, Clone, Copy)]
enum Stop {
    Timeout(TimeoutKind),
    Soft,
    Hard,
}

/// Runs the child to the end under supervision and returns how it ended.
///
/// Returns an error when a log file cannot be created or written, or the child cannot be started
/// (the message names the program). When `cancel` is already triggered, nothing is started: the
/// logs are created empty and the exit says `cancelled`. If the returned future is dropped before
/// it completes, the child's whole group is killed.
#[allow(
    clippy::too_many_lines,
    reason = "not yet cut into named steps; a known exception to remove"
)]
pub async fn run(mut spec: ChildSpec, cancel: &Cancel) -> io::Result<ChildExit> {
    let started = Instant::now();
    let stdout_log = create_log(&spec.stdout)?;
    let stderr_log = create_log(&spec.stderr)?;
    if cancel.is_cancelled() {
        return Ok(ChildExit {
            code: None,
            signal: None,
            timeout: None,
            cancelled: true,
            duration_ms: 0,
            stdout_bytes: 0,
            stderr_bytes: 0,
        });
    }
    // With nothing to redact and no idle timeout to watch, the child writes its logs itself: no
    // pipes, no copying, no wake-ups per chunk. Otherwise its output goes through pumps.
    let direct = spec.redactor.is_empty() && spec.idle_timeout.is_none();
    let (outputs, stdout_log, stderr_log) = if direct {
        (Some((stdout_log, stderr_log)), None, None)
    } else {
        let tokio_file = tokio::fs::File::from_std;
        (
            None,
            Some(tokio_file(stdout_log)),
            Some(tokio_file(stderr_log)),
        )
    };
    tree::become_subreaper();
    // The run's watchdog starts with its first child.
    watchdog::ensure();
    let mut child = spawn(&spec, outputs).await?;
    let pgid = child
        .id()
        .and_then(|pid| libc::pid_t::try_from(pid).ok())
        .ok_or_else(|| io::Error::other("the child exited before its process id was known"))?;
    let mut guard = GroupGuard { pgid, armed: true };
    watchdog::started(pgid);

    let (activity, last_output) = watch::channel(Instant::now());
    let stop_reading = CancellationToken::new();
    let stdout_pump = child.stdout.take().zip(stdout_log).map(|(pipe, log)| {
        Task(tokio::spawn(pump(
            pipe,
            log,
            spec.redactor.stream(),
            activity.clone(),
            stop_reading.clone(),
        )))
    });
    let stderr_pump = child.stderr.take().zip(stderr_log).map(|(pipe, log)| {
        Task(tokio::spawn(pump(
            pipe,
            log,
            spec.redactor.stream(),
            activity,
            stop_reading.clone(),
        )))
    });
    let stdin_writer = match (child.stdin.take(), spec.stdin.take()) {
        (Some(mut pipe), Some(bytes)) => Some(Task(tokio::spawn(async move {
            pipe.write_all(&bytes).await?;
            pipe.shutdown().await
        }))),
        _ => None,
    };

    let outcome = supervise(&mut child, &spec, cancel, started, &last_output).await?;
    let (status, timeout, cancelled) = match outcome {
        Ok(status) => {
            stop_group(
                &mut child,
                Some(status),
                pgid,
                spec.grace,
                false,
                &cancel.hard,
            )
            .await?;
            (status, None, false)
        }
        Err(stop) => {
            let kill_now = matches!(stop, Stop::Hard);
            let status =
                stop_group(&mut child, None, pgid, spec.grace, kill_now, &cancel.hard).await?;
            match stop {
                Stop::Timeout(kind) => (status, Some(kind), false),
                Stop::Soft | Stop::Hard => (status, None, true),
            }
        }
    };
    tree::unregister(pgid);
    // What the child detached from its group (a daemon) was adopted by helixflow when the child
    // ended; it must not go on changing the work once it is judged.
    let grace = if cancel.hard.is_cancelled() {
        Duration::ZERO
    } else {
        spec.grace
    };
    tree::stop_leftovers(
        grace,
        &cancel.hard,
        watchdog::started_process,
        watchdog::ended_process,
    )
    .await;

    let drained = Instant::now() + DRAIN;
    let mut stdout_bytes = finish_pump(stdout_pump, drained, &stop_reading).await?;
    let mut stderr_bytes = finish_pump(stderr_pump, drained, &stop_reading).await?;
    if direct {
        stdout_bytes = std::fs::metadata(&spec.stdout).map_or(0, |m| m.len());
        stderr_bytes = std::fs::metadata(&spec.stderr).map_or(0, |m| m.len());
    }
    if let Some(writer) = stdin_writer {
        finish_stdin(writer, drained).await?;
    }
    guard.armed = false;

    Ok(ChildExit {
        code: status.code(),
        signal: status.signal(),
        timeout,
        cancelled,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        stdout_bytes,
        stderr_bytes,
    })
}

/// Starts the child in a process group of its own, writing to `outputs` (stdout, stderr) when
/// given, else to pipes. A shell command that needs no shell is started without one; should that
/// fail, the shell gets it, to report the failure its own way.
async fn spawn(
    spec: &ChildSpec,
    outputs: Option<(std::fs::File, std::fs::File)>,
) -> io::Result<Child> {
    let outputs = match without_shell(spec) {
        Some((program, words)) => {
            let to_logs = outputs.is_some();
            let mut command = command_for(
                spec,
                program.as_os_str(),
                words[1..].iter().map(OsStr::new),
                outputs,
            );
            // As the shell passes it: the name as written, not where it was found.
            command.arg0(words[0]);
            if let Ok(child) = start(spec, command).await {
                return Ok(child);
            }
            // Nothing ran, so nothing was written: the logs are opened afresh for the shell.
            if to_logs {
                Some((create_log(&spec.stdout)?, create_log(&spec.stderr)?))
            } else {
                None
            }
        }
        None => outputs,
    };
    let command = command_for(
        spec,
        &spec.program,
        spec.args.iter().map(OsString::as_os_str),
        outputs,
    );
    start(spec, command)
        .await
        .map_err(|error| start_error(spec, &error))
}

/// Where the program of a shell command that can start without the shell is, and the command's
/// words (the program's name as written first).
fn without_shell(spec: &ChildSpec) -> Option<(PathBuf, Vec<&str>)> {
    let words = shell::plain_words(spec.shell_command.as_deref()?)?;
    // The child's `PATH`: the last one set for it, else helixflow's own.
    let path = match spec.env.iter().rev().find(|(name, _)| name == "PATH") {
        Some((_, value)) => value.clone(),
        None => std::env::var_os("PATH")?,
    };
    let program = shell::find_program(words[0], &path)?;
    Some((program, words))
}

fn command_for<'a>(
    spec: &ChildSpec,
    program: &OsStr,
    args: impl Iterator<Item = &'a OsStr>,
    outputs: Option<(std::fs::File, std::fs::File)>,
) -> Command {
    let (stdout, stderr) = match outputs {
        Some((out, err)) => (Stdio::from(out), Stdio::from(err)),
        None => (Stdio::piped(), Stdio::piped()),
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(&spec.cwd)
        .envs(spec.env.iter().map(|(name, value)| (name, value)))
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0)
        // The group, not just the child, must go: `GroupGuard` sees to that once the child is
        // ours. Until then (a run dropped while the spawn is in flight), dropping the child kills
        // it.
        .kill_on_drop(true);
    if spec.keeps_what_it_detaches {
        // SAFETY: only prctl runs between fork and exec.
        unsafe {
            command.pre_exec(tree::subreaper_in_child);
        }
    }
    // A child started in an attempt's worktree sees its shared folders read only.
    if let Some(read_only) = readonly::for_folder(&spec.cwd) {
        let cwd = readonly::c_path(&spec.cwd);
        // SAFETY: `enter` makes only system calls, on memory allocated before the fork; a
        // working folder that is no system path fails the start.
        unsafe {
            command.pre_exec(move || match &cwd {
                Ok(cwd) => read_only.enter(cwd),
                Err(_) => Err(io::Error::from(io::ErrorKind::InvalidInput)),
            });
        }
    }
    command
}

/// Spawns `command`, in the blocking pool when `spec.spawn_in_pool` says so.
async fn start(spec: &ChildSpec, mut command: Command) -> io::Result<Child> {
    // Registered before anything looks for processes helixflow adopted (see `tree`).
    let mut spawn = move || {
        let _starting = tree::STARTING
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let child = command.spawn()?;
        if let Some(pid) = child.id().and_then(|pid| libc::pid_t::try_from(pid).ok()) {
            tree::register(pid);
        }
        Ok(child)
    };
    if spec.spawn_in_pool {
        tokio::task::spawn_blocking(spawn)
            .await
            .map_err(io::Error::other)?
    } else {
        spawn()
    }
}

/// The error for a child that could not be started.
fn start_error(spec: &ChildSpec, error: &io::Error) -> io::Error {
    // Checked only when the spawn failed: a missing working directory fails it too.
    if spec.cwd.is_dir() {
        spawn_error(&spec.program, error)
    } else {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "cannot start `{}`: the working directory {} does not exist",
                spec.program.to_string_lossy(),
                spec.cwd.display()
            ),
        )
    }
}

/// Waits for the child to exit, or for a reason to stop it: a cancel, the wall-clock timeout, or
/// `idle_timeout` passing since the last output.
async fn supervise(
    child: &mut Child,
    spec: &ChildSpec,
    cancel: &Cancel,
    started: Instant,
    last_output: &watch::Receiver<Instant>,
) -> io::Result<Result<ExitStatus, Stop>> {
    let deadline = spec.timeout.map(|limit| started + limit);
    loop {
        let idle_deadline = spec.idle_timeout.map(|limit| *last_output.borrow() + limit);
        // Ordered so that a child that has already exited on its own is reported as such, even when
        // a cancel or a timeout arrives at the same moment.
        tokio::select! {
            biased;
            status = child.wait() => return Ok(Ok(status?)),
            () = cancel.hard.cancelled() => return Ok(Err(Stop::Hard)),
            () = cancel.soft.cancelled() => return Ok(Err(Stop::Soft)),
            () = sleep_until(deadline) => return Ok(Err(Stop::Timeout(TimeoutKind::Wall))),
            () = sleep_until(idle_deadline) => {
                // Output may have arrived while this sleep was pending; the loop then re-arms it
                // from the latest output.
                let silent_since = *last_output.borrow();
                if spec.idle_timeout.is_some_and(|limit| silent_since + limit <= Instant::now()) {
                    return Ok(Err(Stop::Timeout(TimeoutKind::Idle)));
                }
            }
        }
    }
}

/// Reads at most the last `max_bytes` of a log file as lossy UTF-8 (for feedback: "the tail of a
/// failing command's output"). A character cut by the start of the tail is dropped.
pub fn tail(path: &Path, max_bytes: u64) -> io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};

    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let start = len.saturating_sub(max_bytes);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::with_capacity(usize::try_from(len - start).unwrap_or(0));
    file.take(max_bytes).read_to_end(&mut bytes)?;
    let mut from = 0;
    if start > 0 {
        // UTF-8 continuation bytes (10xxxxxx) at the cut belong to a character whose start was cut.
        while from < bytes.len().min(3) && bytes[from] & 0xC0 == 0x80 {
            from += 1;
        }
    }
    Ok(String::from_utf8_lossy(&bytes[from..]).into_owned())
}

/// A log as text: all of it up to `head + tail` bytes, else its first `head` and last `tail`
/// bytes around a line saying how much was left out.
pub(crate) fn head_and_tail(path: &Path, head: u64, tail_bytes: u64) -> io::Result<String> {
    use std::io::Read;

    let len = std::fs::metadata(path)?.len();
    if len <= head + tail_bytes {
        return tail(path, len);
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(head)
        .read_to_end(&mut bytes)?;
    // A character cut at the end of the head is left out with the rest.
    let text = match std::str::from_utf8(&bytes) {
        Ok(text) => text.to_owned(),
        Err(e) if e.error_len().is_none() => {
            String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned()
        }
        Err(_) => String::from_utf8_lossy(&bytes).into_owned(),
    };
    let end = tail(path, tail_bytes)?;
    let left_out = len.saturating_sub(text.len() as u64 + end.len() as u64);
    Ok(format!("{text}\n[… {left_out} bytes left out …]\n{end}"))
}

/// Creates (or truncates) a log file, and its folder when missing.
///
/// Done on the calling thread: two quick system calls cost less than two trips to tokio's
/// blocking pool, which is what a short step would otherwise spend most of its overhead on.
fn create_log(path: &Path) -> io::Result<std::fs::File> {
    let create = || std::fs::File::create(path);
    let file = match create() {
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|error| {
                    io::Error::new(
                        error.kind(),
                        format!("cannot create the log folder {}: {error}", parent.display()),
                    )
                })?;
            }
            create()
        }
        other => other,
    };
    file.map_err(|error| {
        io::Error::new(
            error.kind(),
            format!("cannot create the log file {}: {error}", path.display()),
        )
    })
}

/// An error for a child that could not be started, naming the program.
fn spawn_error(program: &OsStr, error: &io::Error) -> io::Error {
    let name = program.to_string_lossy();
    let message = match error.kind() {
        io::ErrorKind::NotFound if name.contains('/') => {
            format!("cannot start `{name}`: no such file")
        }
        io::ErrorKind::NotFound => {
            format!("cannot start `{name}`: program not found on PATH")
        }
        io::ErrorKind::PermissionDenied => {
            format!("cannot start `{name}`: permission denied (is it executable?)")
        }
        _ => format!("cannot start `{name}`: {error}"),
    };
    io::Error::new(error.kind(), message)
}

/// Sleeps until `at`, or forever when there is no `at`.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Copies one output stream into its log through the redactor, counting the bytes the child wrote
/// and recording the time of each chunk for the idle timeout. Stops at the end of the stream or
/// when `stop` is triggered.
///
/// A failed log write does not stop the reading: a child blocked on a full pipe would otherwise
/// hang until a timeout. The first write error is returned at the end.
async fn pump(
    mut pipe: impl AsyncRead + Unpin,
    mut log: tokio::fs::File,
    mut redact: RedactStream,
    activity: watch::Sender<Instant>,
    stop: CancellationToken,
) -> io::Result<u64> {
    let mut buffer = vec![0; CHUNK];
    let mut total = 0_u64;
    let mut write_error = None;
    loop {
        let read = tokio::select! {
            read = pipe.read(&mut buffer) => read?,
            () = stop.cancelled() => break,
        };
        if read == 0 {
            break;
        }
        total += read as u64;
        activity.send_replace(Instant::now());
        if write_error.is_none() {
            let redacted = redact.push(&buffer[..read]);
            if let Err(error) = log.write_all(&redacted).await {
                write_error = Some(error);
            }
        }
    }
    if write_error.is_none() {
        let rest = redact.finish();
        if let Err(error) = async {
            log.write_all(&rest).await?;
            log.flush().await
        }
        .await
        {
            write_error = Some(error);
        }
    }
    match write_error {
        Some(error) => Err(io::Error::new(
            error.kind(),
            format!("cannot write the child's log: {error}"),
        )),
        None => Ok(total),
    }
}

/// Waits until `drained` for a pump to reach the end of its stream, then stops it, and returns the
/// bytes it read.
async fn finish_pump(
    pump: Option<Task<io::Result<u64>>>,
    drained: Instant,
    stop: &CancellationToken,
) -> io::Result<u64> {
    let Some(mut pump) = pump else {
        return Ok(0);
    };
    let result = if let Ok(result) = tokio::time::timeout_at(drained, &mut pump.0).await {
        result
    } else {
        stop.cancel();
        (&mut pump.0).await
    };
    result.map_err(io::Error::other)?
}

/// Waits until `drained` for the standard-input writer. A child that does not read its input (or
/// ends before reading all of it) is not an error: the write then fails with a broken pipe.
async fn finish_stdin(writer: Task<io::Result<()>>, drained: Instant) -> io::Result<()> {
    let mut writer = writer;
    match tokio::time::timeout_at(drained, &mut writer.0).await {
        Ok(Ok(Err(error))) if error.kind() != io::ErrorKind::BrokenPipe => Err(io::Error::new(
            error.kind(),
            format!("cannot write the child's standard input: {error}"),
        )),
        Ok(Err(join_error)) => Err(io::Error::other(join_error)),
        // Written, refused by a child that did not read, or still blocked on a pipe a process
        // outside the group holds open (dropping the task aborts it).
        _ => Ok(()),
    }
}

/// Stops whatever is left of the group `pgid` and reaps the child.
///
/// `status` is the child's exit status when it has already been reaped. Unless `kill_now`, the
/// group gets TERM and has `grace` to end (a hard cancel cuts the grace short); then KILL. Returns
/// the child's exit status.
async fn stop_group(
    child: &mut Child,
    mut status: Option<ExitStatus>,
    pgid: libc::pid_t,
    grace: Duration,
    kill_now: bool,
    hard: &CancellationToken,
) -> io::Result<ExitStatus> {
    if status.is_some() && !group_alive(pgid) {
        return reap(child, status).await;
    }
    if !kill_now {
        signal_group(pgid, libc::SIGTERM);
        let grace_end = Instant::now() + grace;
        loop {
            if status.is_none() {
                status = child.try_wait()?;
            }
            // The child, once dead and not yet reaped, still counts as a member of its group, so
            // it is reaped first.
            if status.is_some() && !group_alive(pgid) {
                return reap(child, status).await;
            }
            if Instant::now() >= grace_end {
                break;
            }
            tokio::select! {
                () = tokio::time::sleep(POLL.min(grace_end - Instant::now())) => {}
                () = hard.cancelled() => break,
            }
        }
    }
    signal_group(pgid, libc::SIGKILL);
    let status = reap(child, status).await?;
    let kill_end = Instant::now() + KILL_WAIT;
    while group_alive(pgid) && Instant::now() < kill_end {
        tokio::time::sleep(POLL).await;
    }
    Ok(status)
}

/// The child's exit status, waiting for it when not known yet.
async fn reap(child: &mut Child, status: Option<ExitStatus>) -> io::Result<ExitStatus> {
    match status {
        Some(status) => Ok(status),
        None => child.wait().await,
    }
}

/// Kills the group if [`run`]'s future is dropped before it has finished with the child.
struct GroupGuard {
    pgid: libc::pid_t,
    armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            signal_group(self.pgid, libc::SIGKILL);
        }
        tree::unregister(self.pgid);
        watchdog::ended(self.pgid);
    }
}

/// A spawned task that is aborted when dropped, so nothing of a dropped [`run`] lives on.
struct Task<T>(JoinHandle<T>);

impl<T> Drop for Task<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_argv_is_an_error() {
        let error = ChildSpec::argv(&[], Path::new("."), "out", "err").unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn tail_keeps_the_end_and_drops_a_cut_character() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, "abc\u{e9}xyz").unwrap();
        assert_eq!(tail(&path, 4).unwrap(), "xyz");
        assert_eq!(tail(&path, 5).unwrap(), "\u{e9}xyz");
        assert_eq!(tail(&path, 100).unwrap(), "abc\u{e9}xyz");
        assert_eq!(tail(&path, 0).unwrap(), "");
    }
}
