"""A scripted Gemini API (v1beta) for Gemini CLI.

Gemini CLI (0.61.0) pointed at this server with GOOGLE_GEMINI_BASE_URL and GEMINI_API_KEY (API-key
auth selected in $HOME/.gemini/settings.json, see `write_settings`) calls, per run:

- `POST /v1beta/models/<model>:generateContent` for its model router: a request without tools
  whose `generationConfig.responseJsonSchema` asks for `complexity_reasoning` and
  `complexity_score`; it gets a JSON answer (a low score: the flash model) without asking the
  brain. Any other `generateContent` with a JSON schema (next-speaker or loop checks) gets an
  object filled from the schema; without one, a short text.
- `POST /v1beta/models/<model>:streamGenerateContent?alt=sse`: the conversation. Each request is
  turned into a neutral harness.Turn and the brain says what the model does next:
    Write(path, content) -> a `functionCall` `write_file` {file_path: absolute path, content}
    Shell(command)       -> a `functionCall` `run_shell_command` {command, description}
    Say(text)            -> a text part and finishReason STOP
    Fail(status, msg)    -> that HTTP status with Google's error body
                            {"error": {"code": status, "message": msg, "status": "INVALID_ARGUMENT"…}}
- `POST …:countTokens`: {"totalTokens": an estimate}.

Anything else (a GET, an unknown method) is a 404 in Google's error shape, and recorded.

What the CLI sends, as observed: `contents` alternate `user` and `model`; the first user content
starts with a `<session_context>` text part (date, OS, workspace folders) before the prompt's own
text; tool results come back as a user content of `functionResponse` parts
{name, id, response: {output: …}} or {…, response: {error: …}} for a failed or refused call.
The tools offered depend on the approval mode: `auto_edit` offers write_file and replace but no
run_shell_command, `default` neither (read-only tools only), `yolo` all of them.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import Fail, JsonHandler, Say, Shell, ToolResult, Turn, Write  # noqa: E402

STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}

MODEL_VERSION = "gemini-e2e"

_ids = itertools.count(1)


def error_body(status: int, message: str) -> dict:
    """Google's error shape."""
    return {"error": {"code": status, "message": message, "status": STATUS_NAMES.get(status, "UNKNOWN")}}


def settings(extra: dict | None = None) -> dict:
    """$HOME/.gemini/settings.json for an offline run: API-key auth; telemetry, usage statistics
    and update checks off."""
    value = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
    }
    for key, sub in (extra or {}).items():
        if isinstance(sub, dict) and isinstance(value.get(key), dict):
            value[key] = {**value[key], **sub}
        else:
            value[key] = sub
    return value


def write_settings(home: Path, extra: dict | None = None) -> Path:
    path = home / ".gemini" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings(extra), indent=2))
    return path


def env_for(server_url: str) -> dict[str, str]:
    """The variables that point Gemini CLI at `server_url`."""
    return {
        "GOOGLE_GEMINI_BASE_URL": server_url,
        "GEMINI_API_KEY": "e2e-key",
    }


def configure(world, server) -> None:
    """Points Gemini CLI in `world` (a harness.World) at `server` (a harness.ScriptedServer)."""
    world.env.update(env_for(server.url))
    write_settings(world.home)


# --- requests -> Turn ----------------------------------------------------------------------------


def method_of(path: str) -> tuple[str, str]:
    """(model, method) of `/v1beta/models/<model>:<method>?…`."""
    route = urlsplit(path).path
    match = re.search(r"/models/([^/:]+):([A-Za-z]+)$", route)
    if not match:
        return "", ""
    return match.group(1), match.group(2)


def _is_context(text: str) -> bool:
    return text.lstrip().startswith("<session_context>")


def _user_text(content: dict) -> str:
    """The user's own text in a content: text parts other than the CLI's <session_context>."""
    parts = []
    for part in content.get("parts") or []:
        if isinstance(part, dict) and isinstance(part.get("text"), str) and not _is_context(part["text"]):
            parts.append(part["text"])
    return "".join(parts)


def system_text(body: dict) -> str:
    system = body.get("systemInstruction") or {}
    if isinstance(system, str):
        return system
    return "\n".join(p.get("text", "") for p in system.get("parts") or [] if isinstance(p, dict))


def workspace_of(body: dict) -> str | None:
    """The folder Gemini CLI runs in, as its <session_context> lists it."""
    for content in body.get("contents") or []:
        for part in content.get("parts") or []:
            text = part.get("text") if isinstance(part, dict) else None
            if isinstance(text, str) and _is_context(text):
                match = re.search(r"Workspace Directories:\*\*\s*\n\s*- (/[^\n]*)", text)
                if match:
                    return match.group(1).strip()
    return None


def _tool_result(response: dict) -> ToolResult:
    """A functionResponse's `response`: {output: …} or {error: …}."""
    if not isinstance(response, dict):
        return ToolResult(json.dumps(response), False)
    if "error" in response:
        error = response["error"]
        return ToolResult(error if isinstance(error, str) else json.dumps(error), True)
    output = response.get("output", response)
    return ToolResult(output if isinstance(output, str) else json.dumps(output), False)


