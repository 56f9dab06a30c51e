"""Shared support for the end-to-end suite: scripted model servers on 127.0.0.1, a fresh HOME and
workspace per scenario, and `helixflow run` on a pipeline that imports the presets exactly as
shipped in examples/agents.kdl.

A scenario scripts the model, not the CLI: each API's server (servers/*.py) turns the requests a
real CLI sends into a neutral `Turn` and asks the scenario's `brain` what the model says next, as
an `Action` (write a file, run a shell command, answer with text, fail with an HTTP error). The
CLI then does what it really does with that answer: runs its tools, applies its permission
rules, prints its own output.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
PRESETS = REPO / "examples"
CACHE = Path(os.environ.get("HELIXFLOW_E2E_CACHE", Path.home() / ".cache" / "helixflow-e2e"))
HELIXFLOW = Path(os.environ.get("HELIXFLOW_BIN", REPO / "target" / "debug" / "helixflow"))


# --- what the model says ------------------------------------------------------------------------


@dataclasses.dataclass
class Write:
    """Write `content` to `path` (relative to the workspace) with the CLI's file-writing tool."""

    path: str
    content: str


@dataclasses.dataclass
class Shell:
    """Run a shell command with the CLI's shell tool."""

    command: str


@dataclasses.dataclass
class Say:
    """The final answer: text, and the end of the turn."""

    text: str


@dataclasses.dataclass
class Fail:
    """An HTTP error from the API: `status` with the API's own error body carrying `message`.
    `retry_after` adds a Retry-After header (seconds)."""

    status: int
    message: str
    retry_after: int | None = None


@dataclasses.dataclass
class Tool:
    """Call the CLI's tool `name` with `input` as it is (an MCP tool, Claude Code's ToolSearch)."""

    name: str
    input: dict


Action = Write | Shell | Say | Fail | Tool


@dataclasses.dataclass
class ToolResult:
    """What the CLI sent back for a tool call: its text, and whether the CLI marked it an error
    (refused by a permission rule, or failed)."""

    text: str
    is_error: bool


@dataclasses.dataclass
class Turn:
    """One request, as the brain sees it.

    `first_user` is the first user message of the conversation (the task the session was started
    with), `last_user` the newest user text (on a resume: what the retry sent), `tool_results` the
    results of the previous response's tool calls (empty when the newest message is user text),
    `calls` how many tool-calling responses this conversation already had, `system` the system
    prompt, `workspace` the folder the CLI runs in, when the request tells it."""

    system: str
    first_user: str
    last_user: str
    user_texts: list[str]
    tool_results: list[ToolResult]
    calls: int
    raw: dict


Brain = Callable[[Turn], Action]


