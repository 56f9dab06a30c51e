"""End to end: the real Codex CLI (0.169.0) with the `codex` and `codex-verifier` presets exactly as
shipped in examples/agents.kdl, against a scripted OpenAI Responses server on 127.0.0.1.

Codex is pointed at the server by a fresh CODEX_HOME whose config.toml selects a provider "local"
(`base_url`, `env_key`, `wire_api = "responses"`), with analytics, feedback upload and update
checks off and the client's own HTTP retries off (so an API error fails at once).

Defects covered here: 1 (retry after a verifier / two phases at once), 2 (a retry can
write), 3 (no git repository), 5 (prompt starting with `-`), 9 (API error in the feedback and
run.json), 11 (attempt 1 never got an answer: the retry still has the task).
"""

from __future__ import annotations

import json
import re
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
from servers.openai_responses import OpenAIResponsesHandler, Preamble, to_turn  # noqa: E402

KEY_VAR = "HF_E2E_OPENAI_KEY"


def codex_world(server: ScriptedServer, git: bool = False) -> World:
    """A World whose CODEX_HOME points Codex at `server`, with nothing that phones home."""
    world = World(git=git)
    home = world.home / ".codex"
    home.mkdir()
    (home / "config.toml").write_text(
        'model = "m"\n'
        'model_provider = "local"\n'
        "check_for_update_on_startup = false\n"
        "[analytics]\nenabled = false\n"
        "[feedback]\nenabled = false\n"
        "[model_providers.local]\n"
        'name = "local"\n'
        f'base_url = "{server.url}/v1"\n'
        f'env_key = "{KEY_VAR}"\n'
        'wire_api = "responses"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
    )
    world.env["CODEX_HOME"] = str(home)
    world.env[KEY_VAR] = "sk-e2e-not-a-real-key"
    return world


# --- reading what the server received -----------------------------------------------------------


def is_verifier(turn: Turn) -> bool:
    """helixflow's verifier prompt asks for the JSON verdict."""
    return '"checks_passed"' in turn.first_user and "verdict" in turn.first_user


def has_feedback(turn: Turn) -> bool:
    return any("failed verification" in text for text in turn.user_texts)


def thread_of(headers: dict) -> str | None:
    """The Codex thread a request belongs to (Codex sends it as a header)."""
    for name, value in headers.items():
        if name.lower() in ("thread-id", "session-id", "session_id"):
            return value
    return None


def turns(server: ScriptedServer) -> list[tuple[dict, Turn]]:
    return [(h, to_turn(b)) for p, h, b in server.recorder.requests if p.endswith("/responses")]


def sandbox_mode(turn: Turn) -> str | None:
    """The sandbox Codex told the model it runs in (the newest of its permissions messages)."""
    modes = re.findall(r"`sandbox_mode` is `([a-z-]+)`", turn.system)
    return modes[-1] if modes else None


def threads_in(stdout: str) -> list[str]:
    return re.findall(r'"type":"thread.started","thread_id":"([^"]+)"', stdout)


VERDICT_PASS = ('I read hello.py and ran it.\n'
                '{"success": true, "errors": [], "checks_passed": ["hello.py prints hello"], '
                '"feedback": ""}')
VERDICT_FAIL = ('I read hello.py.\n'
                '{"success": false, "errors": ["hello.py prints bye, the task asks for hello"], '
                '"checks_passed": ["hello.py exists"], '
                '"feedback": "Make hello.py print hello (verifier-marker-7)."}')

HELLO_PHASE = '''
phase "hello" {
    agent "codex"
    prompt "Write hello.py that prints hello."
    outputs { file "hello.py" }
    gates { syntax }
    retries %(retries)d
}
'''


