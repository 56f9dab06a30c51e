"""End to end: the real Gemini CLI (0.61.0) with the `gemini` and `gemini-verifier` presets exactly as
shipped in examples/agents.kdl, against a scripted Gemini API (v1beta) server on 127.0.0.1.

Gemini CLI is pointed at the server with GOOGLE_GEMINI_BASE_URL and GEMINI_API_KEY, and a fresh
$HOME/.gemini/settings.json selecting API-key auth with telemetry, usage statistics and update
checks off (servers/gemini.py `configure`).

Defects covered here: 1 (a retry after a verifier, and two phases at once, each
continue the worker's own session), 4 (untrusted folder), 5 (prompt starting with `-`), 9 (API
error in the feedback and run.json), 10 (a prompt over 128 KiB), 11 (attempt 1 never got an
answer: the retry still has the task), 12 (the real error at the start of a long stderr is kept; no
escape codes), 13 (the journal and `--dry-run` show what each attempt received), 14 (a refused tool
call is no evidence).

Facts these scenarios rely on (Gemini CLI 0.61.0, observed): the prompt may come on standard input
alone (no `--prompt`) in a non-TTY; `--session-id <uuid>` names a new session and `--resume <uuid>`
continues it, but a run that failed before the model answered saved none (`--resume` then exits 42,
"Invalid session identifier"); `--output-format json` prints one pretty-printed document on
stdout at the end ({session_id, response, stats}) and nothing before; an API error leaves stdout
empty, exits with the HTTP status mod 256 and ends stderr with {session_id, error}. Gemini CLI
retries 429 and 5xx itself with backoff, so scenarios fail with 400 or 403.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (  # noqa: E402
    Fail,
    Say,
    ScriptedServer,
    Shell,
    Turn,
    World,
    Write,
    check_new_session,
    losing_session_phase,
    need,
)
from servers import gemini  # noqa: E402
from servers.gemini import GeminiHandler  # noqa: E402

TASK = "Write hello.py that prints hello."

VERDICT_PASS = ('I read hello.py.\n'
                '{"success": true, "errors": [], "checks_passed": ["hello.py prints hello"], '
                '"feedback": ""}')
VERDICT_FAIL = ('I read hello.py.\n'
                '{"success": false, "errors": ["hello.py prints bye, the task asks for hello"], '
                '"checks_passed": ["hello.py exists"], '
                '"feedback": "Make hello.py print hello (verifier-marker-7)."}')

HELLO_PHASE = '''
phase "hello" {
    agent "gemini"
    prompt "%(task)s"
    outputs { file "hello.py" }
    gates { syntax }
    retries %(retries)d
}
'''

SUBAGENT_PHASE = '''
phase "hello" {
    agent "gemini"
    prompt "%(task)s"
    outputs { file "hello.py" }
    verify "sub-agent"
    verifier "gemini-verifier"
    retries %(retries)d
}
'''

WRITE_TOOLS = {"write_file", "replace", "run_shell_command"}

# Folder trust off: isolates a defect from defect 4 (without `--skip-trust`, every run in a fresh
# HOME exits 55 before anything else can go wrong).
NO_FOLDER_TRUST = {"security": {"folderTrust": {"enabled": False}}}


def is_verifier(turn: Turn) -> bool:
    """helixflow's verifier prompt asks for the JSON verdict."""
    return '"checks_passed"' in turn.first_user and "verdict" in turn.first_user


def has_feedback(turn: Turn) -> bool:
    return any("failed verification" in text for text in turn.user_texts)


def requests(server: ScriptedServer) -> list[tuple[dict, Turn]]:
    """The conversation requests (body, Turn), in order."""
    return [(body, gemini.to_turn(body)) for _path, body in gemini.conversation(server)]


def model_calls(body: dict) -> list[dict]:
    """The functionCalls the model made earlier in this conversation (its history)."""
    return [
        part["functionCall"]
        for content in body.get("contents") or []
        if content.get("role") == "model"
        for part in content.get("parts") or []
        if "functionCall" in part
    ]


