"""Claude Code (2.1.331) end to end: the `claude` and `claude-verifier` presets exactly as shipped in
examples/agents.kdl, the real CLI, and a scripted Anthropic Messages API (servers/anthropic.py).

The brains below decide what the model says; Claude Code runs its real tools under its real
permission modes. Worker and verifier requests are told apart by their content: helixflow's
verifier prompt asks for a verdict with `checks_passed`; helixflow's feedback starts with
"# Attempt N of M failed verification".
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import threading
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (  # noqa: E402
    CACHE,
    Brain,
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
from servers.anthropic import AnthropicHandler, claude_env, conversation_requests, problems  # noqa: E402

FEEDBACK_HEAD = re.compile(r"# Attempt \d+ of \d+ failed verification")
HELLO = 'print("hello")\n'


def is_verifier(turn: Turn) -> bool:
    return '"checks_passed"' in turn.first_user or "checks_passed" in turn.first_user


def is_feedback(text: str) -> bool:
    return bool(FEEDBACK_HEAD.search(text))


def retried(turn: Turn) -> bool:
    """The newest user text is helixflow's feedback (a resumed session, or a fresh one started
    with the prompt plus feedback)."""
    return is_feedback(turn.last_user)


def fixing_brain(t: Turn):
    """A worker that writes broken Python, then hello.py once the feedback came."""
    if t.tool_results:
        return Say("Done.")
    if retried(t):
        return Write("hello.py", HELLO)
    return Write("hello.py", "def broken(:\n    pass\n")


def verdict(success: bool, errors=(), feedback: str = "") -> Say:
    return Say(json.dumps({
        "success": success,
        "errors": list(errors),
        "checks_passed": [] if not success else ["hello.py prints hello"],
        "feedback": feedback,
    }))


def reviewer(success_when) -> Brain:
    """A verifier that reads hello.py (its evidence), then answers a verdict:
    `success_when(turn)` -> (success, errors, feedback)."""

    def brain(turn: Turn):
        if not turn.tool_results:
            return Shell("cat hello.py")
        success, errors, feedback = success_when(turn)
        return verdict(success, errors, feedback)

    return brain


@contextlib.contextmanager
def claude_world():
    """A scripted Anthropic server and a fresh world whose environment points Claude Code at it.
    Yields (server, world, set_brain)."""
    need("claude")
    holder = {}

    def brain(turn: Turn):
        return holder["brain"](turn)

    with ScriptedServer(AnthropicHandler, brain) as server, World() as world:
        world.env.update(claude_env(server.url))  # (API errors are not retried: see claude_env)

        def set_brain(b):
            holder["brain"] = b

        yield server, world, set_brain


class ClaudeCase(unittest.TestCase):
    maxDiff = None

    def run_world(self, world: World, *args: str):
        result = world.run(*args, timeout=120)
        return result

    def assertServerClean(self, server):
        self.assertEqual(problems(server), [], "the scripted server failed while answering")

    def invocation(self, result, phase: str, attempt: int) -> dict:
        return json.loads(result.attempt_file(phase, attempt, "invocation.json"))

    # --- happy paths ---------------------------------------------------------------------------

    def test_pass(self):
        """One attempt: Claude writes the file with its Write tool, the gates pass. The prompt
        reached the model through standard input (defect 13: the journal shows it)."""
        with claude_world() as (server, world, set_brain):
            set_brain(lambda t: Write("hello.py", HELLO) if not t.tool_results else Say("Wrote hello.py."))
            world.pipeline('''
phase "hello" {
    agent "claude"
    prompt "Write hello.py: a Python script that prints hello."
    outputs { file "hello.py" }
    gates { syntax }
    retries 0
}
''')
            result = self.run_world(world)
            self.assertEqual(result.code, 0, result.describe())
            self.assertEqual((world.workspace / "hello.py").read_text(), HELLO)
            self.assertEqual(result.attempts("hello"), 1)
            conv = conversation_requests(server)
            self.assertGreaterEqual(len(conv), 2)
            self.assertIn("Write hello.py", conv[0][1].first_user)
            # defect 13: what the agent received
            inv = self.invocation(result, "hello", 1)
            self.assertTrue(inv["stdin"], inv)
            self.assertFalse(inv["resume"], inv)
            self.assertIn("--session-id", inv["argv"])
            session = inv["argv"][inv["argv"].index("--session-id") + 1]
            self.assertEqual(conv[0][0], session, "Claude Code ran the session helixflow named")
            stdin = result.attempt_file("hello", 1, "stdin.txt")
            self.assertEqual(stdin.strip(), conv[0][1].first_user.strip())
            self.assertServerClean(server)

    def test_retry_with_feedback(self):
        """Attempt 1 writes broken Python (the syntax gate fails); the retry resumes the worker's own
        session (the original task is in it) and receives the feedback on standard input; it fixes
        the file. Defect 13: invocation.json, stdin.txt and feedback-given.md show the resume."""
        with claude_world() as (server, world, set_brain):
            set_brain(fixing_brain)
            world.pipeline('''
phase "hello" {
    agent "claude"
    prompt "TASK-7781: write hello.py, a Python script that prints hello."
    outputs { file "hello.py" }
    gates { syntax }
    retries 2
}
''')
            result = self.run_world(world)
            self.assertEqual(result.code, 0, result.describe())
            self.assertEqual(result.attempts("hello"), 2)
            self.assertEqual((world.workspace / "hello.py").read_text(), HELLO)
            feedback = result.attempt_file("hello", 1, "feedback.md")
            self.assertIn("hello.py", feedback)
            conv = conversation_requests(server)
            first_session = conv[0][0]
            retry = [(s, t) for s, t in conv if retried(t)]
            self.assertTrue(retry, "no request carried the feedback")
            session, turn = retry[0]
            self.assertEqual(session, first_session, "the retry continued another session")
            self.assertIn("TASK-7781", turn.first_user, "the original task is in the resumed session")
            self.assertIn("TASK-7781", turn.user_texts[0])
            self.assertTrue(is_feedback(turn.last_user))
            self.assertIn("hello.py", turn.last_user)
            # defect 13: the journal shows what each attempt's agent received
            inv1 = self.invocation(result, "hello", 1)
            inv2 = self.invocation(result, "hello", 2)
            self.assertFalse(inv1["resume"])
            self.assertTrue(inv2["resume"], inv2)
            self.assertIn("--resume", inv2["argv"])
            self.assertEqual(inv2["session_id"], first_session)
            self.assertEqual(inv2["argv"][inv2["argv"].index("--resume") + 1], first_session)
            given = result.attempt_file("hello", 2, "feedback-given.md")
            stdin2 = result.attempt_file("hello", 2, "stdin.txt")
            self.assertEqual(stdin2, given)
            self.assertTrue(is_feedback(given))
            self.assertEqual(given.strip(), turn.last_user.strip())
            self.assertNotIn("TASK-7781", stdin2, "a resume gets the feedback, not the prompt again")
            dry = world.run("--dry-run", "--force")  # the phase passed: up to date otherwise
            self.assertIn("--resume", dry.stdout + dry.stderr, "--dry-run shows the resume argv (defect 13)")
            self.assertServerClean(server)

    def test_retry_whose_session_is_gone_starts_a_new_one(self):
        """A retry resumes a session Claude Code no longer has (its transcript was removed):
        `--resume <id>` says "No conversation found with session ID" and exits 1, a fatal failure
        of a resumed session, and helixflow tries again at once in a new session with the full
        task and the feedback, which passes. A gate removes the transcripts after attempt 1."""
        with claude_world() as (server, world, set_brain):
            set_brain(fixing_brain)
            world.pipeline(losing_session_phase(
                "claude", "TASK-7782: write hello.py, a Python script that prints hello.", ".claude",
                "*.jsonl"))
            result = self.run_world(world)
            check_new_session(self, result, "No conversation found with session ID",
                              logs=("stderr.log", "stdout.log"))
            conv = conversation_requests(server)
            retry = [t for _s, t in conv if retried(t)]
            self.assertTrue(retry, "no request carried the feedback")
            self.assertIn("TASK-7782", retry[0].first_user, "the new session has the task")
            self.assertEqual((world.workspace / "hello.py").read_text(), HELLO)
            self.assertServerClean(server)

    def test_sub_agent_verdict_pass(self):
        """The claude-verifier reads the file (plan mode lets `cat` run) and passes it."""
        with claude_world() as (server, world, set_brain):
            verifier = reviewer(lambda t: (True, [], ""))

            def brain(t: Turn):
                if is_verifier(t):
                    return verifier(t)
                return Write("hello.py", HELLO) if not t.tool_results else Say("Done.")

            set_brain(brain)
            world.pipeline('''
phase "hello" {
    agent "claude"
    prompt "Write hello.py, a Python script that prints hello."
    outputs { file "hello.py" }
    verify "sub-agent"
    verifier "claude-verifier"
    retries 0
}
''')
            result = self.run_world(world)
            self.assertEqual(result.code, 0, result.describe())
            verdict_json = json.loads(result.attempt_file("hello", 1, "verdict.json"))
            self.assertIn("success", json.dumps(verdict_json))
            reads = [t for s, t in conversation_requests(server) if is_verifier(t) and t.tool_results]
            self.assertTrue(reads and not reads[0].tool_results[0].is_error, "the verifier read hello.py")
            self.assertIn("hello", reads[0].tool_results[0].text)
            self.assertServerClean(server)

    def test_sub_agent_verdict_fail(self):
        """The verifier's failing verdict fails the attempt; its errors and feedback are the
        feedback."""
        with claude_world() as (server, world, set_brain):
            verifier = reviewer(lambda t: (False, ["VERDICT-ERR-31: prints goodbye"], "VERDICT-FB-32: print hello"))

            def brain(t: Turn):
                if is_verifier(t):
                    return verifier(t)
                return Write("hello.py", 'print("goodbye")\n') if not t.tool_results else Say("Done.")

            set_brain(brain)
            world.pipeline('''
phase "hello" {
    agent "claude"
    prompt "Write hello.py, a Python script that prints hello."
    outputs { file "hello.py" }
    verify "sub-agent"
    verifier "claude-verifier"
    retries 0
}
''')
            result = self.run_world(world)
            self.assertEqual(result.code, 1, result.describe())
            feedback = result.attempt_file("hello", 1, "feedback.md")
            self.assertIn("VERDICT-ERR-31", feedback)
            self.assertIn("VERDICT-FB-32", feedback)
            self.assertServerClean(server)

    def test_verifier_cannot_write(self):
        """Plan mode refuses the verifier's Write and a writing Bash command; the file is untouched
        and the verdict stands."""
        with claude_world() as (server, world, set_brain):
            def verifier(t: Turn):
                if not t.tool_results:
                    return Write("hello.py", 'print("hacked by the verifier")\n')
                if t.calls == 1:
                    return Shell("echo hacked > hello.py")
                if t.calls == 2:
                    return Shell("cat hello.py")
                return verdict(True)

            def brain(t: Turn):
                if is_verifier(t):
                    return verifier(t)
                return Write("hello.py", HELLO) if not t.tool_results else Say("Done.")

            set_brain(brain)
            world.pipeline('''
phase "hello" {
    agent "claude"
    prompt "Write hello.py, a Python script that prints hello."
    outputs { file "hello.py" }
    verify "sub-agent"
    verifier "claude-verifier"
    retries 0
}
''')
            result = self.run_world(world)
            self.assertEqual(result.code, 0, result.describe())
            self.assertEqual((world.workspace / "hello.py").read_text(), HELLO)
            results = [t.tool_results[0] for s, t in conversation_requests(server) if is_verifier(t) and t.tool_results]
            self.assertEqual(len(results), 3, results)
            self.assertTrue(results[0].is_error, results[0])
            self.assertIn("plan mode", results[0].text)
            self.assertTrue(results[1].is_error, results[1])
            self.assertFalse(results[2].is_error, results[2])
            self.assertServerClean(server)

    def test_verifier_without_evidence(self):
        """A verifier that passes the work without reading anything gives no evidence: its verdict
        is void and the attempt fails."""
        with claude_world() as (server, world, set_brain):
            def brain(t: Turn):
                if is_verifier(t):
                    return verdict(True)
                return Write("hello.py", HELLO) if not t.tool_results else Say("Done.")

            set_brain(brain)
            world.pipeline('''
phase "hello" {
    agent "claude"
    prompt "Write hello.py, a Python script that prints hello."
    outputs { file "hello.py" }
    verify "sub-agent"
    verifier "claude-verifier"
    retries 0
}
''')
            result = self.run_world(world)
            self.assertEqual(result.code, 1, result.describe())
            self.assertRegex(result.attempt_file("hello", 1, "feedback.md"), r"(?i)tool calls? succeeded|evidence")
            self.assertServerClean(server)

    def test_evidence_no_tool_call(self):
        """The worker only talks about the work (the file was already there): no tool call, so the
        attempt fails on evidence."""
        with claude_world() as (server, world, set_brain):
            set_brain(lambda t: Say("I wrote hello.py; it prints hello."))
            world.write("hello.py", HELLO)
            world.pipeline('''
phase "hello" {
    agent "claude"
    prompt "Write hello.py, a Python script that prints hello."
    outputs { file "hello.py" }
    retries 0
}
''')
            result = self.run_world(world)
            self.assertEqual(result.code, 1, result.describe())
            feedback = result.attempt_file("hello", 1, "feedback.md")
            self.assertRegex(feedback, r"(?i)none of your tool calls succeeded: you made none")
            self.assertServerClean(server)

    def test_evidence_refused_call_does_not_count(self):
        """Defect 14: the worker's only tool call (`python3 hello.py`) is refused by acceptEdits;
        a refused call is no evidence of work."""
        with claude_world() as (server, world, set_brain):
            set_brain(lambda t: Shell("python3 hello.py") if not t.tool_results else Say("It prints hello."))
            world.write("hello.py", HELLO)
            world.pipeline('''
phase "hello" {
    agent "claude"
    prompt "Check that hello.py prints hello."
    outputs { file "hello.py" }
    retries 0
}
''')
            result = self.run_world(world)
            refused = [t.tool_results[0] for s, t in conversation_requests(server) if t.tool_results]
            self.assertTrue(refused and refused[0].is_error, f"the call was not refused: {refused}")
            self.assertEqual(result.code, 1, result.describe())
            feedback = result.attempt_file("hello", 1, "feedback.md")
            self.assertRegex(feedback, r"(?i)none of your tool calls succeeded: 1 were refused")
            self.assertServerClean(server)

    def test_response_extraction(self):
        """`matches "response"` sees Claude's final answer only, not the transcript: attempt 1 puts
        the marker in the file it writes (the transcript) but not in its answer and fails; the retry
        answers with the marker and passes."""
        with claude_world() as (server, world, set_brain):
            def brain(t: Turn):
                if not t.tool_results:
                    return Write("notes.md", "<!-- STEP: done -->\n")
                return Say("All finished.\n<!-- STEP: done -->" if retried(t) or any(
                    is_feedback(x) for x in t.user_texts) else "All finished.")

            set_brain(brain)
            world.pipeline('''
phase "notes" {
    agent "claude"
    prompt "Write notes.md and end your answer with the step marker."
    outputs { file "notes.md" }
    gates { matches "response" #"<!-- STEP: (what|done) -->"# name="step-marker" }
    retries 1
}
''')
            result = self.run_world(world)
            self.assertEqual(result.code, 0, result.describe())
            self.assertEqual(result.attempts("notes"), 2)
            self.assertIn("step-marker", result.attempt_file("notes", 1, "feedback.md"))
            self.assertServerClean(server)

    # --- defects -------------------------------------------------------------------------------

    def test_defect_1_retry_after_verifier_continues_worker_session(self):
        """Defect 1: after the sub-agent verifier ran (the newest session in the folder), the
        worker's retry continues the worker's own session, in acceptEdits, with the verifier's
        feedback; never the verifier's session (`--continue` did that)."""
        with claude_world() as (server, world, set_brain):
            verifier = reviewer(
                lambda t: (True, [], "") if "hello" in (t.tool_results[0].text if t.tool_results else "")
                and "goodbye" not in t.tool_results[0].text
                else (False, ["prints goodbye"], "VERIFIER-SAYS-4411: print hello, not goodbye")
            )

            def brain(t: Turn):
                if is_verifier(t):
                    return verifier(t)
                if t.tool_results:
                    return Say("Done.")
                return Write("hello.py", HELLO if retried(t) else 'print("goodbye")\n')

            set_brain(brain)
            world.pipeline('''
phase "hello" {
    agent "claude"
    prompt "WORKER-TASK-9032: write hello.py, a Python script that prints hello."
    outputs { file "hello.py" }
    verify "sub-agent"
    verifier "claude-verifier"
    retries 1
}
''')
            result = self.run_world(world)
            conv = conversation_requests(server)
            worker_session = conv[0][0]
            verifier_sessions = {s for s, t in conv if is_verifier(t)}
            crossed = [s for s, t in conv if is_verifier(t) and len(t.user_texts) > 1 and retried(t)]
            self.assertEqual(crossed, [], "the worker's feedback went into the verifier's session")
            self.assertEqual(len(verifier_sessions), 2, "one fresh verifier per attempt")
            # (the verifier of attempt 2 sees the task with the feedback too: not a worker request)
            retry = [(s, t) for s, t in conv if retried(t) and not is_verifier(t)]
            self.assertTrue(retry, "the feedback never reached the model")
            for session, turn in retry:
                self.assertEqual(session, worker_session)
                self.assertNotIn(session, verifier_sessions)
                self.assertFalse(any("checks_passed" in x for x in turn.user_texts),
                                 "the retry continued the verifier's conversation")
                self.assertIn("WORKER-TASK-9032", turn.first_user)
                self.assertIn("VERIFIER-SAYS-4411", turn.last_user)
            self.assertEqual(result.code, 0, result.describe())
            self.assertEqual((world.workspace / "hello.py").read_text(), HELLO)
            self.assertServerClean(server)

    def test_defect_1_parallel_phases_keep_their_feedback(self):
        """Defect 1: two phases running at once (both requests are held until both are in flight)
        each retry in their own session with their own feedback."""
        with claude_world() as (server, world, set_brain):
            barrier = threading.Barrier(2, timeout=30)

            def brain(t: Turn):
                name = "a" if "PHASE-A-TASK" in t.first_user else "b"
                if t.tool_results:
                    return Say("Done.")
                if retried(t):
                    return Write(f"{name}.py", f'print("{name}")\n')
                try:
                    barrier.wait()
                except threading.BrokenBarrierError:
                    pass
                return Write(f"{name}.py", f"def broken_{name}(:\n")

            set_brain(brain)
            world.pipeline('''
phase "a" {
    agent "claude"
    prompt "PHASE-A-TASK: write a.py that prints a."
    outputs { file "a.py" }
    scope "a.py"
    gates { syntax }
    retries 1
}
phase "b" {
    agent "claude"
    prompt "PHASE-B-TASK: write b.py that prints b."
    outputs { file "b.py" }
    scope "b.py"
    gates { syntax }
    retries 1
}
''')
            result = world.run("--jobs", "2", timeout=120)
            conv = conversation_requests(server)
            for _, turn in conv:
                if retried(turn):
                    mine = "a" if "a.py" in turn.last_user else "b"
                    self.assertIn(f"PHASE-{mine.upper()}-TASK", turn.first_user,
                                  f"phase {mine}'s feedback went into another phase's session")
            for name, other in (("a", "b"), ("b", "a")):
                own = [(s, t) for s, t in conv if f"PHASE-{name.upper()}-TASK" in t.first_user]
                self.assertTrue(own)
                self.assertEqual(len({s for s, _ in own}), 1, f"phase {name} used one session")
                retries = [t for _, t in own if retried(t)]
                self.assertTrue(retries, f"phase {name} got no feedback")
                for turn in own:
                    for text in turn[1].user_texts:
                        self.assertNotIn(f"PHASE-{other.upper()}-TASK", text)
                        self.assertNotIn(f"broken_{other}", text)
                        if is_feedback(text):
                            self.assertIn(f"{name}.py", text)
                            self.assertNotIn(f"{other}.py", text)
            self.assertEqual(result.code, 0, result.describe())
            self.assertServerClean(server)

    def test_defect_5_prompt_starting_with_dashes(self):
        """Defect 5: a prompt that starts with `---` front matter (and a `-` list) is a prompt, not
        an option."""
        with claude_world() as (server, world, set_brain):
            set_brain(lambda t: Write("hello.py", HELLO) if not t.tool_results else Say("Done."))
            world.write("prompt.md", "---\ntitle: hello\n---\n- write hello.py\n- it prints hello\n")
            world.pipeline('''
phase "hello" {
    agent "claude"
    prompt file="prompt.md"
    outputs { file "hello.py" }
    retries 0
}
''')
            result = self.run_world(world)
            self.assertEqual(result.code, 0, result.describe())
            conv = conversation_requests(server)
            self.assertTrue(conv[0][1].first_user.startswith("---\ntitle: hello"), conv[0][1].first_user[:200])
            self.assertServerClean(server)

    def test_defect_8_verify_self(self):
        """Defect 8: `verify "self"`: the model runs the `helixflow verify` command the prompt names
        through Bash; the preset's `--allowedTools` lets it run in acceptEdits mode and its receipt
        passes the attempt."""
        with claude_world() as (server, world, set_brain):
            def brain(t: Turn):
                match = re.search(r"^ {4}(\S.* verify)\s*$", t.first_user, re.MULTILINE)
                assert match, "the prompt names no verify command"
                if not t.tool_results:
                    return Write("hello.py", HELLO)
                if t.calls == 1:
                    return Shell(match.group(1))
                return Say("Verified." if not t.tool_results[0].is_error else "verify was refused")

            set_brain(brain)
            world.pipeline('''
phase "hello" {
    agent "claude"
    prompt "Write hello.py, a Python script that prints hello."
    outputs { file "hello.py" }
    gates { syntax }
    verify "self"
    retries 0
}
''')
            result = self.run_world(world)
            conv = conversation_requests(server)
            verify_results = [t.tool_results[0] for s, t in conv if t.calls == 2 and t.tool_results]
            self.assertTrue(verify_results, "helixflow verify never ran")
            self.assertFalse(verify_results[0].is_error, f"helixflow verify was refused: {verify_results[0].text}")
            self.assertEqual(result.code, 0, result.describe())
            self.assertServerClean(server)

    def _api_error(self, status: int, message: str, expected: str):
        with claude_world() as (server, world, set_brain):
            set_brain(lambda t: Fail(status, message))
            world.pipeline('''
phase "hello" {
    agent "claude"
    prompt "Write hello.py, a Python script that prints hello."
    outputs { file "hello.py" }
    retries 0
}
''')
            result = self.run_world(world)
            self.assertEqual(result.code, 1, result.describe())
            feedback = result.attempt_file("hello", 1, "feedback.md")
            self.assertIn(expected, feedback)
            self.assertIn(message, json.dumps(result.run_json()))
            self.assertServerClean(server)

    def test_defect_9_api_error_400(self):
        """Defect 9: Claude exits 1 with nothing on stderr; the API's message (in the `result`
        event, is_error) reaches feedback.md and run.json."""
        # (Claude Code rewrites some messages, e.g. "prompt is too long" and "x-api-key" ones, into
        # its own words; these markers are passed through.)
        self._api_error(400, "E2E-400 scripted bad request", "API Error: 400 E2E-400 scripted bad request")

    def test_defect_9_api_error_401(self):
        """Defect 9: an authentication error (401) reaches feedback.md and run.json."""
        self._api_error(401, "E2E-401 scripted credentials refused", "API Error: 401 E2E-401 scripted credentials refused")

    def test_defect_10_prompt_over_128k(self):
        """Defect 10: a prompt over 128 KiB goes through standard input; no argument exceeds the OS
        limit."""
        with claude_world() as (server, world, set_brain):
            set_brain(lambda t: Write("hello.py", HELLO) if not t.tool_results else Say("Done."))
            filler = "".join(f"Context line {i}: nothing to do here.\n" for i in range(6000))
            world.write("prompt.md", "Write hello.py, a Python script that prints hello.\n\n" + filler + "END-OF-PROMPT\n")
            world.pipeline('''
phase "hello" {
    agent "claude"
    prompt file="prompt.md"
    outputs { file "hello.py" }
    retries 0
}
''')
            self.assertGreater(len(filler.encode()), 128 * 1024)
            result = self.run_world(world)
            self.assertEqual(result.code, 0, result.describe())
            first = conversation_requests(server)[0][1].first_user
            self.assertGreater(len(first.encode()), 128 * 1024)
            self.assertIn("END-OF-PROMPT", first)
            self.assertServerClean(server)

    def _full_prompt_on_retry(self, world, server, result):
        self.assertEqual(result.code, 0, result.describe())
        conv = conversation_requests(server)
        retry = [t for s, t in conv if any(is_feedback(x) for x in t.user_texts)]
        self.assertTrue(retry, "the feedback never reached the model")
        texts = "\n".join(retry[0].user_texts)
        self.assertIn("TASK-1102", texts, "the retry lost the task")
        self.assertRegex(texts, FEEDBACK_HEAD)
        self.assertEqual((world.workspace / "hello.py").read_text(), HELLO)

    def test_defect_11_first_run_fails_early(self):
        """Defect 11: attempt 1's `claude` fails before any session exists (simulated by a wrapper
        on PATH that exits 1 on attempt 1); the retry gets the full prompt plus the feedback through
        `command`, not a resume of a session that never existed."""
        with claude_world() as (server, world, set_brain):
            set_brain(lambda t: Write("hello.py", HELLO) if not t.tool_results else Say("Done."))
            wrapper = world.root / "wrapper"
            wrapper.mkdir()
            real = CACHE / "bin" / "claude"
            (wrapper / "claude").write_text(
                "#!/bin/sh\n"
                'if [ "$HELIXFLOW_ATTEMPT" = 1 ]; then\n'
                '    echo "claude: E2E-EARLY crashed before any session" >&2\n'
                "    exit 1\n"
                "fi\n"
                f'exec "{real}" "$@"\n'
            )
            (wrapper / "claude").chmod(0o755)
            world.env["PATH"] = f"{wrapper}:{world.env['PATH']}"
            world.pipeline('''
phase "hello" {
    agent "claude"
    prompt "TASK-1102: write hello.py, a Python script that prints hello."
    outputs { file "hello.py" }
    retries 1
}
''')
            result = self.run_world(world)
            self._full_prompt_on_retry(world, server, result)
            inv2 = self.invocation(result, "hello", 2)
            self.assertFalse(inv2["resume"], inv2)
            self.assertIn("--session-id", inv2["argv"])
            stdin2 = result.attempt_file("hello", 2, "stdin.txt")
            self.assertIn("TASK-1102", stdin2)
            self.assertIn("E2E-EARLY", stdin2)
            self.assertServerClean(server)

    def test_defect_11_model_never_answered(self):
        """Defect 11: every request of attempt 1 gets an API error, so the model never saw the task;
        the retry still carries the task and the feedback (whether helixflow resumes the session
        Claude Code reported or starts over)."""
        with claude_world() as (server, world, set_brain):
            def brain(t: Turn):
                if not any(is_feedback(x) for x in t.user_texts):
                    return Fail(400, "E2E-NEVER: refused before the model ran")
                return Write("hello.py", HELLO) if not t.tool_results else Say("Done.")

            set_brain(brain)
            world.pipeline('''
phase "hello" {
    agent "claude"
    prompt "TASK-1102: write hello.py, a Python script that prints hello."
    outputs { file "hello.py" }
    retries 1
}
''')
            result = self.run_world(world)
            self._full_prompt_on_retry(world, server, result)
            self.assertIn("E2E-NEVER", result.attempt_file("hello", 1, "feedback.md"))
            self.assertServerClean(server)


if __name__ == "__main__":
    unittest.main()