def to_turn(body: dict) -> Turn:
    """The neutral view of one streamGenerateContent request."""
    contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
    user_texts = []
    for content in contents:
        if content.get("role", "user") == "user":
            text = _user_text(content)
            if text.strip():
                user_texts.append(text)
    tool_results: list[ToolResult] = []
    if contents and contents[-1].get("role", "user") == "user":
        for part in contents[-1].get("parts") or []:
            if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
                tool_results.append(_tool_result(part["functionResponse"].get("response")))
    calls = sum(
        1
        for c in contents
        if c.get("role") == "model"
        and any(isinstance(p, dict) and "functionCall" in p for p in c.get("parts") or [])
    )
    return Turn(
        system=system_text(body),
        first_user=user_texts[0] if user_texts else "",
        last_user=user_texts[-1] if user_texts else "",
        user_texts=user_texts,
        tool_results=tool_results,
        calls=calls,
        raw=body,
    )


def tool_names(body: dict) -> list[str]:
    """The function declarations a request offered."""
    return [
        f.get("name", "")
        for tool in body.get("tools") or []
        for f in tool.get("functionDeclarations") or []
    ]


def conversation(server) -> list[tuple[str, dict]]:
    """The (path, body) of every conversation request `server` received, in order."""
    return [
        (path, body)
        for path, _headers, body in server.recorder.requests
        if method_of(path)[1] == "streamGenerateContent"
    ]


def turns(server) -> list[Turn]:
    """The conversation requests `server` (a harness.ScriptedServer) received, as Turns."""
    return [to_turn(body) for _path, body in conversation(server)]


# --- answers -------------------------------------------------------------------------------------


def _tokens(body: dict) -> int:
    return max(1, len(json.dumps(body.get("contents", []))) // 4)


def _usage(body: dict, output: int) -> dict:
    prompt = _tokens(body)
    return {"promptTokenCount": prompt, "candidatesTokenCount": output, "totalTokenCount": prompt + output}


def _candidate(parts: list[dict], body: dict) -> dict:
    output = max(1, len(json.dumps(parts)) // 4)
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": _usage(body, output),
        "modelVersion": MODEL_VERSION,
        "responseId": f"e2e-{next(_ids):06d}",
    }


def _from_schema(schema: dict):
    """A value that satisfies a (simple) JSON schema."""
    kind = str(schema.get("type", "object")).lower()
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if kind == "object":
        return {k: _from_schema(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return "ok"


def side_answer(body: dict) -> dict:
    """A `generateContent` the CLI makes for itself: the model router, or another check."""
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    if isinstance(schema, dict):
        value = _from_schema(schema)
        if isinstance(value, dict) and "complexity_score" in value:
            value["complexity_reasoning"] = "A scripted task: simple."
            value["complexity_score"] = 10
        text = json.dumps(value)
    else:
        text = "OK"
    return _candidate([{"text": text}], body)


def answer_parts(action, body: dict) -> list[dict]:
    """The model's parts for a brain's action (not Fail)."""
    if isinstance(action, Say):
        return [{"text": action.text}]
    if isinstance(action, Write):
        path = action.path
        workspace = workspace_of(body)
        if workspace and not path.startswith("/"):
            path = f"{workspace.rstrip('/')}/{path}"
        return [{"functionCall": {"name": "write_file", "args": {"file_path": path, "content": action.content}}}]
    if isinstance(action, Shell):
        return [
            {
                "functionCall": {
                    "name": "run_shell_command",
                    "args": {"command": action.command, "description": "scripted command"},
                }
            }
        ]
    raise TypeError(f"not an action: {action!r}")


class GeminiHandler(JsonHandler):
    """The Gemini API as Gemini CLI calls it. Reads `self.server.brain` and `.recorder`."""

    def send_error_body(self, status: int, message: str, retry_after: int | None = None) -> None:
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
        self.send_json(status, error_body(status, message), headers)

    def do_GET(self):  # noqa: N802 - the base class's name
        self.server.recorder.add(self.path, dict(self.headers), {})  # type: ignore[attr-defined]
        self.send_error_body(404, f"GET {urlsplit(self.path).path} is not scripted")

    def do_POST(self):  # noqa: N802 - the base class's name
        body = self.read_json()
        model, method = method_of(self.path)
        if method == "countTokens":
            self.send_json(200, {"totalTokens": _tokens(body)})
        elif method == "generateContent":
            self.send_json(200, side_answer(body))
        elif method == "streamGenerateContent":
            self.converse(body)
        else:
            self.send_error_body(404, f"{model}:{method} is not scripted")

    def converse(self, body: dict) -> None:
        turn = to_turn(body)
        try:
            action = self.server.brain(turn)  # type: ignore[attr-defined]
        except Exception as e:  # a brain's bug: visible to the CLI and the scenario
            self.send_error_body(500, f"the scripted brain failed: {e!r}")
            raise
        if isinstance(action, Fail):
            self.send_error_body(action.status, action.message, action.retry_after)
            return
        chunk = _candidate(answer_parts(action, body), body)
        if "alt=sse" in self.path:
            payload = f"data: {json.dumps(chunk)}\r\n\r\n".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        else:  # streamGenerateContent without SSE is a JSON array of chunks
            self.send_json(200, [chunk])  # type: ignore[arg-type]