def hello_brain(broken: str = "def broken(:\n", fixed: str = "print('hello')\n"):
    """A worker that writes `broken` first and `fixed` once it has feedback."""

    def brain(turn: Turn):
        if turn.tool_results:
            return Say("Fixed hello.py." if has_feedback(turn) else "Wrote hello.py.")
        return Write("hello.py", fixed if has_feedback(turn) else broken)

    return brain


class GeminiTest(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls) -> None:
        need("gemini")

    def serve(self, brain) -> ScriptedServer:
        server = ScriptedServer(GeminiHandler, brain)
        server.__enter__()
        self.addCleanup(server.__exit__, None, None, None)
        return server

    def world(self, server: ScriptedServer, settings: dict | None = None) -> World:
        world = World()
        world.__enter__()
        self.addCleanup(world.__exit__, None, None, None)
        world.env.update(gemini.env_for(server.url))
        gemini.write_settings(world.home, settings)
        return world

    def assertRan(self, result, code: int = 0) -> None:  # noqa: N802 - unittest's naming
        self.assertEqual(result.code, code, result.describe())

    # --- happy paths ----------------------------------------------------------------------------

    def test_happy_pass(self):
        server = self.serve(hello_brain(broken="print('hello')\n"))
        world = self.world(server)
        world.pipeline(HELLO_PHASE % {"task": TASK, "retries": 0})
        result = world.run()
        self.assertRan(result)
        self.assertEqual((world.workspace / "hello.py").read_text(), "print('hello')\n")
        # Gemini CLI keeps its sessions under $HOME/.gemini, nothing in the workspace.
        self.assertEqual(sorted(p.name for p in world.workspace.iterdir()),
                         [".helixflow", "hello.py", "pipeline.kdl"])
        seen = requests(server)
        self.assertEqual(len(seen), 2)
        body, turn = seen[0]
        self.assertIn(TASK, turn.first_user)
        self.assertIn("write_file", gemini.tool_names(body))
        self.assertFalse(seen[1][1].tool_results[0].is_error, seen[1][1].tool_results)
        # The router was asked, and answered without the brain.
        self.assertTrue(
            any(gemini.method_of(p)[1] == "generateContent" for p, _h, _b in server.recorder.requests)
        )
        # The prompt went through standard input, and the journal says so (defect 13).
        invocation = json.loads(result.attempt_file("hello", 1, "invocation.json"))
        self.assertTrue(invocation["stdin"])
        self.assertFalse(invocation["resume"])
        self.assertNotIn(TASK, " ".join(invocation["argv"]))
        stdin = result.attempt_file("hello", 1, "stdin.txt")
        self.assertIn(TASK, stdin)
        self.assertEqual(turn.first_user.strip(), stdin.strip())
        self.assertEqual(result.attempt_file("hello", 1, "response.txt").strip(), "Wrote hello.py.")

    def test_retry_with_feedback_resumes_own_session(self):
        """Attempt 1 writes broken Python that `syntax` catches; the retry resumes the session of
        attempt 1 by id (`--resume <id>`), so the request holds the task, attempt 1's history and
        the feedback, and the fix is written."""
        server = self.serve(hello_brain())
        world = self.world(server)
        world.pipeline(HELLO_PHASE % {"task": TASK, "retries": 1})
        result = world.run()
        self.assertRan(result)
        self.assertEqual(result.attempts("hello"), 2)
        self.assertEqual((world.workspace / "hello.py").read_text(), "print('hello')\n")

        retry = [(b, t) for b, t in requests(server) if has_feedback(t)]
        self.assertTrue(retry, "no request carried the feedback")
        body, turn = retry[0]
        self.assertIn(TASK, turn.first_user)
        self.assertIn("# Attempt 1 of 2 failed verification", turn.last_user)
        self.assertIn("hello.py", turn.last_user)
        # Attempt 1's own history: its write of the broken file.
        self.assertIn("def broken(:\n", [c["args"].get("content") for c in model_calls(body)])
        self.assertFalse(retry[-1][1].tool_results[-1].is_error, retry[-1][1].tool_results[-1].text)

        # Defect 13: the journal shows what the resumed agent got.
        first = json.loads(result.attempt_file("hello", 1, "invocation.json"))
        second = json.loads(result.attempt_file("hello", 2, "invocation.json"))
        reported = json.loads(result.attempt_file("hello", 1, "stdout.log"))["session_id"]
        self.assertTrue(second["resume"], second)
        self.assertEqual(second["session_id"], reported)
        self.assertIn(reported, first["argv"])  # helixflow chose it: `--session-id <id>`
        self.assertEqual(second["argv"][second["argv"].index("--resume") + 1], reported)
        given = result.attempt_file("hello", 2, "feedback-given.md")
        self.assertIn("failed verification", given)
        self.assertEqual(result.attempt_file("hello", 2, "stdin.txt").strip(), given.strip())

    def subagent_brain(self, verdict: str, worker_text: str = "print('hello')\n"):
        def brain(turn: Turn):
            if is_verifier(turn):
                if turn.calls == 0:
                    return Write("verifier-notes.txt", "I was here\n")  # refused: read-only
                return Say(verdict)
            if turn.tool_results:
                return Say("Wrote hello.py.")
            return Write("hello.py", worker_text)

        return brain

    def test_subagent_verdict_pass(self):
        server = self.serve(self.subagent_brain(VERDICT_PASS))
        world = self.world(server)
        world.pipeline(SUBAGENT_PHASE % {"task": TASK, "retries": 0})
        result = world.run()
        self.assertRan(result)
        verifier = [t for _, t in requests(server) if is_verifier(t)]
        self.assertEqual(len(verifier), 2)
        self.assertIn(TASK, verifier[0].first_user)
        verdict = json.loads((result.attempt_dir("hello", 1) / "verdict.json").read_text())
        self.assertIs(verdict.get("success"), True, verdict)

    def test_subagent_verdict_fail(self):
        server = self.serve(self.subagent_brain(VERDICT_FAIL, "print('bye')\n"))
        world = self.world(server)
        world.pipeline(SUBAGENT_PHASE % {"task": TASK, "retries": 0})
        result = world.run()
        self.assertRan(result, 1)
        feedback = result.attempt_file("hello", 1, "feedback.md")
        self.assertIn("hello.py prints bye, the task asks for hello", feedback)
        self.assertIn("verifier-marker-7", feedback)

    def test_verifier_cannot_write(self):
        """gemini-verifier runs in the default approval mode: headless, Gemini CLI offers it no
        write_file, replace or run_shell_command; a call to one is refused ("not found") and the
        workspace stays as the worker left it."""

        def brain(turn: Turn):
            if is_verifier(turn):
                if turn.calls == 0:
                    return Write("hello.py", "print('tampered')\n")
                if turn.calls == 1:
                    return Shell("echo tampered > tampered.txt")
                return Say(VERDICT_PASS)
            return Write("hello.py", "print('hello')\n") if not turn.tool_results else Say("Done.")

        server = self.serve(brain)
        world = self.world(server)
        world.pipeline(SUBAGENT_PHASE % {"task": TASK, "retries": 0})
        result = world.run()
        self.assertRan(result)
        self.assertEqual((world.workspace / "hello.py").read_text(), "print('hello')\n")
        self.assertFalse((world.workspace / "tampered.txt").exists())
        verifier = [(b, t) for b, t in requests(server) if is_verifier(t)]
        self.assertEqual(len(verifier), 3)
        self.assertFalse(WRITE_TOOLS & set(gemini.tool_names(verifier[0][0])),
                         gemini.tool_names(verifier[0][0]))
        for _body, turn in verifier[1:]:
            refused = turn.tool_results[0]
            self.assertTrue(refused.is_error, refused.text)
            self.assertIn("not found", refused.text)

    def test_response_extraction(self):
        """`response "json"`: the response is the JSON output's `response` field, not the JSON
        document with its stats; a response without the marker fails `matches`, the retry's
        passes."""

        def brain(turn: Turn):
            if not turn.tool_results:  # each attempt writes (the preset's evidence asks for it)
                return Write("hello.py", "print('hello')\n")
            if has_feedback(turn):
                return Say("Work complete.\n<!-- STEP: done -->")
            return Say("Work complete.")

        server = self.serve(brain)
        world = self.world(server)
        world.pipeline(r'''
phase "hello" {
    agent "gemini"
    prompt "Write hello.py that prints hello, then end with <!-- STEP: done -->."
    outputs { file "hello.py" }
    gates {
        matches "response" #"^Work complete\.\n<!-- STEP: (what|done) -->$"# name="step-marker"
        absent "response" #"session_id|totalTokenCount|"stats""# name="no-json"
    }
    retries 1
}
''')
        result = world.run()
        self.assertRan(result)
        self.assertEqual(result.attempts("hello"), 2)
        self.assertEqual(result.attempt_file("hello", 1, "response.txt"), "Work complete.")
        self.assertIn("step-marker", result.attempt_file("hello", 1, "feedback.md"))
        self.assertEqual(result.attempt_file("hello", 2, "response.txt"),
                         "Work complete.\n<!-- STEP: done -->")

    def test_evidence_requires_a_tool_call_that_succeeded(self):
        """The preset's `evidence`: Gemini's stats count the tool calls that succeeded. Attempt 1's
        only call is refused (no shell tool in auto_edit), attempt 2 makes none: no work (defect
        14: a refused call is no evidence); attempt 3 writes and passes."""

        def brain(turn: Turn):
            attempt = sum("failed verification" in text for text in turn.user_texts) + 1
            if attempt == 1:
                return Shell("echo notes > notes.txt") if turn.calls == 0 else Say("All done, trust me.")
            if attempt == 2:
                return Say("All done, I promise.")
            return Write("notes.txt", "real work\n") if not turn.tool_results else Say("Wrote notes.txt.")

        server = self.serve(brain)
        world = self.world(server)
        world.pipeline('''
phase "work" {
    agent "gemini"
    prompt "Write notes.txt."
    retries 2
}
''')
        result = world.run()
        self.assertRan(result)
        self.assertEqual(result.attempts("work"), 3)
        for attempt in (1, 2):
            feedback = result.attempt_file("work", attempt, "feedback.md")
            self.assertRegex(feedback, r"(?i)evidence|skipped", feedback)
        refused = [t for _, t in requests(server) if t.tool_results and t.tool_results[0].is_error]
        self.assertTrue(refused and "run_shell_command" in refused[0].tool_results[0].text)
        self.assertEqual((world.workspace / "notes.txt").read_text(), "real work\n")

    # --- the CLI itself -------------------------------------------------------------------------

    def test_cli_api_error_shape(self):
        """What helixflow has to read on an API error, straight from the CLI (no helixflow): with
        `--output-format json` standard output stays empty, the exit code is the HTTP status mod
        256, and standard error ends with the JSON document carrying `error`."""
        server = self.serve(lambda turn: Fail(403, "Permission denied on resource (gemini-marker-cli)"))
        world = self.world(server)
        proc = subprocess.run(
            ["gemini", "--skip-trust", "--approval-mode", "auto_edit", "--output-format", "json"],
            input=TASK, cwd=world.workspace, env=world.env, capture_output=True, text=True, timeout=60,
        )
        self.assertEqual(proc.returncode, 403 % 256, proc.stderr)
        self.assertEqual(proc.stdout, "")
        document = json.loads(proc.stderr[proc.stderr.rindex("\n{\n") + 1:])
        self.assertIn("gemini-marker-cli", document["error"]["message"])
        self.assertEqual(document["error"]["code"], 403)
        self.assertIn("session_id", document)

    # --- defects ------------------------------------------------------------------------------

    def test_defect1_retry_after_verifier_resumes_worker_session(self):
        """Defect 1: after a sub-agent verifier ran, a retry must continue the worker's own
        session (by id), not the verifier's (the newest in the folder)."""
        verdicts = iter([VERDICT_FAIL, VERDICT_PASS])  # each verifier answers in one request
        lock = threading.Lock()

        def brain(turn: Turn):
            if is_verifier(turn):
                with lock:
                    return Say(next(verdicts))
            if turn.tool_results:
                return Say("Wrote hello.py.")
            return Write("hello.py", "print('hello')\n" if has_feedback(turn) else "print('bye')\n")

        server = self.serve(brain)
        world = self.world(server)
        world.pipeline(SUBAGENT_PHASE % {"task": TASK, "retries": 1})
        result = world.run()
        self.assertRan(result)
        self.assertEqual(result.attempts("hello"), 2)
        retry = [(b, t) for b, t in requests(server) if has_feedback(t) and not is_verifier(t)]
        self.assertTrue(retry, "no worker request carried the feedback")
        body, turn = retry[0]
        self.assertIn(TASK, turn.first_user)
        self.assertNotIn("checks_passed", turn.first_user)
        self.assertIn("verifier-marker-7", turn.last_user)
        self.assertIn("print('bye')\n", [c["args"].get("content") for c in model_calls(body)])
        self.assertEqual((world.workspace / "hello.py").read_text(), "print('hello')\n")

    def test_defect1_two_phases_at_once_never_cross(self):
        """Defect 1: two phases retrying at the same time; each retry resumes its own phase's
        session (the newest session in the folder is the other phase's half the time)."""
        first = threading.Barrier(2, timeout=30)
        second = threading.Barrier(2, timeout=30)

        def brain(turn: Turn):
            name = "alpha" if "alpha.py" in turn.first_user else "beta"
            if turn.tool_results:
                return Say(f"Wrote {name}.py.")
            if has_feedback(turn):
                second.wait()  # both retries are in flight together
                return Write(f"{name}.py", f"print('{name}')\n")
            first.wait()  # both first attempts are in flight together
            return Write(f"{name}.py", "def broken(:\n")

        server = self.serve(brain)
        # Gemini CLI's session cleanup, at each start, deletes the session files of the project it
        # cannot read, another Gemini CLI's file being written among them: with two at once, one
        # phase's session was sometimes gone when its retry resumed it (exit 42). The README
        # gives users this setting for Gemini phases that run at once.
        world = self.world(server, settings={"general": {"sessionRetention": {"enabled": False}}})
        world.pipeline('''
phase "alpha" {
    agent "gemini"
    prompt "Write alpha.py that prints alpha."
    outputs { file "alpha.py" }
    gates { syntax }
    retries 1
}
phase "beta" {
    agent "gemini"
    prompt "Write beta.py that prints beta."
    outputs { file "beta.py" }
    gates { syntax }
    retries 1
}
''')
        result = world.run("--jobs", "2")
        self.assertRan(result)
        for name in ("alpha", "beta"):
            self.assertEqual(result.attempts(name), 2)
            self.assertEqual((world.workspace / f"{name}.py").read_text(), f"print('{name}')\n")
            own = json.loads(result.attempt_file(name, 1, "stdout.log"))["session_id"]
            second_run = json.loads(result.attempt_file(name, 2, "invocation.json"))
            self.assertTrue(second_run["resume"], second_run)
            self.assertEqual(second_run["session_id"], own)
            retry = [t for _, t in requests(server) if has_feedback(t) and f"{name}.py" in t.first_user]
            self.assertTrue(retry, f"no retry request for {name}")
            self.assertIn(f"Phase `{name}`", retry[0].last_user)
            self.assertEqual(len(retry[0].user_texts), 2, retry[0].user_texts)

    def test_defect4_untrusted_folder(self):
        """Defect 4: in a folder it does not trust (folder trust on, nothing trusted), Gemini CLI
        exits 55 unless given `--skip-trust`; the preset passes it."""
        server = self.serve(hello_brain(broken="print('hello')\n"))
        world = self.world(server, {"security": {"folderTrust": {"enabled": True}}})
        # The folder really is untrusted: without the flag, gemini refuses it.
        bare = subprocess.run(
            ["gemini", "--approval-mode", "auto_edit", "--output-format", "json"],
            input=TASK, cwd=world.workspace, env=world.env, capture_output=True, text=True, timeout=60,
        )
        self.assertEqual(bare.returncode, 55, bare.stderr)
        self.assertIn("not running in a trusted directory", bare.stderr)
        world.pipeline(HELLO_PHASE % {"task": TASK, "retries": 0})
        result = world.run()
        self.assertRan(result)
        self.assertEqual((world.workspace / "hello.py").read_text(), "print('hello')\n")
        invocation = json.loads(result.attempt_file("hello", 1, "invocation.json"))
        self.assertIn("--skip-trust", invocation["argv"])

    def test_defect5_prompt_starting_with_dash(self):
        """Defect 5: a prompt that starts with `-` (front matter, a Markdown list) was read as an
        option ("Not enough arguments following: prompt", exit 1). On standard input it is text."""
        prompt = "---\ntitle: hello\n---\n- Write hello.py that prints hello.\n- Keep it short.\n"
        server = self.serve(hello_brain(broken="print('hello')\n"))
        world = self.world(server, NO_FOLDER_TRUST)
        world.write("task.md", prompt)
        world.pipeline('''
phase "hello" {
    agent "gemini"
    prompt file="task.md"
    outputs { file "hello.py" }
    gates { syntax }
    retries 0
}
''')
        result = world.run()
        self.assertRan(result)
        first = requests(server)[0][1]
        self.assertTrue(first.first_user.startswith("---\ntitle: hello\n---\n- Write hello.py"),
                        first.first_user[:200])
        self.assertEqual((world.workspace / "hello.py").read_text(), "print('hello')\n")

    def test_defect9_api_error_reaches_feedback_and_run_json(self):
        """Defect 9: an API error. Gemini CLI exits with the HTTP status mod 256 (400 -> 144) and
        writes the error (text, then a JSON `error`) to standard error; its message must reach
        feedback.md and run.json, not only "exited with code 144"."""
        message = "API key not valid. Please pass a valid API key. (gemini-marker-9)"
        server = self.serve(lambda turn: Fail(400, message))
        world = self.world(server)
        world.pipeline(HELLO_PHASE % {"task": TASK, "retries": 0})
        result = world.run()
        self.assertRan(result, 1)
        feedback = result.attempt_file("hello", 1, "feedback.md")
        self.assertIn("gemini-marker-9", feedback)
        self.assertIn("API key not valid", feedback)
        self.assertIn("gemini-marker-9", json.dumps(result.run_json()))

    def test_defect10_prompt_over_128_kib(self):
        """Defect 10: a prompt over 128 KiB in one argument fails ("Argument list too long"); the
        preset gives it on standard input, whole."""
        filler = "".join(f"- requirement {i}: keep it simple.\n" for i in range(6000))
        self.assertGreater(len(filler.encode()), 128 * 1024)
        server = self.serve(hello_brain(broken="print('hello')\n"))
        world = self.world(server, NO_FOLDER_TRUST)
        world.write("task.md", TASK + "\n" + filler + "END-OF-PROMPT\n")
        world.pipeline('''
phase "hello" {
    agent "gemini"
    prompt file="task.md"
    outputs { file "hello.py" }
    retries 0
}
''')
        result = world.run()
        self.assertRan(result)
        first = requests(server)[0][1]
        self.assertIn("- requirement 5999: keep it simple.\nEND-OF-PROMPT", first.first_user)

    def test_defect11_retry_after_no_answer_has_the_task(self):
        """Defect 11: attempt 1 never got an answer (API error), so Gemini CLI saved no session
        and `--resume <id>` would exit 42 ("Invalid session identifier"). The retry must start a
        new conversation with the full task and the feedback."""
        failed = threading.Event()

        def brain(turn: Turn):
            if not failed.is_set():
                failed.set()
                return Fail(400, "Request contains an invalid argument. (gemini-marker-11)")
            return hello_brain(broken="print('hello')\n")(turn)

        server = self.serve(brain)
        world = self.world(server)
        world.pipeline(HELLO_PHASE % {"task": TASK, "retries": 1})
        result = world.run()
        self.assertRan(result)
        self.assertEqual(result.attempts("hello"), 2)
        second = json.loads(result.attempt_file("hello", 2, "invocation.json"))
        self.assertFalse(second["resume"], second)
        retry = [t for _, t in requests(server) if "gemini-marker-11" in "".join(t.user_texts)]
        self.assertTrue(retry, "no request carried the feedback")
        self.assertIn(TASK, retry[0].first_user)
        self.assertEqual((world.workspace / "hello.py").read_text(), "print('hello')\n")

    def test_retry_whose_session_is_gone_starts_a_new_one(self):
        """A retry resumes a session Gemini CLI no longer has (as when its start-up cleanup removed
        a session file another Gemini CLI was writing): `--resume <id>` exits 42, and helixflow
        tries again at once in a new session with the full task and the feedback, which passes.
        A gate removes the session files after attempt 1."""
        server = self.serve(hello_brain())
        world = self.world(server)
        world.pipeline(losing_session_phase("gemini", TASK, ".gemini", "session-*"))
        result = world.run()
        # With no session left, Gemini CLI says "No previous sessions found for this project";
        # with others left (the cleanup's race), "Invalid session identifier". Exit 42 either way.
        check_new_session(self, result, "Error resuming session")
        retry = [t for _, t in requests(server) if has_feedback(t)]
        self.assertTrue(retry, "no request carried the feedback")
        self.assertIn(TASK, retry[0].first_user)
        self.assertEqual((world.workspace / "hello.py").read_text(), "print('hello')\n")

    def test_defect13_dry_run_shows_resume_argv(self):
        """Defect 13: `--dry-run` showed only `command`; a retry's argv (`--resume <id>`, the
        feedback on standard input) must be shown too."""
        server = self.serve(lambda turn: Say("unused"))
        world = self.world(server)
        world.pipeline(HELLO_PHASE % {"task": TASK, "retries": 1})
        result = world.run("--dry-run")
        self.assertRan(result)
        self.assertIn("--session-id", result.stdout)
        self.assertIn("--resume", result.stdout)
        self.assertEqual(requests(server), [])

    def test_defect12_real_error_kept_from_long_stderr(self):
        """Defect 12: only the end of stderr was kept. Gemini CLI puts the real error first and
        more text after it (its usage text after a bad argument; here, after the API error line,
        a stack trace and a JSON copy); with a long error body (a gateway's details) the last
        4 KiB no longer hold the start. It must be kept, and feedback.md must hold no terminal
        escape codes (Gemini CLI 0.61.0 wrote none in any case tried: TERM=xterm-256color,
        FORCE_COLOR, escape codes in an API error body, which it JSON-escapes)."""
        details = "".join(f"\n  detail {i}: policy rule {i} evaluated" for i in range(200))
        message = "API key not valid. Please pass a valid API key. (gemini-marker-12)" + details
        server = self.serve(lambda turn: Fail(400, message))
        world = self.world(server)
        world.pipeline(HELLO_PHASE % {"task": TASK, "retries": 0})
        result = world.run()
        self.assertRan(result, 1)
        stderr = (result.attempt_dir("hello", 1) / "stderr.log").read_bytes()
        # The scenario's premise: the real error is not in the last 4 KiB of a long stderr.
        self.assertGreater(len(stderr), 3 * 4096)
        self.assertNotIn(b"gemini-marker-12", stderr[-4096:])
        feedback = result.attempt_file("hello", 1, "feedback.md")
        self.assertIn("gemini-marker-12", feedback)
        self.assertIn("Error when talking to Gemini API", feedback)
        self.assertNotIn("\x1b", feedback)


if __name__ == "__main__":
    unittest.main()
