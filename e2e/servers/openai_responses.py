"""A scripted OpenAI Responses API server (`POST /v1/responses`, streamed as SSE), as the Codex CLI
calls it.

Each request is turned into a neutral `harness.Turn`; the scenario's brain answers with an
`Action`, which becomes the model's streamed output:

- `Say(text)`    -> an assistant `message` item with one `output_text` part;
- `Shell(cmd)`   -> a `function_call` to the shell tool the request offers (`exec_command`, whose
                    argument is `cmd`; older Codex versions offer `shell` with a `command` argv);
- `Write(p, c)`  -> the same shell tool running `mkdir -p … && printf '%s' … > p`, so the file gets
                    exactly `c` (Codex has no separate file-writing tool in exec mode; its
                    `apply_patch` is reached through the shell tool too, see `write_mode`);
- `Fail(s, m)`   -> HTTP status `s` with OpenAI's error body
                    `{"error": {"message": m, "type": .., "code": ..}}`.

Observed with Codex 0.169.0: the request has no `instructions`; the system prompt is the first
`developer` message, and Codex adds `developer` (permissions, skills) and `user`
(`<environment_context>`, AGENTS.md) context messages that are not the user's words. A tool's
result comes back as a `function_call_output` item whose `output` is text such as
"Process exited with code 1\\n…Output:\\n…".
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import sys
import threading
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import Fail, JsonHandler, Say, Shell, ToolResult, Turn, Write  # noqa: E402


@dataclasses.dataclass
class Preamble:
    """An extra action for this API: an assistant message (`text`) and, in the same response, the
    tool call `then` (`Shell` or `Write`), as a model that explains before it acts. Codex prints
    the text as an `agent_message` that is not the last one."""

    text: str
    then: Shell | Write

# User messages Codex itself adds to the conversation (context, not the user's words).
CONTEXT_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "<user_shell_command>",
    "<turn_aborted>",
    "<skills_instructions>",
    "<permissions instructions>",
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
)

# More tool calls than any scenario needs: the brain is looping.
MAX_CALLS = 30

ERROR_TYPES = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "forbidden"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    500: ("server_error", "server_error"),
    503: ("server_error", "overloaded"),
}


def _text_of(content) -> str:
    """The text of a message's `content` (a string or a list of `input_text`/`output_text` parts)."""
    if isinstance(content, str):
        return content
    parts = []
    for part in content or []:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
    return "\n".join(parts)


def _output_text(output) -> str:
    """The text of a `function_call_output`'s `output`: a string, a list of content parts, or an
    object with `content`."""
    if isinstance(output, str):
        return output
    if isinstance(output, dict):
        return _output_text(output.get("content", ""))
    if isinstance(output, list):
        return _text_of(output)
    return json.dumps(output)


EXIT_RE = re.compile(r"(?:Process exited with code|Exit code:|exit_code\"?:)\s*(-?\d+)")
REFUSAL_MARKERS = (
    "Read-only file system",
    "Permission denied",
    "Operation not permitted",
    "rejected",
    "sandbox denied",
    "failed in sandbox",
    "not allowed",
)


def tool_failed(text: str) -> bool:
    """Whether a tool result reports failure: a non-zero exit code, or (when no exit code is
    given) a sandbox or permission refusal."""
    m = EXIT_RE.search(text)
    if m:
        return int(m.group(1)) != 0
    return any(marker in text for marker in REFUSAL_MARKERS)


def is_context(text: str) -> bool:
    return text.lstrip().startswith(CONTEXT_PREFIXES)


