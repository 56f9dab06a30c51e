"""A small driver for headless Chromium over the DevTools protocol, through a pipe
(`--remote-debugging-pipe`: file descriptors 3 and 4, messages ended by a NUL byte), so that it
needs nothing but the browser and Python's standard library.

It records what a page does that a report must never do: console errors, uncaught exceptions,
errors the browser logs (a blocked script, a Content-Security-Policy violation), and any network
request other than the page itself.
"""

import base64
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time


def chromium_path():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, width=1300, height=900):
        self.profile = tempfile.mkdtemp(prefix="helixflow-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def fds():
            # The browser reads commands on fd 3 and writes answers on fd 4.
            a, b = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.process = subprocess.Popen(
            [chromium_path(), "--headless", "--remote-debugging-pipe", "--no-sandbox",
             "--disable-gpu", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking", "--disable-sync",
             "--disable-component-update", "--mute-audio", "--hide-scrollbars",
             f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=fds, close_fds=False)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._next = 0
        self._answers = {}
        self._events = []
        self._lock = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.width, self.height = width, height

    def _read(self):
        buffer = b""
        while True:
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                with self._lock:
                    self._lock.notify_all()
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                with self._lock:
                    if "id" in message:
                        self._answers[message["id"]] = message
                    else:
                        self._events.append(message)
                    self._lock.notify_all()

    def send(self, method, params=None, session=None, timeout=30):
        with self._lock:
            self._next += 1
            ident = self._next
        message = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._lock:
            while ident not in self._answers:
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None:
                    raise RuntimeError(f"no answer to {method}")
                self._lock.wait(left)
            answer = self._answers.pop(ident)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def events(self, session, method=None):
        with self._lock:
            return [e for e in self._events
                    if e.get("sessionId") == session and (method is None or e["method"] == method)]

    def wait_event(self, session, method, count=1, timeout=30):
        deadline = time.monotonic() + timeout
        with self._lock:
            while len([e for e in self._events
                       if e.get("sessionId") == session and e["method"] == method]) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"no {method} within {timeout}s")
                self._lock.wait(left)

    def page(self):
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget",
                            {"targetId": target, "flatten": True})["sessionId"]
        return Page(self, session)

    def close(self):
        try:
            self.send("Browser.close", timeout=5)
        except RuntimeError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
        shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    def __init__(self, browser, session):
        self.browser, self.session = browser, session
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": browser.width, "height": browser.height,
                   "deviceScaleFactor": 1, "mobile": False})
        self.url = None

    def send(self, method, params=None, timeout=30):
        return self.browser.send(method, params, self.session, timeout)

    def open(self, path):
        self.url = "file://" + os.path.abspath(path)
        loads = len(self.browser.events(self.session, "Page.loadEventFired"))
        self.send("Page.navigate", {"url": self.url})
        self.browser.wait_event(self.session, "Page.loadEventFired", loads + 1)

    def loads(self):
        return len(self.browser.events(self.session, "Page.loadEventFired"))

    def wait_for_load(self, count, timeout=30):
        self.browser.wait_event(self.session, "Page.loadEventFired", count, timeout)

    def js(self, expression):
        result = self.send("Runtime.evaluate",
                           {"expression": expression, "returnByValue": True,
                            "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def problems(self):
        """Console errors, uncaught exceptions and browser log errors, as text."""
        found = []
        for event in self.browser.events(self.session):
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append("console: " + " ".join(
                    str(a.get("value", a.get("description"))) for a in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                found.append("exception: " + json.dumps(params.get("exceptionDetails", {}))[:500])
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append("log: " + params["entry"].get("text", ""))
        return found

    def requests(self):
        """Every URL the page requested."""
        return [e["params"]["request"]["url"]
                for e in self.browser.events(self.session, "Network.requestWillBeSent")]

    def key(self, key):
        """Presses and releases a key (`Tab`, or a character)."""
        if key == "Tab":
            params = {"key": key, "code": key, "windowsVirtualKeyCode": 9}
        else:
            params = {"key": key, "code": f"Key{key.upper()}",
                      "windowsVirtualKeyCode": ord(key.upper()), "text": key}
        self.send("Input.dispatchKeyEvent", {"type": "keyDown", **params})
        self.send("Input.dispatchKeyEvent", {"type": "keyUp", **params})

    def screenshot(self, path, full=True):
        params = {"format": "png", "captureBeyondViewport": full}
        if full:
            size = self.js("[document.documentElement.scrollWidth,"
                           " document.documentElement.scrollHeight]")
            params["clip"] = {"x": 0, "y": 0, "width": size[0],
                              "height": min(size[1], 16000), "scale": 1}
        data = self.send("Page.captureScreenshot", params)["data"]
        with open(path, "wb") as out:
            out.write(base64.b64decode(data))

    def pdf(self, path):
        data = self.send("Page.printToPDF", {"printBackground": True}, timeout=60)["data"]
        with open(path, "wb") as out:
            out.write(base64.b64decode(data))
