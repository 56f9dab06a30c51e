"""Aider 0.86.2 end to end: the shipped `aider` and `aider-verifier` presets, driven by a scripted
OpenAI Chat Completions server (servers/openai_chat.py).

Aider has no tools: the scripted model answers in Aider's "whole" edit format (a path line, then
the file fenced), which Aider parses and applies itself, printing "Applied edit to <path>".
"""

from __future__ import annotations

import json
import os
import stat
import sys
import unittest
from http.server import BaseHTTPRequestHandler
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Fail, Say, ScriptedServer, Shell, Turn, World, Write, need  # noqa: E402
from servers.openai_chat import (  # noqa: E402
    MODEL,
    OpenAIChatHandler,
    listing,
    reply_text,
    aider_env,
    adapter_errors,
    chat_requests,
    turn_of,
)

TASK = "Write hello.py: a Python program that prints exactly `hello, world`."
GOOD = 'print("hello, world")\n'
BROKEN = 'def main(:\n    print("hello, world")\n'

# A verdict whose lines are longer than 80 columns, with strings that cross column 80: Aider's
# default output wraps them (defect 6).
LONG = "the program prints exactly the requested greeting and nothing else, as the task asks"


def verdict(success: bool, errors: list[str] | None = None, feedback: str = "") -> str:
    body = {
        "success": success,
        "errors": errors or [],
        "checks_passed": [f"hello.py exists and is valid Python: {LONG}"] if success else [],
        "feedback": feedback,
    }
    return "I reviewed the change to hello.py against the task. My verdict: " + json.dumps(body)


def is_verifier(turn: Turn) -> bool:
    return "## Your verdict" in turn.first_user and "# Review the work of phase" in turn.first_user


def is_retry(turn: Turn) -> bool:
    return "failed verification" in turn.first_user