def to_turn(body: dict) -> Turn:
    """The neutral view of one Responses request."""
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    system_parts = []
    if isinstance(body.get("instructions"), str):
        system_parts.append(body["instructions"])
    user_texts: list[str] = []
    tool_results: list[ToolResult] = []
    calls = 0
    after_output = False
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            text = _text_of(item.get("content"))
            if role in ("developer", "system"):
                system_parts.append(text)
            elif role == "user" and not is_context(text):
                user_texts.append(text)
                tool_results = []
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            # This server answers with one call per response, so calls count responses.
            calls += 1
            if after_output:  # a later response: the earlier results are not the newest
                tool_results = []
                after_output = False
        elif kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            text = _output_text(item.get("output"))
            ok = None
            if isinstance(item.get("output"), dict) and isinstance(item["output"].get("success"), bool):
                ok = item["output"]["success"]
            tool_results.append(ToolResult(text, (not ok) if ok is not None else tool_failed(text)))
            after_output = True
    # Tool results count only when they are the newest thing in the conversation.
    newest = next((i for i in reversed(items) if i.get("type", "message") != "reasoning"), None)
    if newest is not None and newest.get("type", "message") == "message":
        tool_results = []
    return Turn(
        system="\n\n".join(system_parts),
        first_user=user_texts[0] if user_texts else "",
        last_user=user_texts[-1] if user_texts else "",
        user_texts=user_texts,
        tool_results=tool_results,
        calls=calls,
        raw=body,
    )


def write_command(path: str, content: str) -> str:
    """A shell command that writes exactly `content` to `path` (relative to the workspace)."""
    parent = str(Path(path).parent)
    mkdir = f"mkdir -p {shlex.quote(parent)} && " if parent not in ("", ".") else ""
    return f"{mkdir}printf '%s' {shlex.quote(content)} > {shlex.quote(path)}"


def apply_patch_command(path: str, content: str) -> str:
    """A shell command that runs Codex's `apply_patch` to add `path` with `content` (Codex
    intercepts it and reports a `file_change` item). Only for new files."""
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines = lines[:-1]
    body = "\n".join("+" + line for line in lines)
    return (
        "apply_patch <<'PATCH'\n*** Begin Patch\n"
        f"*** Add File: {path}\n{body}\n*** End Patch\nPATCH"
    )


class OpenAIResponsesHandler(JsonHandler):
    """Serves `POST /v1/responses` (streaming) and `GET /v1/models`. The server attribute
    `write_mode` ("printf", the default, or "apply_patch") chooses how a `Write` is done."""

    def do_GET(self):  # noqa: N802 - BaseHTTPRequestHandler's naming
        self.server.recorder.add(self.path, dict(self.headers), {})  # type: ignore[attr-defined]
        if self.path.split("?")[0].rstrip("/").endswith("/models"):
            self.send_json(200, {"object": "list", "data": [
                {"id": "m", "object": "model", "created": 0, "owned_by": "e2e"}]})
        else:
            self.send_json(404, error_body(404, f"no route for GET {self.path}"))

    def do_POST(self):  # noqa: N802
        body = self.read_json()
        if not self.path.split("?")[0].rstrip("/").endswith("/responses"):
            self.send_json(404, error_body(404, f"no route for POST {self.path}"))
            return
        turn = to_turn(body)
        if turn.calls >= MAX_CALLS:  # a brain that never says it is done: fail fast, not hang
            self.send_json(400, error_body(400, f"e2e: the scripted conversation made {turn.calls} "
                                                "tool calls; the brain never answered with Say"))
            return
        try:
            action = self.server.brain(turn)  # type: ignore[attr-defined]
        except Exception as exc:  # a brain bug: make it visible in the CLI's output
            self.send_json(500, error_body(500, f"scripted brain failed: {exc!r}"))
            raise
        if isinstance(action, Fail):
            headers = {}
            if action.retry_after is not None:
                headers["Retry-After"] = str(action.retry_after)
            self.send_json(action.status, error_body(action.status, action.message), headers)
            return
        self.send_sse(response_events(action, body, getattr(self.server, "write_mode", "printf")))


def error_body(status: int, message: str) -> dict:
    kind, code = ERROR_TYPES.get(status, ("api_error", f"http_{status}"))
    return {"error": {"message": message, "type": kind, "code": code, "param": None}}


def shell_tool(body: dict) -> tuple[str, str]:
    """The shell tool the request offers, and the name of its command argument."""
    names = set()
    for tool in body.get("tools") or []:
        names.add(tool.get("name"))
        for sub in tool.get("tools") or []:
            names.add(sub.get("name"))
    if "exec_command" in names:
        return "exec_command", "cmd"
    if "shell_command" in names:
        return "shell_command", "command"
    if "shell" in names:
        return "shell", "command"
    raise AssertionError(f"the request offers no shell tool: {sorted(n for n in names if n)}")


