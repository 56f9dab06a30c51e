"""A scripted OpenAI Chat Completions server, as Aider 0.86.2 calls it.

Aider (through litellm) sends `POST /v1/chat/completions`; with `--no-stream` the request has
`"stream": false` and wants one `chat.completion` object with `usage`. It has no tools: the model's
edits are text in Aider's edit format, which Aider parses and applies itself. For an unknown model
(`openai/<name>`) Aider uses the "whole" edit format: the file's path on a line of its own, then the
file's entire new content in a fenced block:

    hello.py
    ```python
    print("hello")
    ```

So the harness's actions map to text: `Write` becomes such a listing, `Say` plain text, `Fail` an
HTTP error in OpenAI's shape, and `Shell` is refused (Aider runs no shell commands the model asks
for when it answers every question with `--yes-always`: those need an explicit yes).

Aider also asks the model, in the background, to summarize the chat history ("*Briefly* summarize
this partial conversation about programming"); those requests never reach the brain and get a
short canned summary. `GET /v1/models` lists the one model.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import Action, Fail, JsonHandler, Say, Shell, Turn, Write  # noqa: E402

MODEL = "scripted"

# The first words of the summarize request's system prompt (aider/prompts.py `summarize`).
SUMMARIZE_MARK = "*Briefly* summarize this partial conversation"

# Aider's own messages around the conversation, each answered by a canned assistant message: the
# one-shot example of its edit format and the "new code base" separator after it, the repo map, the
# files in the chat, and the note it adds after applying (or failing to find) edits. They are not
# the user's words.
SCAFFOLD_USER = (
    "Change the greeting to be more casual",  # whole format's example
    "I switched to a new code base.",
    "Here are summaries of some files present in my git repository.",
    "Don't try and edit any existing code without asking me to add the files to the chat!",
    "I am not sharing any files that you can edit yet.",
    "I am not sharing the full contents of any files with you yet.",
    "I have *added these files to the chat*",
    "Here are some READ ONLY files",
    "I committed the changes with git hash",
    "I updated the files.",
    "I didn't see any properly formatted edits in your reply?!",
    "I edited the files myself.",
)

# Aider appends its edit-format reminder to the newest user message ("reminder: user"); it begins
# with this sentence in the whole format.
REMINDER_MARK = (
    "To suggest changes to a file you MUST return the entire content of the updated file."
)


def text_of(content) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "text":
            parts.append(part.get("text", ""))
    return "".join(parts)


# The language reminder Aider appends to the newest user message in the "ask" chat mode.
LANGUAGE_REMINDER = re.compile(r"\s*Reply in [A-Za-z ]+\.\s*$")


def strip_reminder(text: str) -> str:
    """The user's text without the reminders Aider appended to it."""
    at = text.find(REMINDER_MARK)
    if at >= 0:
        text = text[:at]
    return LANGUAGE_REMINDER.sub("", text).rstrip()


def is_summarize(body: dict) -> bool:
    for message in body.get("messages") or []:
        if message.get("role") in ("system", "user") and SUMMARIZE_MARK in text_of(
            message.get("content")
        ):
            return True
    return False


def conversation(body: dict) -> tuple[str, list[dict]]:
    """The system prompt and the conversation without Aider's scaffolding: the user's task, then
    (on a reflection, e.g. Aider's "fix the lint errors" round) the model's answers and Aider's
    follow-ups."""
    messages = body.get("messages") or []
    system = "\n".join(
        text_of(m.get("content")) for m in messages if m.get("role") == "system"
    )
    rest = [m for m in messages if m.get("role") in ("user", "assistant")]
    # Drop scaffolding pairs wherever they stand: Aider puts the example and the repo map before
    # the conversation and the chat's files after the earlier exchanges, before the newest message.
    kept = []
    i = 0
    while i < len(rest):
        m = rest[i]
        if m.get("role") == "user" and text_of(m.get("content")).lstrip().startswith(SCAFFOLD_USER):
            i += 1
            if i < len(rest) and rest[i].get("role") == "assistant":
                i += 1
            continue
        kept.append(m)
        i += 1
    return system, kept


def turn_of(body: dict) -> Turn:
    system, convo = conversation(body)
    user_texts = [
        strip_reminder(text_of(m.get("content"))) for m in convo if m.get("role") == "user"
    ]
    calls = sum(1 for m in convo if m.get("role") == "assistant")
    return Turn(
        system=system,
        first_user=user_texts[0] if user_texts else "",
        last_user=user_texts[-1] if user_texts else "",
        user_texts=user_texts,
        tool_results=[],
        calls=calls,
        raw=body,
    )