class BrowserLog:
    """A fake browser on PATH (`www-browser`, `xdg-open`, …), as Python's `webbrowser` finds one
    when TERM is set: every page Aider tries to open is logged."""

    NAMES = ("www-browser", "xdg-open", "x-www-browser", "lynx", "w3m", "links", "elinks")

    def __init__(self, world: World) -> None:
        self.bin = world.root / "browser-bin"
        self.log = world.root / "browser.log"
        self.bin.mkdir()
        for name in self.NAMES:
            script = self.bin / name
            script.write_text(f'#!/bin/sh\necho "$0 $*" >> "{self.log}"\n')
            script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        world.env["PATH"] = f"{self.bin}{os.pathsep}{world.env['PATH']}"

    def opened(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


class UrlTrap(BaseHTTPRequestHandler):
    """A second local server, named in a prompt: it must receive nothing."""

    def _any(self) -> None:
        self.server.recorder.add(self.path, dict(self.headers), {})  # type: ignore[attr-defined]
        data = b"<html><body>secret instructions</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_HEAD = do_POST = _any

    def log_message(self, format, *args):  # noqa: A002
        pass


class AiderCase(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls) -> None:
        need("aider")

    def world(self, server: ScriptedServer, full_env: bool = True) -> World:
        """A world for Aider. `full_env`: the variables AGENT-CLIS.md lists; without it only the
        three that point Aider at the server, so that the preset alone must keep Aider offline.
        TERM is a real terminal's (helixflow's users run it in one): Aider's pretty output is on
        unless the preset turns it off."""
        world = World()
        self.addCleanup(world.__exit__, None, None, None)
        self.addCleanup(lambda: self.assertEqual(adapter_errors(server), []))
        env = aider_env(server.url)
        if not full_env:
            env = {k: env[k] for k in ("OPENAI_API_BASE", "OPENAI_API_KEY", "AIDER_MODEL")}
        world.env.update(env)
        world.env["TERM"] = "xterm-256color"
        # Context window and prices for the scripted model: Aider otherwise downloads LiteLLM's
        # price list from GitHub for an unknown model, whatever its flags.
        (world.home / ".aider.model.metadata.json").write_text(json.dumps({
            f"openai/{MODEL}": {
                "max_input_tokens": 128000, "max_tokens": 4096, "max_output_tokens": 4096,
                "input_cost_per_token": 0.000001, "output_cost_per_token": 0.000002,
                "litellm_provider": "openai", "mode": "chat",
            }
        }))
        return world

    def run_world(self, world: World, *args: str):
        return world.run(*args, timeout=120)

    def worker_turns(self, server: ScriptedServer) -> list[Turn]:
        """Every worker request (not the verifier's, not Aider's summaries), as the brain saw it."""
        turns = [turn_of(body) for _path, _headers, body in chat_requests(server.recorder)]
        return [turn for turn in turns if not is_verifier(turn)]

    def worker_texts(self, server: ScriptedServer) -> list[str]:
        """The task text of every worker request (first user message after Aider's scaffolding)."""
        return [turn.first_user for turn in self.worker_turns(server)]

    def assert_only_chat_completions(self, server: ScriptedServer) -> None:
        paths = {path.split("?")[0] for path, _h, _b in server.recorder.requests}
        self.assertEqual(paths, {"/v1/chat/completions"}, server.recorder.requests)
        self.assertEqual(adapter_errors(server), [])


class TestAider(AiderCase):
    def test_happy_pass(self):
        def brain(turn: Turn):
            if turn.calls == 0 and TASK in turn.first_user:
                return Write("hello.py", GOOD)
            return Say("Done.")

        with ScriptedServer(OpenAIChatHandler, brain) as server:
            world = self.world(server)
            world.pipeline(f'''
phase "hello" {{
    agent "aider"
    prompt "{TASK}"
    outputs {{ file "hello.py" }}
    gates {{
        syntax
        command "python3 hello.py | grep -qx 'hello, world'" name="prints"
    }}
}}
''')
            result = self.run_world(world)
        self.assertEqual(result.code, 0, result.describe())
        self.assertEqual((world.workspace / "hello.py").read_text(), GOOD)
        self.assertEqual(result.attempts("hello"), 1)
        requests = chat_requests(server.recorder)
        self.assertEqual(len(requests), 1, requests)
        body = requests[0][2]
        self.assertEqual(body.get("model"), MODEL)
        self.assertFalse(body.get("stream"), "the preset runs Aider with --no-stream")
        self.assert_only_chat_completions(server)
        # The preset's flags reach Aider, and the journal shows them.
        invocation = json.loads(result.attempt_file("hello", 1, "invocation.json"))
        for flag in ("--no-detect-urls", "--no-pretty", "--no-git", "--no-auto-commits"):
            self.assertIn(flag, invocation["argv"])
        # --no-git: no repository appears in a folder that had none.
        self.assertFalse((world.workspace / ".git").exists())
        self.assertFalse((world.workspace / ".gitignore").exists())

    def test_retry_with_feedback(self):
        def brain(turn: Turn):
            if turn.calls > 0:
                # Aider's own lint round ("Fix any errors below"): the model declines.
                return Say("I will leave the file as it is.")
            if is_retry(turn):
                return Write("hello.py", GOOD)
            return Write("hello.py", BROKEN)

        with ScriptedServer(OpenAIChatHandler, brain) as server:
            world = self.world(server)
            world.pipeline(f'''
phase "hello" {{
    agent "aider"
    prompt "{TASK}"
    outputs {{ file "hello.py" }}
    gates {{ syntax }}
    retries 1
}}
''')
            result = self.run_world(world)
        self.assertEqual(result.code, 0, result.describe())
        self.assertEqual(result.attempts("hello"), 2)
        self.assertEqual((world.workspace / "hello.py").read_text(), GOOD)
        retries = [t for t in self.worker_texts(server) if "failed verification" in t]
        self.assertTrue(retries, self.worker_texts(server))
        # Aider has no session to resume: the retry is a new chat with the task and the feedback.
        retry = retries[0]
        self.assertIn(TASK, retry)
        self.assertIn("# Attempt 1 of 2 failed verification", retry)
        self.assertIn("hello.py:1", retry)
        invocation = json.loads(result.attempt_file("hello", 2, "invocation.json"))
        self.assertFalse(invocation["resume"])
        # Aider lints what it wrote and asks the model once to fix it, in the same chat: the
        # brain saw that as a second call of attempt 1.
        turns = self.worker_turns(server)
        lint_rounds = [t for t in turns if "# Fix any errors below" in t.last_user]
        self.assertEqual(len(lint_rounds), 1, [t.last_user for t in self.worker_turns(server)])
        self.assertEqual(lint_rounds[0].calls, 1)
        self.assertIn(TASK, lint_rounds[0].first_user)

    def verdict_scenario(self, verdicts: list[str]):
        """A worker that writes hello.py, and a verifier that answers `verdicts` in turn."""
        given = []

        def brain(turn: Turn):
            if is_verifier(turn):
                answer = verdicts[min(len(given), len(verdicts) - 1)]
                given.append(turn.first_user)
                return Say(answer)
            if turn.calls > 0:
                return Say("Done.")
            return Write("hello.py", GOOD)

        server = ScriptedServer(OpenAIChatHandler, brain)
        with server:
            world = self.world(server)
            world.pipeline(f'''
phase "hello" {{
    agent "aider"
    prompt "{TASK}"
    outputs {{ file "hello.py" }}
    gates {{ syntax }}
    verify "sub-agent"
    verifier "aider-verifier"
    retries {len(verdicts) - 1}
}}
''')
            result = self.run_world(world)
        return server, world, result, given

    def test_subagent_verdict_pass(self):
        # Defect 6: pretty output wrapped the JSON verdict; the verdict here has lines and strings
        # that cross column 80, in a terminal that would get pretty output.
        server, world, result, given = self.verdict_scenario([verdict(True)])
        self.assertEqual(result.code, 0, result.describe())
        self.assertEqual(len(given), 1)
        self.assertIn(TASK, given[0])
        saved = json.loads(result.attempt_file("hello", 1, "verdict.json"))
        self.assertIs(saved["success"], True, saved)
        self.assertIn(LONG, json.dumps(saved))
        # The verifier's answer is printed on one line, as the model gave it.
        self.assertIn(verdict(True), result.attempt_file("hello", 1, "verifier.stdout.log"))
        self.assert_only_chat_completions(server)

    def test_subagent_verdict_fail(self):
        # Defect 6 too: a failing verdict's errors (long lines) must reach the next attempt.
        error = f"hello.py prints the greeting, but the task also asked for a comment: {LONG}"
        server, world, result, given = self.verdict_scenario(
            [verdict(False, [error], "Add the comment and keep the output."), verdict(True)]
        )
        self.assertEqual(result.code, 0, result.describe())
        self.assertEqual(result.attempts("hello"), 2)
        first = json.loads(result.attempt_file("hello", 1, "verdict.json"))
        self.assertIs(first["success"], False, first)
        self.assertEqual(first["errors"], [error])
        retry = [t for t in self.worker_texts(server) if "failed verification" in t]
        self.assertTrue(retry)
        self.assertIn(error, retry[0])
        self.assertIn(TASK, retry[0])

    def test_verifier_cannot_write(self):
        # Aider has no read-only mode. The verifier preset uses the `ask` chat mode (no edits are
        # parsed) and `--dry-run`, and keeps its history out of the workspace: a reply that lists
        # a file in the edit format changes nothing, and the verdict stands.
        def brain(turn: Turn):
            if is_verifier(turn):
                return Say("I fixed it myself:\n\nhello.py\n```python\nprint('hacked')\n```\n\n"
                           + verdict(True))
            if turn.calls > 0:
                return Say("Done.")
            return Write("hello.py", GOOD)

        with ScriptedServer(OpenAIChatHandler, brain) as server:
            world = self.world(server)
            world.pipeline(f'''
phase "hello" {{
    agent "aider"
    prompt "{TASK}"
    outputs {{ file "hello.py" }}
    verify "sub-agent"
    verifier "aider-verifier"
    retries 0
}}
''')
            result = self.run_world(world)
        self.assertEqual(result.code, 0, result.describe())
        self.assertEqual((world.workspace / "hello.py").read_text(), GOOD)
        saved = json.loads(result.attempt_file("hello", 1, "verdict.json"))
        self.assertIs(saved["success"], True, saved)
        self.assertNotIn("Applied edit", result.attempt_file("hello", 1, "verifier.stdout.log"))

    def test_writing_verifier_is_undone(self):
        # What helixflow does when an Aider verifier does write: the worker preset used as a
        # verifier applies the edit; helixflow voids the verdict and restores the file.
        def brain(turn: Turn):
            if is_verifier(turn):
                if turn.calls > 0:
                    return Say(verdict(True))
                return Write("hello.py", "print('hacked')\n")
            if turn.calls > 0:
                return Say("Done.")
            return Write("hello.py", GOOD)

        with ScriptedServer(OpenAIChatHandler, brain) as server:
            world = self.world(server)
            world.pipeline(f'''
phase "hello" {{
    agent "aider"
    prompt "{TASK}"
    outputs {{ file "hello.py" }}
    verify "sub-agent"
    verifier "aider"
    retries 0
}}
''')
            result = self.run_world(world)
        self.assertEqual(result.code, 1, result.describe())
        self.assertEqual((world.workspace / "hello.py").read_text(), GOOD)
        saved = json.loads(result.attempt_file("hello", 1, "verdict.json"))
        self.assertIn("hello.py", saved["changed"], saved)
        self.assertEqual(saved["not_restored"], [], saved)
        self.assertTrue(saved["void"], saved)
        self.assertIn("Applied edit to hello.py",
                      result.attempt_file("hello", 1, "verifier.stdout.log"))

    def test_evidence(self):
        # The model only talks about the work: Aider exits 0 without "Applied edit to"; the
        # attempt fails as skipped work and the retry does it.
        def brain(turn: Turn):
            if is_retry(turn) and turn.calls == 0:
                return Write("hello.py", GOOD)
            return Say("I wrote hello.py as asked.")

        with ScriptedServer(OpenAIChatHandler, brain) as server:
            world = self.world(server)
            world.write("hello.py", GOOD)  # already there: only the evidence can tell
            world.pipeline(f'''
phase "hello" {{
    agent "aider"
    prompt "{TASK}"
    outputs {{ file "hello.py" }}
    retries 1
}}
''')
            result = self.run_world(world)
        self.assertEqual(result.code, 0, result.describe())
        self.assertEqual(result.attempts("hello"), 2)
        feedback = result.attempt_file("hello", 1, "feedback.md")
        self.assertIn("Applied edit to", feedback)
        self.assertIn("Applied edit to hello.py", result.attempt_file("hello", 2, "stdout.log"))

    def test_response_extraction(self):
        # A line longer than 80 columns: Aider's default output would wrap the marker's line.
        marker = ("Summary: wrote hello.py, checked it twice, and every check I ran passed "
                  "<!-- STEP: done -->")

        def brain(turn: Turn):
            if turn.calls > 0:
                return Say("Done.")
            return Say(marker + "\n\nhello.py\n```python\n" + GOOD + "```\n")

        with ScriptedServer(OpenAIChatHandler, brain) as server:
            world = self.world(server)
            world.pipeline(f'''
phase "hello" {{
    agent "aider"
    prompt "{TASK}"
    outputs {{ file "hello.py" }}
    gates {{
        matches "response" #"check I ran passed <!-- STEP: (what|why|done) -->"# name="step"
    }}
    retries 0
}}
''')
            result = self.run_world(world)
        self.assertEqual(result.code, 0, result.describe())
        self.assertEqual((world.workspace / "hello.py").read_text(), GOOD)

    def test_bookkeeping_outside_scope(self):
        # Defect 7: Aider's own files (.aider.chat.history.md, and without --no-git a new .git and
        # a .gitignore entry) failed any `scope` gate. Now only its history appears, as
        # bookkeeping: `scope` and `changes` ignore it, the journal lists it.
        def brain(turn: Turn):
            if turn.calls > 0:
                return Say("Done.")
            return Write("src/hello.py", GOOD)

        with ScriptedServer(OpenAIChatHandler, brain) as server:
            world = self.world(server)
            world.pipeline(f'''
phase "hello" {{
    agent "aider"
    prompt "{TASK.replace("hello.py", "src/hello.py")}"
    outputs {{ file "src/hello.py" }}
    scope "src/**"
    gates {{ changes }}
    retries 0
}}
''')
            result = self.run_world(world)
        self.assertEqual(result.code, 0, result.describe())
        self.assertTrue((world.workspace / ".aider.chat.history.md").exists())
        self.assertFalse((world.workspace / ".gitignore").exists())
        changes = json.loads(result.attempt_file("hello", 1, "changes.json"))
        self.assertEqual(changes["created"], ["src/hello.py"], changes)
        bookkeeping = json.loads(result.attempt_file("hello", 1, "bookkeeping.json"))
        self.assertIn(".aider.chat.history.md", bookkeeping["created"], bookkeeping)

    def test_bookkeeping_not_counted_as_changes(self):
        # Defect 7: `changes` does not count Aider's history. One file written, two required:
        # the gate fails (it would pass if the history counted).
        def brain(turn: Turn):
            if turn.calls > 0:
                return Say("Done.")
            return Write("hello.py", GOOD)

        with ScriptedServer(OpenAIChatHandler, brain) as server:
            world = self.world(server)
            world.pipeline(f'''
phase "hello" {{
    agent "aider"
    prompt "{TASK}"
    gates {{ changes min=2 }}
    retries 0
}}
''')
            result = self.run_world(world)
        self.assertEqual(result.code, 1, result.describe())
        self.assertTrue((world.workspace / ".aider.chat.history.md").exists())
        gates = json.loads(result.attempt_file("hello", 1, "gates.json"))
        changes = [g for g in gates if g["kind"] == "changes"]
        self.assertEqual([g["status"] for g in changes], ["failed"], gates)

    def test_bookkeeping_still_protected(self):
        # Defect 7's other half: `protect` still covers bookkeeping files.
        def brain(turn: Turn):
            if turn.calls > 0:
                return Say("Done.")
            return Write("hello.py", GOOD)

        with ScriptedServer(OpenAIChatHandler, brain) as server:
            world = self.world(server)
            world.write(".aider.chat.history.md", "# kept by the team\n")
            world.pipeline(f'''
phase "hello" {{
    agent "aider"
    prompt "{TASK}"
    outputs {{ file "hello.py" }}
    protect ".aider.chat.history.md"
    retries 0
}}
''')
            result = self.run_world(world)
        self.assertEqual(result.code, 1, result.describe())
        feedback = result.attempt_file("hello", 1, "feedback.md")
        self.assertIn(".aider.chat.history.md", feedback)

    def test_no_url_fetched_no_browser(self):
        # Defect 6 (second half): with --yes-always, Aider scraped a URL found in its input (and
        # installed Playwright with apt to do it). The preset alone must prevent it: the world sets
        # no AIDER_DETECT_URLS, AIDER_CHECK_UPDATE or AIDER_ANALYTICS. Nor may Aider open a
        # browser: it offers the URLs of its release notes (first run), of model warnings and of
        # an API error, and --yes-always accepts.
        trap = ScriptedServer(UrlTrap, lambda turn: Say(""))  # type: ignore[arg-type]
        with trap:
            url = f"{trap.url}/docs/spec.html"

            def brain(turn: Turn):
                if turn.calls > 0:
                    return Say("Done.")
                if is_retry(turn):
                    return Write("hello.py", GOOD)
                return Fail(401, "Incorrect API key provided. You can find your API key at "
                                 f"{trap.url}/account/api-keys.")

            with ScriptedServer(OpenAIChatHandler, brain) as server:
                world = self.world(server, full_env=False)
                browser = BrowserLog(world)
                world.pipeline(f'''
phase "hello" {{
    agent "aider"
    prompt "{TASK} The details are at {url} ."
    outputs {{ file "hello.py" }}
    retries 1
}}
''')
                result = self.run_world(world)
            self.assertEqual(result.code, 0, result.describe())
            self.assertEqual(trap.recorder.requests, [])
            self.assertEqual(browser.opened(), "")
            self.assert_only_chat_completions(server)
            # Aider prints the API error on stdout and exits 0: the attempt fails for want of
            # evidence ("Applied edit to"), and the retry does the work.
            self.assertIn("Incorrect API key", result.attempt_file("hello", 1, "stdout.log"))
            self.assertIn("Applied edit to", result.attempt_file("hello", 1, "feedback.md"))


class TestAiderAdapter(unittest.TestCase):
    """The server's mapping of actions and requests, without the CLI."""

    def test_write_is_a_whole_format_listing(self):
        self.assertEqual(listing("src/a.py", "x = 1"), "src/a.py\n```python\nx = 1\n```\n")
        self.assertIn("src/a.py\n```python\nx = 1\n```\n", reply_text(Write("src/a.py", "x = 1")))
        with self.assertRaises(ValueError):
            listing("README.md", "```sh\nls\n```\n")

    def test_shell_is_refused(self):
        # Aider has no shell tool (and runs no suggested command under --yes-always).
        with self.assertRaises(ValueError):
            reply_text(Shell("ls"))

    def test_turn_leaves_out_aider_scaffolding(self):
        body = {"messages": [
            {"role": "system", "content": "Act as an expert software developer."},
            {"role": "user", "content": "Change the greeting to be more casual"},
            {"role": "assistant", "content": "Ok, I will: ..."},
            {"role": "user", "content": "I switched to a new code base. Please don't ..."},
            {"role": "assistant", "content": "Ok."},
            {"role": "user", "content": "Write a.py"},
            {"role": "assistant", "content": "a.py\n```\nx(\n```"},
            {"role": "user", "content": "I updated the files."},
            {"role": "assistant", "content": "Ok."},
            {"role": "user", "content": "I have *added these files to the chat* ..."},
            {"role": "assistant", "content": "Ok, any changes I propose will be to those files."},
            {"role": "user", "content": "# Fix any errors below, if possible.\n\nTo suggest "
                                        "changes to a file you MUST return the entire content "
                                        "of the updated file.\n..."},
        ]}
        turn = turn_of(body)
        self.assertEqual(turn.first_user, "Write a.py")
        self.assertEqual(turn.last_user, "# Fix any errors below, if possible.")
        self.assertEqual(turn.calls, 1)


if __name__ == "__main__":
    unittest.main()
