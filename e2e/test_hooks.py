"""Verification inside the agent's own session, end to end: helixflow's Stop hook in the real
Claude Code (2.1.331) and Codex (0.169.0), installed with `helixflow hook install`, and the real
Claude Code calling `helixflow mcp`'s `verify` tool. Each CLI runs headless against its scripted
model server (servers/), in a fresh HOME and workspace; no `helixflow run` is involved.

- A session whose model first stops with a syntax error in its output file is refused with the
  `file:line:col` feedback; the next model request carries that feedback; the model fixes the file
  and the stop is allowed.
- A phase that can never pass is allowed to stop after `--max-blocks` refusals (Codex has no cap
  of its own: without helixflow's it would loop).
- The MCP server is listed by Claude Code and its `verify` tool is called.
"""

from __future__ import annotations

import json
import subprocess
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import HELIXFLOW, Say, ScriptedServer, Tool, Turn, World, Write, need  # noqa: E402
from servers.anthropic import AnthropicHandler, claude_env, conversation_requests, problems  # noqa: E402
from servers.openai_responses import OpenAIResponsesHandler, to_turn  # noqa: E402
from test_codex import codex_world  # noqa: E402

BROKEN = "def greet(:\n    print('hello')\n"
FIXED = "def greet():\n    print('hello')\n"
PIPELINE = '''pipeline "session"
phase "hello" {
    run "true"
    outputs { file "hello.py" }
    gates { syntax }
}
'''
NEVER = '''pipeline "session"
phase "never" {
    run "true"
    gates { command "echo the tests fail; exit 1" name="tests" }
}
'''
# What helixflow's refusal says (its first line) and where the syntax error is.
REFUSED = "is not done yet"
PLACE = "hello.py:1:11"


def helixflow(world: World, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(HELIXFLOW), *args], cwd=world.workspace, env=world.env,
                          capture_output=True, text=True, timeout=60)


def raw_text(turn: Turn) -> str:
    """Every message of the request as text, system ones included (Claude Code hands a Stop hook's
    reason to the model in a `system` message)."""
    return json.dumps(turn.raw.get("messages") or turn.raw.get("input") or [])


def hook_events(stdout: str) -> list[dict]:
    """The `hook_response` events of Claude Code's stream-json output, in order."""
    events = []
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if event.get("type") == "system" and event.get("subtype") == "hook_response":
            events.append(event)
    return events


def sessions(world: World) -> list[dict]:
    folder = world.workspace / ".helixflow" / "hooks" / "sessions"
    return [json.loads((d / "session.json").read_text()) for d in sorted(folder.iterdir())]


def verdicts(world: World) -> list[str]:
    folder = world.workspace / ".helixflow" / "hooks" / "sessions"
    (session,) = list(folder.iterdir())
    lines = (session / "judgements.jsonl").read_text().splitlines()
    return [json.loads(line)["verdict"] for line in lines]


