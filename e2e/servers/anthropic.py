"""A scripted Anthropic Messages API for Claude Code.

Claude Code (2.1.331) pointed at this server with ANTHROPIC_BASE_URL calls streaming
`POST /v1/messages?beta=true` and reads server-sent events: message_start, content_block_start
(text or tool_use), content_block_delta (text_delta / input_json_delta), content_block_stop,
message_delta (stop_reason and usage), message_stop. Each request is turned into a neutral
harness.Turn and the scenario's brain says what the model does next:

- Write(path, content) -> a `Write` tool call {file_path: absolute path, content}
- Shell(command)       -> a `Bash` tool call {command, description}
- Tool(name, input)    -> a call of the tool `name` (an MCP tool, ToolSearch) with `input`
- Say(text)            -> a text block and stop_reason end_turn
- Fail(status, msg)    -> that HTTP status with Anthropic's error body
                          {"type": "error", "error": {"type": ..., "message": msg}}

Observed with 2.1.331 and the variables of `claude_env`: no endpoint other than
`/v1/messages?beta=true` is called, and no onboarding or pre-seeded $HOME is needed. Each request
carries the whole conversation (a `--resume`d session resends the original task), the header
X-Claude-Code-Session-Id, and the working directory in a `role: "system"` message ("Primary
working directory: …"), which is where a relative Write path is resolved. User messages start with
injected `<system-reminder>` text blocks, which the Turn leaves out.

Requests without tools (side queries such as a title, not seen in -p mode) are answered with a
short text without asking the brain; `count_tokens` and `GET /v1/models` get plausible answers;
anything else is a 404 in Anthropic's error shape. When the brain raises, the CLI gets a 400 (which
it does not retry with backoff) and the error is kept for `problems(server)`.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import Fail, JsonHandler, Say, Shell, Tool, ToolResult, Turn, Write  # noqa: E402

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}

_ids = itertools.count(1)


def error_body(status: int, message: str) -> dict:
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}


def _text_of(content) -> str:
    """The text of a message's or a tool_result's content (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(block.get("text", ""))
    return "\n".join(parts)


def _user_text(message: dict) -> str:
    """The user's own text in a message: text blocks other than Claude Code's injected
    <system-reminder> context."""
    content = message.get("content")
    if isinstance(content, str):
        blocks = [{"type": "text", "text": content}]
    else:
        blocks = content or []
    parts = []
    for block in blocks:
        if not isinstance(block, dict) or block.get("type") != "text":
            continue
        text = block.get("text", "")
        if text.lstrip().startswith("<system-reminder>") and text.rstrip().endswith("</system-reminder>"):
            continue
        parts.append(text)
    return "\n".join(parts)


def system_text(body: dict) -> str:
    system = body.get("system")
    if isinstance(system, str):
        return system
    return "\n".join(b.get("text", "") for b in system or [] if isinstance(b, dict))


def workspace_of(body: dict) -> str | None:
    """The folder Claude Code runs in, as its system prompt (or context) states it."""
    texts = [system_text(body)]
    for message in body.get("messages", []):
        content = message.get("content")
        texts.append(content if isinstance(content, str) else json.dumps(content))
    for text in texts:
        match = re.search(r"working directory: (/[^\n\\\"]*)", text, re.IGNORECASE)
        if match:
            return match.group(1).strip()
    return None


def to_turn(body: dict) -> Turn:
    """The neutral view of one Messages request."""
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    user_texts = []
    for message in messages:
        if message.get("role") == "user":
            text = _user_text(message)
            if text.strip():
                user_texts.append(text)
    tool_results: list[ToolResult] = []
    if messages and messages[-1].get("role") == "user" and isinstance(messages[-1].get("content"), list):
        for block in messages[-1]["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                tool_results.append(
                    ToolResult(_text_of(block.get("content")), bool(block.get("is_error")))
                )
    calls = sum(
        1
        for m in messages
        if m.get("role") == "assistant"
        and isinstance(m.get("content"), list)
        and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in m["content"])
    )
    last_user = ""
    for message in reversed(messages):
        if message.get("role") == "user":
            text = _user_text(message)
            if text.strip():
                last_user = text
                break
    return Turn(
        system=system_text(body),
        first_user=user_texts[0] if user_texts else "",
        last_user=last_user,
        user_texts=user_texts,
        tool_results=tool_results,
        calls=calls,
        raw=body,
    )


def is_conversation(body: dict) -> bool:
    """The agent's conversation carries its tools; Claude Code's side queries do not."""
    return bool(body.get("tools"))