class Recorder:
    """Every request a server received, in order: (path, headers, parsed JSON body)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[tuple[str, dict, dict]] = []

    def add(self, path: str, headers: dict, body: dict) -> None:
        with self.lock:
            self.requests.append((path, headers, body))


class ScriptedServer:
    """An HTTP server on 127.0.0.1 with an OS-chosen port, serving `handler_class` in a thread.
    The handler class reads `self.server.brain` and `self.server.recorder`."""

    def __init__(self, handler_class: type[BaseHTTPRequestHandler], brain: Brain) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler_class)
        self.httpd.daemon_threads = True
        self.httpd.brain = brain  # type: ignore[attr-defined]
        self.httpd.recorder = Recorder()  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def recorder(self) -> Recorder:
        return self.httpd.recorder  # type: ignore[attr-defined]

    def __enter__(self) -> "ScriptedServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class JsonHandler(BaseHTTPRequestHandler):
    """Base for the API servers: reads a JSON body, records it, and writes JSON or SSE."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        if os.environ.get("HELIXFLOW_E2E_VERBOSE"):
            super().log_message(format, *args)

    def read_json(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        self.server.recorder.add(self.path, dict(self.headers), body)  # type: ignore[attr-defined]
        return body

    def send_json(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def send_sse(self, events: list[tuple[str | None, dict]]) -> None:
        """Server-sent events: each (event name or None, JSON data)."""
        chunks = []
        for name, data in events:
            text = ""
            if name:
                text += f"event: {name}\n"
            text += f"data: {json.dumps(data)}\n\n"
            chunks.append(text)
        payload = "".join(chunks).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


# --- a session that is gone ----------------------------------------------------------------------


def losing_session_phase(agent: str, prompt: str, sessions: str, name: str) -> str:
    """A phase `hello` of `agent` that writes `hello.py` under the `syntax` gate, with one retry,
    whose first gate removes the CLI's session files (named like `name` below `$HOME/sessions`)
    after each attempt: a retry then resumes a session that is gone."""
    return f'''
phase "hello" {{
    agent "{agent}"
    prompt "{prompt}"
    outputs {{ file "hello.py" }}
    gates {{
        command "find \\"$HOME/{sessions}\\" -name '{name}' -type f -delete" name="lose-session"
        syntax
    }}
    retries 1
}}
'''


def check_new_session(case: unittest.TestCase, result: "Result", gone: str,
                      logs: tuple[str, ...] = ("stderr.log",)) -> None:
    """The run of a `losing_session_phase` passed in three attempts: attempt 2 resumed and its
    agent said `gone` (in `logs`), attempt 3 started a session of its own, and a warning said so."""
    case.assertEqual(result.code, 0, result.describe())
    case.assertEqual(result.attempts("hello"), 3, result.describe())
    second = json.loads(result.attempt_file("hello", 2, "invocation.json"))
    third = json.loads(result.attempt_file("hello", 3, "invocation.json"))
    case.assertTrue(second["resume"], second)
    case.assertIn(gone, "".join(result.attempt_file("hello", 2, log) for log in logs))
    case.assertFalse(third["resume"], third)
    case.assertNotEqual(third["session_id"], second["session_id"])
    case.assertIn("could not continue the agent's session", result.stderr)


# --- a scenario's world -------------------------------------------------------------------------


@dataclasses.dataclass
class Result:
    code: int
    stdout: str
    stderr: str
    workspace: Path

    def run_dir(self) -> Path:
        folder = self.workspace / ".helixflow" / "runs"
        # `latest` links to the newest run; the runs are the folders.
        runs = sorted(p for p in folder.iterdir() if not p.is_symlink())
        return runs[-1]

    def run_json(self) -> dict:
        return json.loads((self.run_dir() / "run.json").read_text())

    def attempt_dir(self, phase: str, attempt: int) -> Path:
        return self.run_dir() / "phases" / phase / f"attempt-{attempt}"

    def attempt_file(self, phase: str, attempt: int, name: str) -> str:
        return (self.attempt_dir(phase, attempt) / name).read_text()

    def attempts(self, phase: str) -> int:
        folder = self.run_dir() / "phases" / phase
        return len([p for p in folder.iterdir() if p.name.startswith("attempt-")])

    def describe(self) -> str:
        return f"exit {self.code}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


class World:
    """A fresh HOME, a workspace and the environment one CLI needs, for one scenario. Use as a
    context manager; the folders are removed afterwards unless HELIXFLOW_E2E_KEEP is set."""

    def __init__(self, git: bool = False) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="hf-e2e-"))
        self.home = self.root / "home"
        self.workspace = self.root / "ws"
        self.home.mkdir()
        self.workspace.mkdir()
        self.env: dict[str, str] = {
            "HOME": str(self.home),
            "PATH": os.pathsep.join(
                [str(HELIXFLOW.parent), str(CACHE / "bin"), os.environ.get("PATH", "/usr/bin:/bin")]
            ),
            "HELIXFLOW_PATH": str(PRESETS),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "TERM": "dumb",
            "NO_COLOR": "1",
            "TMPDIR": str(self.root / "tmp"),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
        }
        (self.root / "tmp").mkdir()
        if git:
            self.git("init", "-q")
            self.git("-c", "user.email=e2e@example.invalid", "-c", "user.name=e2e",
                     "commit", "-q", "--allow-empty", "-m", "start")

    def git(self, *args: str) -> None:
        subprocess.run(["git", *args], cwd=self.workspace, check=True, env={**os.environ, **self.env})

    def write(self, path: str, text: str) -> Path:
        target = self.workspace / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        return target

    def pipeline(self, body: str) -> Path:
        """Writes pipeline.kdl: the presets imported as shipped, then `body`."""
        return self.write("pipeline.kdl", 'pipeline "e2e"\nimport "agents.kdl"\n' + body)

    def run(self, *args: str, timeout: float = 300) -> Result:
        proc = subprocess.run(
            [str(HELIXFLOW), "run", "pipeline.kdl", "--no-progress", *args],
            cwd=self.workspace,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr, self.workspace)

    def __enter__(self) -> "World":
        return self

    def __exit__(self, *exc) -> None:
        if not os.environ.get("HELIXFLOW_E2E_KEEP"):
            shutil.rmtree(self.root, ignore_errors=True)


def need(binary: str) -> None:
    """Fails loudly when a CLI is not installed: the suite is never silently skipped."""
    if not (CACHE / "bin" / binary).exists():
        raise unittest.SkipTest(
            f"{binary} is not installed in {CACHE}/bin: run e2e/install.sh first"
        ) if os.environ.get("HELIXFLOW_E2E_ALLOW_SKIP") else AssertionError(
            f"{binary} is not installed in {CACHE}/bin: run e2e/install.sh first"
        )