class ClaudeHooks(unittest.TestCase):
    maxDiff = None

    def setUp(self) -> None:
        need("claude")

    def claude(self, world: World, prompt: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["claude", "-p", "--output-format", "stream-json", "--verbose", "--include-hook-events",
             "--permission-mode", "acceptEdits", *args],
            input=prompt, cwd=world.workspace, env=world.env, capture_output=True, text=True,
            timeout=180)

    def test_a_syntax_error_is_refused_with_its_place_then_fixed_and_allowed(self):
        def brain(turn: Turn):
            if turn.tool_results:
                return Say("Done: hello.py is written.")
            if REFUSED in raw_text(turn):
                return Write("hello.py", FIXED)
            return Write("hello.py", BROKEN)

        with ScriptedServer(AnthropicHandler, brain) as server, World() as world:
            world.env.update(claude_env(server.url))
            world.write("pipeline.kdl", PIPELINE)
            installed = helixflow(world, "hook", "install", "claude")
            self.assertEqual(installed.returncode, 0, installed.stderr)
            self.assertIn("helixflow hook claude-stop", (world.workspace / ".claude" / "settings.json").read_text())
            done = self.claude(world, "Write hello.py with a greet function.")
            self.assertEqual(done.returncode, 0, done.stdout[-3000:] + done.stderr)
            self.assertEqual(problems(server), [])
            hooks = [e for e in hook_events(done.stdout) if e.get("hook_event") == "Stop"]
            self.assertEqual(len(hooks), 2, hooks)
            refusal = json.loads(hooks[0]["stdout"])
            self.assertEqual(refusal["decision"], "block")
            self.assertIn(PLACE, refusal["reason"])
            self.assertIn("def greet(:", refusal["reason"])
            self.assertEqual(hooks[1]["stdout"], "", "the second stop is allowed")
            self.assertEqual(hooks[1]["exit_code"], 0)
            conversation = [turn for _, turn in conversation_requests(server)]
            after = [turn for turn in conversation if REFUSED in raw_text(turn)]
            self.assertTrue(after, "no model request carried the feedback")
            self.assertIn(PLACE, raw_text(after[0]), "the next request carries file:line:col")
            self.assertEqual((world.workspace / "hello.py").read_text(), FIXED)
            self.assertEqual(verdicts(world), ["refused", "passed"])
            runs = helixflow(world, "runs")
            self.assertIn("agent sessions judged by `helixflow hook`", runs.stdout)
            self.assertRegex(runs.stdout, r"claude\s+hello\s+2\s+passed")

    def test_a_phase_that_never_passes_is_allowed_to_stop_after_the_cap(self):
        with ScriptedServer(AnthropicHandler, lambda turn: Say("Done.")) as server, World() as world:
            world.env.update(claude_env(server.url))
            world.write("pipeline.kdl", NEVER)
            command = f"{HELIXFLOW} hook claude-stop --max-blocks 2"
            world.write(".claude/settings.json", json.dumps(
                {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": command}]}]}}))
            done = self.claude(world, "Make the tests pass.")
            self.assertEqual(done.returncode, 0, done.stdout[-3000:] + done.stderr)
            hooks = [e for e in hook_events(done.stdout) if e.get("hook_event") == "Stop"]
            self.assertEqual(len(hooks), 3, hooks)
            for refused in hooks[:2]:
                self.assertEqual(json.loads(refused["stdout"])["decision"], "block")
            last = json.loads(hooks[2]["stdout"])
            self.assertNotIn("decision", last)
            self.assertIn("after 2 stops refused in a row", last["systemMessage"])
            self.assertIn("this stop is allowed (--max-blocks 2)", hooks[2]["stderr"])
            self.assertEqual(len(conversation_requests(server)), 3)
            self.assertEqual(verdicts(world), ["refused", "refused", "allowed-at-cap"])

    def test_the_mcp_server_is_listed_and_its_verify_tool_called(self):
        def brain(turn: Turn):
            calls = turn.calls
            if calls == 0:
                return Tool("ToolSearch", {"query": "select:mcp__helixflow__verify", "max_results": 1})
            if calls == 1:
                return Tool("mcp__helixflow__verify", {"phase": "hello"})
            return Say("helixflow says: " + turn.tool_results[0].text[:200] if turn.tool_results else "?")

        with ScriptedServer(AnthropicHandler, brain) as server, World() as world:
            world.env.update(claude_env(server.url))
            world.write("pipeline.kdl", PIPELINE)
            world.write("hello.py", BROKEN)
            world.write(".mcp.json", json.dumps(
                {"mcpServers": {"helixflow": {"type": "stdio", "command": str(HELIXFLOW), "args": ["mcp"]}}}))
            done = self.claude(world, "Is the hello phase done?", "--allowedTools", "mcp__helixflow")
            self.assertEqual(done.returncode, 0, done.stdout[-3000:] + done.stderr)
            self.assertEqual(problems(server), [])
            init = next(json.loads(line) for line in done.stdout.splitlines()
                        if '"subtype":"init"' in line)
            servers = {s["name"]: s["status"] for s in init.get("mcp_servers", [])}
            self.assertEqual(servers.get("helixflow"), "connected", init)
            for tool in ("verify", "status", "explain", "lint"):
                self.assertIn(f"mcp__helixflow__{tool}", init.get("tools", []), init)
            conversation = [turn for _, turn in conversation_requests(server)]
            verify = [t for t in conversation if t.tool_results and "success" in t.tool_results[0].text]
            self.assertTrue(verify, "the verify tool's result never reached the model")
            result = verify[0].tool_results[0]
            self.assertFalse(result.is_error, result.text)
            self.assertIn(PLACE, result.text)
            self.assertIn('"success": false', result.text)


class CodexHooks(unittest.TestCase):
    maxDiff = None

    def setUp(self) -> None:
        need("codex")

    def codex_world(self, server: ScriptedServer) -> World:
        world = codex_world(server, git=True)
        world.__enter__()
        self.addCleanup(world.__exit__, None, None, None)
        # Codex reads a project's .codex/ only in a trusted project; `--dangerously-bypass-hook-trust`
        # stands for the person reviewing the hook with `/hooks`.
        config = world.home / ".codex" / "config.toml"
        config.write_text(config.read_text() + f'\n[projects."{world.workspace}"]\ntrust_level = "trusted"\n')
        return world

    def codex(self, world: World, prompt: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["codex", "exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write",
             "--dangerously-bypass-hook-trust", "-"],
            input=prompt, cwd=world.workspace, env=world.env, capture_output=True, text=True, timeout=180)

    def serve(self, brain) -> ScriptedServer:
        server = ScriptedServer(OpenAIResponsesHandler, brain)
        server.__enter__()
        self.addCleanup(server.__exit__, None, None, None)
        return server

    def requests(self, server: ScriptedServer) -> list[Turn]:
        return [to_turn(b) for p, _, b in server.recorder.requests if p.endswith("/responses")]

    def test_a_syntax_error_is_refused_with_its_place_then_fixed_and_allowed(self):
        def brain(turn: Turn):
            if turn.tool_results:
                return Say("Done: hello.py is written.")
            if any(REFUSED in text for text in turn.user_texts):
                return Write("hello.py", FIXED)
            return Write("hello.py", BROKEN)

        server = self.serve(brain)
        world = self.codex_world(server)
        world.write("pipeline.kdl", PIPELINE)
        installed = helixflow(world, "hook", "install", "codex")
        self.assertEqual(installed.returncode, 0, installed.stderr)
        done = self.codex(world, "Write hello.py with a greet function.")
        self.assertEqual(done.returncode, 0, done.stdout[-3000:] + done.stderr)
        turns = self.requests(server)
        fed = [t for t in turns if any(REFUSED in text for text in t.user_texts)]
        self.assertTrue(fed, "no model request carried the feedback")
        feedback = next(text for text in fed[0].user_texts if REFUSED in text)
        self.assertIn("<hook_prompt", feedback)
        self.assertIn(PLACE, feedback)
        self.assertEqual((world.workspace / "hello.py").read_text(), FIXED)
        self.assertEqual(verdicts(world), ["refused", "passed"])
        self.assertEqual(sessions(world)[0]["agent"], "codex")

    def test_a_phase_that_never_passes_is_allowed_to_stop_after_the_cap(self):
        server = self.serve(lambda turn: Say("Done."))
        world = self.codex_world(server)
        world.write("pipeline.kdl", NEVER)
        command = f"{HELIXFLOW} hook codex-stop --max-blocks 2"
        world.write(".codex/hooks.json", json.dumps(
            {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": command}]}]}}))
        done = self.codex(world, "Make the tests pass.")
        self.assertEqual(done.returncode, 0, done.stdout[-3000:] + done.stderr)
        turns = self.requests(server)
        self.assertEqual(len(turns), 3, "two refusals, then the stop is allowed")
        self.assertEqual(sum(REFUSED in text for text in turns[-1].user_texts), 2)
        self.assertEqual(verdicts(world), ["refused", "refused", "allowed-at-cap"])


if __name__ == "__main__":
    unittest.main()