class CodexTest(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls) -> None:
        need("codex")

    def serve(self, brain) -> ScriptedServer:
        server = ScriptedServer(OpenAIResponsesHandler, brain)
        server.__enter__()
        self.addCleanup(server.__exit__, None, None, None)
        return server

    def world(self, server: ScriptedServer, git: bool = False) -> World:
        world = codex_world(server, git=git)
        world.__enter__()
        self.addCleanup(world.__exit__, None, None, None)
        return world

    def assertRan(self, result, code: int = 0) -> None:  # noqa: N802 - unittest's naming
        self.assertEqual(result.code, code, result.describe())

    # --- happy paths ----------------------------------------------------------------------------

    def test_happy_pass(self):
        def brain(turn: Turn):
            if turn.calls == 0:
                return Write("hello.py", "print('hello')\n")
            return Say("Wrote hello.py.")

        server = self.serve(brain)
        world = self.world(server, git=True)
        world.pipeline(HELLO_PHASE % {"retries": 0})
        result = world.run()
        self.assertRan(result)
        self.assertEqual((world.workspace / "hello.py").read_text(), "print('hello')\n")
        requests = turns(server)
        self.assertEqual(len(requests), 2)
        self.assertIn("Write hello.py that prints hello.", requests[0][1].first_user)
        self.assertFalse(requests[1][1].tool_results[0].is_error, requests[1][1].tool_results)
        # The prompt went through standard input, and the journal says so.
        invocation = json.loads(result.attempt_file("hello", 1, "invocation.json"))
        self.assertTrue(invocation["stdin"])
        self.assertFalse(invocation["resume"])
        self.assertEqual(invocation["argv"][-1], "-")
        stdin = result.attempt_file("hello", 1, "stdin.txt")
        self.assertIn("Write hello.py that prints hello.", stdin)
        self.assertEqual(requests[0][1].first_user.strip(), stdin.strip())
        self.assertEqual(result.attempt_file("hello", 1, "response.txt").strip(), "Wrote hello.py.")

    def test_happy_pass_with_apply_patch(self):
        """The model edits with Codex's `apply_patch` (a `file_change` item, no
        `command_execution`): that is evidence too."""

        def brain(turn: Turn):
            if turn.calls == 0:
                return Write("pkg/hello.py", "print('hello')\n")
            return Say("Added pkg/hello.py.")

        server = self.serve(brain)
        server.httpd.write_mode = "apply_patch"  # type: ignore[attr-defined]
        world = self.world(server)
        world.pipeline(HELLO_PHASE.replace('file "hello.py"', 'file "pkg/hello.py"') % {"retries": 0})
        result = world.run()
        self.assertRan(result)
        self.assertEqual((world.workspace / "pkg" / "hello.py").read_text(), "print('hello')\n")
        stdout = result.attempt_file("hello", 1, "stdout.log")
        self.assertIn('"type":"file_change"', stdout)
        self.assertNotIn('"type":"command_execution"', stdout)

    def test_retry_with_feedback_continues_own_thread_and_can_write(self):
        """Attempt 1 writes broken Python that `syntax` catches; the retry resumes the worker's
        own thread (it holds the task and gets the feedback) and can write (defect 2: a resumed
        `codex exec` ran read-only, "Read-only file system")."""

        def brain(turn: Turn):
            if not has_feedback(turn):
                return Write("hello.py", "def broken(:\n") if not turn.tool_results else Say("Done.")
            if not turn.tool_results:  # the newest message is the feedback
                return Write("hello.py", "print('hello')\n")
            return Say("Fixed the syntax error.")

        server = self.serve(brain)
        world = self.world(server)
        world.pipeline(HELLO_PHASE % {"retries": 1})
        result = world.run()
        self.assertRan(result)
        self.assertEqual(result.attempts("hello"), 2)
        self.assertEqual((world.workspace / "hello.py").read_text(), "print('hello')\n")

        first_thread = threads_in(result.attempt_file("hello", 1, "stdout.log"))[0]
        retry = [(h, t) for h, t in turns(server) if has_feedback(t)]
        self.assertTrue(retry, "no request carried the feedback")
        headers, turn = retry[0]
        # The retry continued the worker's own thread: same thread id, the original task first,
        # the feedback as the newest user message.
        self.assertEqual(thread_of(headers), first_thread)
        self.assertIn("Write hello.py that prints hello.", turn.first_user)
        self.assertIn("# Attempt 1 of 2 failed verification", turn.last_user)
        self.assertIn("hello.py", turn.last_user)
        # Defect 2: the retry runs in the workspace-write sandbox, and its write succeeded.
        self.assertEqual(sandbox_mode(turn), "workspace-write", turn.system[-2000:])
        after_write = retry[-1][1]
        self.assertTrue(after_write.tool_results, "the retry made no tool call")
        self.assertFalse(after_write.tool_results[-1].is_error, after_write.tool_results[-1].text)
        self.assertNotIn("Read-only file system", after_write.tool_results[-1].text)
        invocation = json.loads(result.attempt_file("hello", 2, "invocation.json"))
        self.assertTrue(invocation["resume"])
        self.assertEqual(invocation["session_id"], first_thread)
        self.assertIn("workspace-write", invocation["argv"])
        given = result.attempt_file("hello", 2, "feedback-given.md")
        self.assertIn("failed verification", given)
        self.assertEqual(result.attempt_file("hello", 2, "stdin.txt").strip(), given.strip())

    def subagent_brain(self, verdict: str, worker_text: str = "print('hello')\n"):
        def brain(turn: Turn):
            if is_verifier(turn):
                if turn.calls == 0:
                    return Shell("cat hello.py")
                return Say(verdict)
            if turn.calls == 0 or (has_feedback(turn) and not turn.tool_results):
                return Write("hello.py", worker_text)
            return Say("Wrote hello.py.")

        return brain

    SUBAGENT_PHASE = '''
phase "hello" {
    agent "codex"
    prompt "Write hello.py that prints hello."
    outputs { file "hello.py" }
    verify "sub-agent"
    verifier "codex-verifier"
    retries %(retries)d
}
'''

    def test_retry_whose_thread_is_gone_starts_a_new_one(self):
        """A retry resumes a thread Codex no longer has (its rollout file was removed): `exec
        resume <id>` fails with "no rollout found for thread id", a fatal failure of a resumed
        session, and helixflow tries again at once in a new thread with the full task and the
        feedback, which passes. A gate removes the rollout files after attempt 1."""

        def brain(turn: Turn):
            if not turn.tool_results:
                fixed = has_feedback(turn)
                return Write("hello.py", "print('hello')\n" if fixed else "def broken(:\n")
            return Say("Done.")

        server = self.serve(brain)
        world = self.world(server)
        world.pipeline(losing_session_phase("codex", "Write hello.py that prints hello.", ".codex",
                                            "rollout-*"))
        result = world.run()
        check_new_session(self, result, "no rollout found for thread id")
        retry = [t for _h, t in turns(server) if has_feedback(t)]
        self.assertTrue(retry, "no request carried the feedback")
        self.assertIn("Write hello.py that prints hello.", retry[0].first_user)
        self.assertEqual((world.workspace / "hello.py").read_text(), "print('hello')\n")

    def test_subagent_verdict_pass(self):
        server = self.serve(self.subagent_brain(VERDICT_PASS))
        world = self.world(server)
        world.pipeline(self.SUBAGENT_PHASE % {"retries": 0})
        result = world.run()
        self.assertRan(result)
        verifier = [t for _, t in turns(server) if is_verifier(t)]
        self.assertEqual(len(verifier), 2)
        # The verifier's `cat` ran (a read works in the read-only sandbox).
        self.assertIn("print('hello')", verifier[1].tool_results[0].text)
        self.assertFalse(verifier[1].tool_results[0].is_error)

    def test_subagent_verdict_fail(self):
        server = self.serve(self.subagent_brain(VERDICT_FAIL, "print('bye')\n"))
        world = self.world(server)
        world.pipeline(self.SUBAGENT_PHASE % {"retries": 0})
        result = world.run()
        self.assertRan(result, 1)
        feedback = result.attempt_file("hello", 1, "feedback.md")
        self.assertIn("hello.py prints bye, the task asks for hello", feedback)
        self.assertIn("verifier-marker-7", feedback)

    def test_verifier_cannot_write(self):
        """codex-verifier runs in the read-only sandbox: its write fails with "Read-only file
        system" and the file stays as the worker left it."""

        def brain(turn: Turn):
            if is_verifier(turn):
                if turn.calls == 0:
                    return Write("hello.py", "print('tampered')\n")
                if turn.calls == 1:
                    return Shell("cat hello.py")  # the evidence that it looked
                return Say(VERDICT_PASS)
            return Write("hello.py", "print('hello')\n") if turn.calls == 0 else Say("Done.")

        server = self.serve(brain)
        world = self.world(server)
        world.pipeline(self.SUBAGENT_PHASE % {"retries": 0})
        result = world.run()
        self.assertRan(result)
        self.assertEqual((world.workspace / "hello.py").read_text(), "print('hello')\n")
        verifier = [t for _, t in turns(server) if is_verifier(t)]
        self.assertEqual(len(verifier), 3)
        self.assertEqual(sandbox_mode(verifier[0]), "read-only")
        refused = verifier[1].tool_results[0]
        self.assertTrue(refused.is_error, refused.text)
        self.assertIn("Read-only file system", refused.text)

    def test_evidence_requires_a_command_that_succeeded(self):
        """`evidence-tools`: an attempt whose only command failed, one whose write the sandbox
        refused, and one with no command at all did no work; the fourth writes with a command
        that exits 0 and passes."""

        def brain(turn: Turn):
            attempt = sum("failed verification" in text for text in turn.user_texts) + 1
            if attempt == 1:
                return Shell("exit 3") if turn.calls == 0 else Say("All done, trust me.")
            if attempt == 2:
                if not turn.tool_results:
                    return Shell("echo work > /usr/hf-e2e-outside-workspace.txt")
                return Say("All done, I promise.")
            if attempt == 3:
                return Say("All done, really.")
            if not turn.tool_results:
                return Write("notes.txt", "real work\n")
            return Say("Wrote notes.txt.")

        server = self.serve(brain)
        world = self.world(server)
        world.pipeline('''
phase "work" {
    agent "codex"
    prompt "Write notes.txt."
    retries 3
}
''')
        result = world.run()
        self.assertRan(result)
        self.assertEqual(result.attempts("work"), 4)
        for attempt in (1, 2, 3):
            feedback = result.attempt_file("work", attempt, "feedback.md")
            self.assertRegex(feedback, r"(?i)no tool call|skipped")
        self.assertFalse(Path("/usr/hf-e2e-outside-workspace.txt").exists())
        self.assertEqual((world.workspace / "notes.txt").read_text(), "real work\n")

    def test_verifier_verdict_without_looking_is_void(self):
        """`codex-verifier` has `evidence-tools`: a verdict given without running a single
        command does not count, however positive."""

        def brain(turn: Turn):
            if is_verifier(turn):
                return Say(VERDICT_PASS)
            return Write("hello.py", "print('hello')\n") if turn.calls == 0 else Say("Done.")

        server = self.serve(brain)
        world = self.world(server)
        world.pipeline(self.SUBAGENT_PHASE % {"retries": 0})
        result = world.run()
        self.assertRan(result, 1)
        self.assertRegex(result.attempt_file("hello", 1, "feedback.md"), r"(?i)no tool call|skipped")

    def test_response_extraction(self):
        """`response "codex-json"`: the response is the last agent_message, not the JSONL, and
        not the preamble before a tool call."""

        def brain(turn: Turn):
            if turn.calls == 0:
                return Preamble("STATUS: starting", Write("hello.py", "print('hello')\n"))
            return Say("Work complete.\nSTATUS: done")

        server = self.serve(brain)
        world = self.world(server)
        world.pipeline(r'''
phase "hello" {
    agent "codex"
    prompt "Write hello.py that prints hello, then end with STATUS: done."
    outputs { file "hello.py" }
    gates {
        matches "response" #"^Work complete\.\nSTATUS: done$"# name="status"
        absent "response" #"thread_id|turn\.completed"# name="no-jsonl"
    }
    retries 0
}
''')
        result = world.run()
        self.assertRan(result)
        self.assertEqual(result.attempt_file("hello", 1, "response.txt"), "Work complete.\nSTATUS: done")
        self.assertIn("STATUS: starting", result.attempt_file("hello", 1, "stdout.log"))

    # --- defects ------------------------------------------------------------------------------

    def test_defect1_retry_after_verifier_continues_worker_thread(self):
        """Defect 1: after a sub-agent verifier ran, the retry continued the *verifier's* session
        (`resume --last`), read-only, holding the verifier's prompt. It must continue the
        worker's thread, with the worker's sandbox."""
        verdicts = iter([VERDICT_FAIL, VERDICT_PASS])
        lock = threading.Lock()
        current = {}

        def brain(turn: Turn):
            if is_verifier(turn):
                if turn.calls == 0:
                    with lock:
                        current["verdict"] = next(verdicts)
                    return Shell("cat hello.py")
                return Say(current["verdict"])
            if has_feedback(turn):
                return Write("hello.py", "print('hello')\n") if not turn.tool_results else Say("Fixed.")
            return Write("hello.py", "print('bye')\n") if turn.calls == 0 else Say("Wrote hello.py.")

        server = self.serve(brain)
        world = self.world(server)
        world.pipeline(self.SUBAGENT_PHASE % {"retries": 1})
        result = world.run()
        self.assertRan(result)
        self.assertEqual(result.attempts("hello"), 2)
        self.assertEqual((world.workspace / "hello.py").read_text(), "print('hello')\n")
        worker_thread = threads_in(result.attempt_file("hello", 1, "stdout.log"))[0]
        retry = [(h, t) for h, t in turns(server) if has_feedback(t) and not is_verifier(t)]
        self.assertTrue(retry, "no worker request carried the feedback")
        self.assertEqual(thread_of(retry[0][0]), worker_thread)
        self.assertIn("Write hello.py that prints hello.", retry[0][1].first_user)
        self.assertNotIn("checks_passed", retry[0][1].first_user)
        self.assertIn("verifier-marker-7", retry[0][1].last_user)
        self.assertEqual(sandbox_mode(retry[0][1]), "workspace-write")
        self.assertFalse(retry[-1][1].tool_results[-1].is_error, retry[-1][1].tool_results[-1].text)

    def test_defect1_two_phases_at_once_never_cross(self):
        """Defect 1: two phases retrying at the same time. Each retry must land in its own
        phase's thread; concurrent resumes must not crash ("already has an active writer")."""
        first = threading.Barrier(2, timeout=30)
        second = threading.Barrier(2, timeout=30)

        def brain(turn: Turn):
            name = "alpha" if "alpha.py" in turn.first_user else "beta"
            if has_feedback(turn):
                if not turn.tool_results:
                    second.wait()  # both retries are in flight together
                    return Write(f"{name}.py", f"print('{name}')\n")
                return Say(f"Fixed {name}.py.")
            if turn.calls == 0:
                first.wait()  # both first attempts are in flight together
                return Write(f"{name}.py", "def broken(:\n")
            return Say(f"Wrote {name}.py.")

        server = self.serve(brain)
        world = self.world(server)
        world.pipeline('''
phase "alpha" {
    agent "codex"
    prompt "Write alpha.py that prints alpha."
    outputs { file "alpha.py" }
    gates { syntax }
    retries 1
}
phase "beta" {
    agent "codex"
    prompt "Write beta.py that prints beta."
    outputs { file "beta.py" }
    gates { syntax }
    retries 1
}
''')
        result = world.run("--jobs", "2")
        self.assertRan(result)
        self.assertNotIn("active writer", result.stdout + result.stderr)
        for name in ("alpha", "beta"):
            self.assertEqual(result.attempts(name), 2)
            self.assertEqual((world.workspace / f"{name}.py").read_text(), f"print('{name}')\n")
            own = threads_in(result.attempt_file(name, 1, "stdout.log"))[0]
            retry = [(h, t) for h, t in turns(server) if has_feedback(t) and f"{name}.py" in t.first_user]
            self.assertTrue(retry, f"no retry request for {name}")
            for headers, turn in retry:
                self.assertEqual(thread_of(headers), own, name)
                other = "beta" if name == "alpha" else "alpha"
                self.assertFalse(any(f"{other}.py" in text for text in turn.user_texts), turn.user_texts)
            stderr = result.attempt_file(name, 2, "stderr.log")
            self.assertNotIn("active writer", stderr)

    def test_defect1_second_run_in_same_home_continues_its_own_thread(self):
        """Defect 1: sessions named by the run collided on the next run in the same HOME. Codex
        names its threads itself; a second run's retry continues the second run's thread."""

        def brain(turn: Turn):
            if not has_feedback(turn):
                return Write("hello.py", "def broken(:\n") if not turn.tool_results else Say("Done.")
            return Write("hello.py", "print('hello')\n") if not turn.tool_results else Say("Fixed.")

        server = self.serve(brain)
        world = self.world(server)
        world.pipeline(HELLO_PHASE % {"retries": 1})
        threads = []
        for run in (1, 2):
            count = len(turns(server))
            # The second run is forced: the phase passed in the first and is up to date.
            result = world.run() if run == 1 else world.run("--force")
            self.assertRan(result)
            own = threads_in(result.attempt_file("hello", 1, "stdout.log"))[0]
            threads.append(own)
            retry = [(h, t) for h, t in turns(server)[count:] if has_feedback(t)]
            self.assertTrue(retry, f"run {run}: no request carried the feedback")
            self.assertEqual(thread_of(retry[0][0]), own, f"run {run}")
            self.assertEqual(sum("failed verification" in u for u in retry[0][1].user_texts), 1)
        self.assertNotEqual(threads[0], threads[1])

    def test_defect3_workspace_without_git(self):
        """Defect 3: Codex refuses a folder that is not a git repository unless given
        `--skip-git-repo-check` ("Not inside a trusted directory")."""

        def brain(turn: Turn):
            return Write("hello.py", "print('hello')\n") if turn.calls == 0 else Say("Done.")

        server = self.serve(brain)
        world = self.world(server, git=False)
        self.assertFalse((world.workspace / ".git").exists())
        world.pipeline(HELLO_PHASE % {"retries": 0})
        result = world.run()
        self.assertRan(result)
        self.assertTrue(turns(server), "Codex never reached the model")
        self.assertEqual((world.workspace / "hello.py").read_text(), "print('hello')\n")

    def test_defect5_prompt_starting_with_dash(self):
        """Defect 5: a prompt that starts with `-` (a Markdown list, front matter) was read as an
        option ("unexpected argument '- ' found")."""

        def brain(turn: Turn):
            return Write("hello.py", "print('hello')\n") if turn.calls == 0 else Say("Done.")

        server = self.serve(brain)
        world = self.world(server)
        world.write("task.md", "---\nid: 5\n---\n- write hello.py\n- make it print hello\n")
        world.pipeline('''
phase "hello" {
    agent "codex"
    prompt file="task.md"
    outputs { file "hello.py" }
    retries 0
}
''')
        result = world.run()
        self.assertRan(result)
        first = turns(server)[0][1]
        self.assertTrue(first.first_user.startswith("---\nid: 5\n---\n- write hello.py"), first.first_user)

    def test_defect9_api_error_reaches_feedback_and_run_json(self):
        """Defect 9: Codex exits 1 with the API's message only in its JSON events (`error`,
        `turn.failed`); feedback said only "exited with code 1"."""
        message = "Unsupported parameter: 'reasoning.summary' (e2e-marker-9)"
        server = self.serve(lambda turn: Fail(400, message))
        world = self.world(server)
        world.pipeline(HELLO_PHASE % {"retries": 0})
        result = world.run()
        self.assertRan(result, 1)
        self.assertIn("e2e-marker-9", result.attempt_file("hello", 1, "feedback.md"))
        self.assertIn("e2e-marker-9", json.dumps(result.run_json()))

    def test_defect11_retry_after_no_answer_has_the_task(self):
        """Defect 11: attempt 1 never got an answer from the model (HTTP 400); the retry must
        still carry the task, plus the feedback, never the feedback alone. (Codex 0.169.0
        reports `thread.started` before its first request and keeps the task in the thread, so
        resuming it is right; without a captured id helixflow must send the full prompt.)"""
        state = {"failed": False}

        def brain(turn: Turn):
            if not state["failed"]:
                state["failed"] = True
                return Fail(400, "temporary trouble (e2e-marker-11)")
            return Write("hello.py", "print('hello')\n") if not turn.tool_results else Say("Done.")

        server = self.serve(brain)
        world = self.world(server)
        world.pipeline(HELLO_PHASE % {"retries": 1})
        result = world.run()
        self.assertRan(result)
        self.assertEqual(result.attempts("hello"), 2)
        retry = turns(server)[1][1]
        everything = "\n".join(retry.user_texts)
        self.assertIn("Write hello.py that prints hello.", everything)
        self.assertIn("failed verification", everything)
        self.assertIn("e2e-marker-11", everything)
        self.assertEqual((world.workspace / "hello.py").read_text(), "print('hello')\n")


if __name__ == "__main__":
    unittest.main()