def listing(path: str, content: str) -> str:
    """A file in Aider's "whole" edit format: the path, then the whole content fenced."""
    if any(line.startswith("```") for line in content.splitlines()):
        raise ValueError(
            f"{path}: a line starting with ``` cannot be written in Aider's whole edit format"
        )
    if not content.endswith("\n"):
        content += "\n"
    lang = {".py": "python", ".md": "markdown", ".json": "json", ".rs": "rust"}.get(
        Path(path).suffix, ""
    )
    return f"{path}\n```{lang}\n{content}```\n"


def reply_text(action: Action) -> str:
    if isinstance(action, Write):
        return f"I will write `{action.path}`.\n\n" + listing(action.path, action.content)
    if isinstance(action, Say):
        return action.text
    if isinstance(action, Shell):
        raise ValueError("Aider has no shell tool: a Shell action cannot be scripted for it")
    raise TypeError(f"not a reply: {action!r}")


def completion(text: str, body: dict) -> dict:
    prompt_chars = sum(len(text_of(m.get("content"))) for m in body.get("messages") or [])
    prompt_tokens = max(1, prompt_chars // 4)
    completion_tokens = max(1, len(text) // 4)
    return {
        "id": f"chatcmpl-{time.time_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model") or MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def sse_chunks(text: str, body: dict) -> list[tuple[None, dict]]:
    """The same answer as `chat.completion.chunk` events, for a client that streams anyway."""
    base = {"id": f"chatcmpl-{time.time_ns()}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": body.get("model") or MODEL}
    full = completion(text, body)
    return [
        (None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text},
                                     "finish_reason": None}]}),
        (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": full["usage"]}),
    ]


ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


class OpenAIChatHandler(JsonHandler):
    """Chat Completions for Aider; reads `self.server.brain` and `self.server.recorder`."""

    def do_GET(self):  # noqa: N802 - the base class's name
        self.server.recorder.add(self.path, dict(self.headers), {})  # type: ignore[attr-defined]
        if self.path.rstrip("/").endswith("/models"):
            self.send_json(200, {"object": "list", "data": [
                {"id": MODEL, "object": "model", "created": 0, "owned_by": "e2e"}]})
        else:
            self.send_error_json(404, f"no such endpoint: GET {self.path}")

    def do_POST(self):  # noqa: N802
        body = self.read_json()
        if not self.path.split("?")[0].rstrip("/").endswith("/chat/completions"):
            self.send_error_json(404, f"no such endpoint: POST {self.path}")
            return
        if is_summarize(body):
            self.answer("I asked you to do a task in this repository, and you did it.", body)
            return
        try:
            action = self.server.brain(turn_of(body))  # type: ignore[attr-defined]
            if isinstance(action, Fail):
                headers = {"Retry-After": str(action.retry_after)} if action.retry_after else None
                self.send_error_json(action.status, action.message, headers)
                return
            text = reply_text(action)
        except Exception as err:  # a scenario bug: visible in the CLI's output and to the test
            message = f"scripted server: {type(err).__name__}: {err}"
            adapter_errors(self.server).append(message)
            self.send_error_json(400, message)
            return
        self.answer(text, body)

    def answer(self, text: str, body: dict) -> None:
        if body.get("stream"):
            self.send_sse(sse_chunks(text, body))
            return
        self.send_json(200, completion(text, body))

    def send_error_json(self, status: int, message: str, headers: dict | None = None) -> None:
        self.send_json(status, {"error": {
            "message": message,
            "type": ERROR_TYPES.get(status, "server_error" if status >= 500 else "api_error"),
            "param": None,
            "code": None,
        }}, headers)


def aider_env(server_url: str, model: str = MODEL) -> dict[str, str]:
    """The environment that points Aider at `server_url` (AGENT-CLIS.md), network extras off."""
    return {
        "OPENAI_API_BASE": server_url.rstrip("/") + "/v1",
        "OPENAI_API_KEY": "e2e-key",
        "AIDER_MODEL": f"openai/{model}",
        "AIDER_CHECK_UPDATE": "false",
        "AIDER_ANALYTICS": "false",
        "AIDER_DETECT_URLS": "false",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }


def adapter_errors(server) -> list[str]:
    """What the adapter could not turn into a reply (e.g. a `Shell` action), on a ScriptedServer
    or its HTTP server: a test asserts there are none."""
    httpd = getattr(server, "httpd", server)
    if not hasattr(httpd, "adapter_errors"):
        httpd.adapter_errors = []
    return httpd.adapter_errors


def chat_requests(recorder) -> list[tuple[str, dict, dict]]:
    """The chat completion requests a recorder holds, summarize calls left out."""
    return [r for r in recorder.requests
            if r[0].split("?")[0].endswith("/chat/completions") and not is_summarize(r[2])]


def dump(body: dict) -> str:
    return json.dumps(body, indent=1)[:20000]
