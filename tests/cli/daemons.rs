//! What an agent detaches from its process group (`setsid`, a double fork) is stopped with the
//! attempt, before its work is judged, and never outlives helixflow.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Test, latest_run};

/// An agent that writes its output, then leaves a daemon (a double fork into a session of its
/// own) that rewrites the output a second later, and exits once the daemon is running.
const DAEMON_AGENT: &str = r"echo agent > out.txt
(setsid sh -c 'echo $$ > daemon.pid; sleep 1; echo daemon > out.txt; sleep 300' > /dev/null 2>&1 &)
while [ ! -s daemon.pid ]; do sleep 0.05; done
";

/// The processes whose working folder is inside `dir`: every process a test's run started there.
pub(crate) fn processes_in(dir: &Path) -> Vec<i32> {
    let dir = std::fs::canonicalize(dir).unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(&dir))
        })
        .collect()
}

/// Kills what a failing test left, so that it leaves nothing running.
fn kill_all(pids: &[i32]) {
    for &pid in pids {
        // SAFETY: SIGKILL to processes this test's run started (their working folder is its own).
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

#[test]
fn a_daemon_the_agent_leaves_is_stopped_before_the_work_is_judged() {
    let test = Test::new().file("agent.sh", DAEMON_AGENT).pipeline(
        r#"pipeline "p"
agent "bot" {
    command "sh" "agent.sh"
}
phase "a" {
    agent "bot"
    prompt "x"
    retries 0
    outputs {
        file "out.txt"
    }
    gates {
        command "pid=$(cat daemon.pid); ! kill -0 $pid 2>/dev/null" name="the daemon is gone"
        command "sleep 2; grep -qx agent out.txt" name="the output is the agent's"
    }
}
"#,
    );
    let outcome = test.with_args(&["run", "--no-progress"]).run();
    let left = processes_in(test.path());
    kill_all(&left);
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
    assert!(left.is_empty(), "processes {left:?} outlived helixflow");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(test.read("out.txt"), "agent\n");
}

#[test]
fn a_daemon_below_a_running_agent_is_stopped_when_helixflow_is_killed() {
    let test = Test::new()
        .file("agent.sh", &format!("{DAEMON_AGENT}touch started\nsleep 300\n"))
        .pipeline(
            "pipeline \"p\"\nagent \"bot\" {\n    command \"sh\" \"agent.sh\"\n}\nphase \"a\" {\n    agent \"bot\"\n    prompt \"x\"\n}\n",
        );
    let mut run = Command::new(env!("CARGO_BIN_EXE_helixflow"))
        .args(["run", "--no-progress"])
        .current_dir(test.path())
        .env("HELIXFLOW_KILL_GRACE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !test.path().join("started").exists() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the agent never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    run.kill().unwrap();
    run.wait().unwrap();
    // The watchdog sees helixflow gone within a second and stops the agent and its daemon.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut left = processes_in(test.path());
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = processes_in(test.path());
    }
    kill_all(&left);
    assert!(
        left.is_empty(),
        "processes {left:?} outlived the killed helixflow"
    );
    assert!(latest_run(test.path()).is_dir());
}