def _approx_tokens(body: dict) -> int:
    return max(1, len(json.dumps(body.get("messages", []))) // 4)


def _events(model: str, blocks: list[dict], stop_reason: str, input_tokens: int) -> list:
    message_id = f"msg_e2e{next(_ids):06d}"
    events: list = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": input_tokens,
                        "output_tokens": 1,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                    },
                },
            },
        )
    ]
    output_tokens = 1
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            events.append(
                ("content_block_start",
                 {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
            )
            events.append(
                ("content_block_delta",
                 {"type": "content_block_delta", "index": index,
                  "delta": {"type": "text_delta", "text": block["text"]}})
            )
            output_tokens += max(1, len(block["text"]) // 4)
        else:
            events.append(
                ("content_block_start",
                 {"type": "content_block_start", "index": index,
                  "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}})
            )
            partial = json.dumps(block["input"])
            # Two deltas, as the real API splits the JSON arbitrarily.
            cut = len(partial) // 2
            for piece in (partial[:cut], partial[cut:]):
                events.append(
                    ("content_block_delta",
                     {"type": "content_block_delta", "index": index,
                      "delta": {"type": "input_json_delta", "partial_json": piece}})
                )
            output_tokens += max(1, len(partial) // 4)
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        ("message_delta",
         {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
          "usage": {"output_tokens": output_tokens}})
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


class AnthropicHandler(JsonHandler):
    """Serves the Messages API from `self.server.brain`."""

    def do_POST(self):  # noqa: N802 - http.server's name
        try:
            self.serve_post()
        except Exception as exc:  # noqa: BLE001 - reported to the CLI and kept for the test
            # A 400 is not retried by Claude Code, so a broken script fails fast and visibly.
            problems = getattr(self.server, "problems", None)
            if problems is None:
                problems = self.server.problems = []  # type: ignore[attr-defined]
            problems.append(f"{type(exc).__name__}: {exc}")
            self.send_json(400, error_body(400, f"e2e server: {type(exc).__name__}: {exc}"))

    def serve_post(self) -> None:
        body = self.read_json()
        path = self.path.split("?", 1)[0]
        if path == "/v1/messages/count_tokens":
            self.send_json(200, {"input_tokens": _approx_tokens(body)})
            return
        if path != "/v1/messages":
            self.send_json(404, error_body(404, f"no such endpoint: {self.path}"))
            return
        model = body.get("model") or "claude-e2e"
        if not is_conversation(body):
            self.respond(body, model, [{"type": "text", "text": "ok"}], "end_turn")
            return
        turn = to_turn(body)
        action = self.server.brain(turn)  # type: ignore[attr-defined]
        if isinstance(action, Fail):
            headers = {"request-id": f"req_e2e{next(_ids):06d}"}
            if action.retry_after is not None:
                headers["retry-after"] = str(action.retry_after)
            self.send_json(action.status, error_body(action.status, action.message), headers)
            return
        if isinstance(action, Say):
            self.respond(body, model, [{"type": "text", "text": action.text}], "end_turn")
            return
        if isinstance(action, Write):
            path_arg = action.path
            if not path_arg.startswith("/"):
                workspace = workspace_of(body)
                if workspace is None:
                    raise RuntimeError("the request does not name Claude Code's working directory")
                path_arg = str(Path(workspace) / path_arg)
            block = {"type": "tool_use", "id": f"toolu_e2e{next(_ids):06d}", "name": "Write",
                     "input": {"file_path": path_arg, "content": action.content}}
        elif isinstance(action, Tool):
            block = {"type": "tool_use", "id": f"toolu_e2e{next(_ids):06d}", "name": action.name,
                     "input": action.input}
        elif isinstance(action, Shell):
            block = {"type": "tool_use", "id": f"toolu_e2e{next(_ids):06d}", "name": "Bash",
                     "input": {"command": action.command, "description": "Run a command"}}
        else:
            raise TypeError(f"the brain answered {action!r}, not an Action")
        self.respond(body, model, [block], "tool_use")

    def do_GET(self):  # noqa: N802
        self.server.recorder.add(self.path, dict(self.headers), {})  # type: ignore[attr-defined]
        path = self.path.split("?", 1)[0]
        if path == "/v1/models":
            self.send_json(200, {"data": [{"type": "model", "id": "claude-e2e", "display_name": "e2e",
                                           "created_at": "2025-01-01T00:00:00Z"}],
                                 "has_more": False, "first_id": "claude-e2e", "last_id": "claude-e2e"})
            return
        self.send_json(404, error_body(404, f"no such endpoint: {self.path}"))

    def do_HEAD(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def respond(self, body: dict, model: str, blocks: list[dict], stop_reason: str) -> None:
        events = _events(model, blocks, stop_reason, _approx_tokens(body))
        if body.get("stream"):
            self.send_sse(events)
            return
        # A non-streaming request gets the same message, assembled.
        message = dict(events[0][1]["message"])
        message["content"] = blocks
        message["stop_reason"] = stop_reason
        message["usage"] = dict(message["usage"], output_tokens=events[-2][1]["usage"]["output_tokens"])
        self.send_json(200, message)


def claude_env(url: str) -> dict[str, str]:
    """The environment that points Claude Code at the server at `url`, offline. Claude Code retries
    401, 429 and 5xx answers up to 10 times with exponential backoff (minutes, reported as
    `system/api_retry` events); CLAUDE_CODE_MAX_RETRIES=0 makes an API error fail at once. (A 400
    is not retried that way, but Claude Code re-sends the request in a few variants first.)"""
    return {
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "sk-ant-e2e-not-a-real-key",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_BUG_COMMAND": "1",
    }


def conversation_requests(server) -> list[tuple[str | None, Turn]]:
    """The conversation requests `server` received, in order, each with the Claude Code session
    that sent it (its X-Claude-Code-Session-Id header)."""
    out = []
    for path, headers, body in server.recorder.requests:
        if path.split("?", 1)[0] != "/v1/messages" or not is_conversation(body):
            continue
        session = next((v for k, v in headers.items() if k.lower() == "x-claude-code-session-id"), None)
        out.append((session, to_turn(body)))
    return out


def problems(server) -> list[str]:
    """Errors raised while serving (a brain that crashed, a request the server could not read)."""
    return list(getattr(server.httpd, "problems", []))