_counter = iter(range(1, 1 << 30))
_counter_lock = threading.Lock()


def _next_id() -> int:
    with _counter_lock:
        return next(_counter)


def response_events(action, body: dict, write_mode: str = "printf") -> list[tuple[str, dict]]:
    n = _next_id()
    rid = f"resp_{n}"
    events: list[tuple[str, dict]] = [
        ("response.created", {"type": "response.created", "sequence_number": 0,
                              "response": {"id": rid, "object": "response", "status": "in_progress",
                                           "model": body.get("model", "m"), "output": []}}),
    ]
    preamble: list[tuple[str, dict]] = []
    pre_output: list[dict] = []
    if isinstance(action, Preamble):
        pre_item = {"type": "message", "id": f"msg_{n}_pre", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": action.text, "annotations": []}]}
        preamble = [
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                            "item": {**pre_item, "status": "in_progress", "content": []}}),
            ("response.output_text.delta", {"type": "response.output_text.delta", "item_id": pre_item["id"],
                                            "output_index": 0, "content_index": 0, "delta": action.text}),
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                           "item": pre_item}),
        ]
        pre_output = [pre_item]
        action = action.then
    events += preamble
    index = len(pre_output)
    if isinstance(action, Say):
        item_id = f"msg_{n}"
        item = {"type": "message", "id": item_id, "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": action.text, "annotations": []}]}
        events += [
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                            "item": {**item, "status": "in_progress", "content": []}}),
            ("response.content_part.added", {"type": "response.content_part.added", "item_id": item_id,
                                             "output_index": 0, "content_index": 0,
                                             "part": {"type": "output_text", "text": "", "annotations": []}}),
            ("response.output_text.delta", {"type": "response.output_text.delta", "item_id": item_id,
                                            "output_index": 0, "content_index": 0, "delta": action.text}),
            ("response.output_text.done", {"type": "response.output_text.done", "item_id": item_id,
                                           "output_index": 0, "content_index": 0, "text": action.text}),
            ("response.content_part.done", {"type": "response.content_part.done", "item_id": item_id,
                                            "output_index": 0, "content_index": 0,
                                            "part": item["content"][0]}),
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                           "item": item}),
        ]
        output = [item]
    elif isinstance(action, (Shell, Write)):
        name, arg = shell_tool(body)
        if isinstance(action, Shell):
            command = action.command
        elif write_mode == "apply_patch":
            command = apply_patch_command(action.path, action.content)
        else:
            command = write_command(action.path, action.content)
        args = {arg: command if arg == "cmd" else ["bash", "-lc", command]}
        if name == "shell_command":
            args = {"command": command}
        if name == "exec_command":
            args["yield_time_ms"] = 10000
        arguments = json.dumps(args)
        item_id = f"fc_{n}"
        item = {"type": "function_call", "id": item_id, "call_id": f"call_{n}_{uuid.uuid4().hex[:8]}",
                "name": name, "arguments": arguments, "status": "completed"}
        events += [
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": index,
                                            "item": {**item, "arguments": "", "status": "in_progress"}}),
            ("response.function_call_arguments.delta", {"type": "response.function_call_arguments.delta",
                                                        "item_id": item_id, "output_index": index,
                                                        "delta": arguments}),
            ("response.function_call_arguments.done", {"type": "response.function_call_arguments.done",
                                                       "item_id": item_id, "output_index": index,
                                                       "arguments": arguments}),
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": index,
                                           "item": item}),
        ]
        output = pre_output + [item]
    else:
        raise TypeError(f"not an Action: {action!r}")
    events.append(("response.completed", {
        "type": "response.completed",
        "response": {"id": rid, "object": "response", "status": "completed",
                     "model": body.get("model", "m"), "output": output,
                     "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                               "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                               "total_tokens": 110}}}))
    for i, (_, data) in enumerate(events):
        data["sequence_number"] = i
    return events
