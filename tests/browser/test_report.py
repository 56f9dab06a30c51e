"""The HTML report in a real browser: reports of real runs (helixflow on the fixtures of
tests/fixtures/report/ and on examples/quickstart) loaded from file:// in headless Chromium, with
assertions on the DOM as rendered, no console error and no network request; screenshots and a
PDF of each are kept in HELIXFLOW_BROWSER_ARTIFACTS (default target/browser-artifacts).

    tests/browser/run                       every scenario
    tests/browser/run test_report.ReportTests.test_live_report_refreshes_where_the_reader_was
"""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

from cdp import Browser

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "report"
BIN = os.environ.get("HELIXFLOW_BIN", str(ROOT / "target" / "debug" / "helixflow"))
ARTIFACTS = Path(os.environ.get("HELIXFLOW_BROWSER_ARTIFACTS", ROOT / "target" / "browser-artifacts"))

# What the page shows of its phases, bars, totals and texts, read from the rendered DOM.
READ_PAGE = """(() => {
  const text = (el) => el ? el.textContent.replace(/\\s+/g, ' ').trim() : null;
  const phases = [...document.querySelectorAll('section.phase')].map((s) => ({
    id: s.id,
    name: text(s.querySelector('.pname')),
    status: text(s.querySelector('h3 .badge')),
    attempts: [...s.querySelectorAll('details.attempt')].map((d) => ({
      id: d.id,
      status: text(d.querySelector('summary .badge')),
      summary: text(d.querySelector('summary')),
      feedback: text(d.querySelector('pre.feedback')),
      gates: [...d.querySelectorAll('table.gates tbody tr')].map((r) => text(r)),
      verdict: text(d.querySelector('.verdict')),
      changes: [...d.querySelectorAll('ul.changes li code')].map((c) => c.textContent),
    })),
    files: [...s.querySelectorAll('details.file')].map((f) => ({
      path: f.querySelector('summary code').textContent,
      diff: text(f.querySelector('pre.diff')),
    })),
    reason: text(s.querySelector('.reason')),
  }));
  const lanes = [...document.querySelectorAll('.gantt .lane')].map((l) => ({
    name: l.querySelector('.lane-title').textContent,
    bars: [...l.querySelectorAll('.bar')].map((b) => b.getAttribute('aria-label')),
    waits: l.querySelectorAll('.wait').length,
    segments: [...l.querySelectorAll('.seg')].map((s) => s.className.replace('seg ', '')),
    left: [...l.querySelectorAll('.bar')].map((b) => b.getBoundingClientRect().left),
    right: [...l.querySelectorAll('.bar')].map((b) => b.getBoundingClientRect().right),
  }));
  const totals = Object.fromEntries([...document.querySelectorAll('.totals div')].map(
    (d) => [text(d.querySelector('dt')), text(d.querySelector('dd'))]));
  const nodes = [...document.querySelectorAll('svg.dag .node')].map(
    (n) => ({label: n.getAttribute('aria-label'), cls: n.getAttribute('class')}));
  return {
    title: document.title,
    live: document.documentElement.getAttribute('data-live'),
    status: text(document.querySelector('h1 .badge')),
    phases, lanes, totals, nodes,
    edges: document.querySelectorAll('svg.dag .edges path').length,
    scripts: document.scripts.length,
    injected: document.querySelectorAll('main script, main img, main b, main div div script').length,
    body: document.body.innerText,
  };
})()"""


def helixflow(args, cwd, check=True, **kwargs):
    result = subprocess.run([BIN, *args], cwd=cwd, capture_output=True, text=True,
                            env={**os.environ, "NO_COLOR": "1"}, **kwargs)
    if check and result.returncode not in (0, 1):
        raise AssertionError(f"helixflow {args}: {result.returncode}\n{result.stderr}")
    return result


WORKSPACES = []


def workspace(source):
    """A fresh copy of a fixture or example folder, without its state folder (removed at the
    end, unless HELIXFLOW_BROWSER_KEEP is set)."""
    target = Path(tempfile.mkdtemp(prefix="helixflow-report-")) / Path(source).name
    WORKSPACES.append(target.parent)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".helixflow", "out"))
    return target


def report(ws):
    return ws / ".helixflow" / "runs" / "latest" / "report.html"


class ReportTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        cls.browser = Browser()

    @classmethod
    def tearDownClass(cls):
        cls.browser.close()
        if not os.environ.get("HELIXFLOW_BROWSER_KEEP"):
            for folder in WORKSPACES:
                shutil.rmtree(folder, ignore_errors=True)

    def load(self, path, name):
        """Opens a report, checks that it behaved, keeps its screenshot and PDF, returns its DOM."""
        page = self.browser.page()
        page.open(path)
        dom = page.js(READ_PAGE)
        page.screenshot(ARTIFACTS / f"{name}.png")
        page.pdf(ARTIFACTS / f"{name}.pdf")
        self.assertEqual(page.problems(), [], "the page logged errors")
        self.assertEqual([u for u in page.requests() if u != page.url], [],
                         "the page made network requests")
        self.assertEqual(dom["scripts"], 1, "the report's own script only")
        self.assertEqual(dom["injected"], 0, "markup from the run became elements")
        (ARTIFACTS / f"{name}.json").write_text(json.dumps(dom, indent=1))
        self.last_page = (page, dom)
        return page, dom

    def phase(self, dom, name):
        return next(p for p in dom["phases"] if p["name"] == name)

    def lane(self, dom, name):
        return next(l for l in dom["lanes"] if l["name"] == name)

    def test_a_passed_run(self):
        ws = workspace(ROOT / "examples" / "quickstart")
        self.assertEqual(helixflow(["run", "--no-progress"], ws).returncode, 0)
        _, dom = self.load(report(ws), "passed")
        self.assertEqual(dom["status"], "✓ passed")
        self.assertIsNone(dom["live"])
        self.assertEqual([p["name"] for p in dom["phases"]], ["plan", "code", "docs", "tests"])
        self.assertTrue(all(p["status"] == "✓ passed" for p in dom["phases"]))
        self.assertEqual(len(dom["nodes"]), 4)
        self.assertEqual(dom["edges"], 3)
        # code's first attempt failed its syntax gate, and its feedback went to attempt 2.
        code = self.phase(dom, "code")
        self.assertEqual([a["status"] for a in code["attempts"]], ["✗ failed (work)", "✓ passed"])
        self.assertIn("expected `:` at the end of the `def` line", code["attempts"][0]["feedback"])
        self.assertTrue(any("syntax" in g and "failed" in g for g in code["attempts"][0]["gates"]))
        self.assertEqual(len(self.lane(dom, "code")["bars"]), 2)
        # code and docs ran at once: their first bars overlap (each starts before the other
        # ends; how far apart they start depends on the machine's load).
        code_lane, docs_lane = self.lane(dom, "code"), self.lane(dom, "docs")
        self.assertLess(code_lane["left"][0], docs_lane["right"][0])
        self.assertLess(docs_lane["left"][0], code_lane["right"][0])
        # The keyboard: Tab reaches the skip link first, j and k move from phase to phase, o
        # opens or closes every attempt.
        page, _ = self.last_page
        page.key("Tab")
        self.assertEqual(page.js("document.activeElement.className"), "skip")
        page.key("j")
        page.key("j")
        self.assertEqual(page.js("document.activeElement.id"), "p1")
        page.key("k")
        self.assertEqual(page.js("document.activeElement.id"), "p0")
        states = "[...document.querySelectorAll('details.attempt')].map(d => d.open)"
        page.key("o")
        self.assertEqual(set(page.js(states)), {False}, "all were open: o closes them")
        page.key("o")
        self.assertEqual(set(page.js(states)), {True})
        self.assertRegex(dom["totals"]["Cost"], r"^\$0\.0\d+$")
        self.assertEqual(dom["totals"]["Attempts"], "5")
        self.assertEqual(dom["totals"]["Retries spent"], "1 of the retry-budget of 3")

    def test_a_failed_run_with_retries_a_rejection_and_hostile_output(self):
        ws = workspace(FIXTURES / "showcase")
        self.assertEqual(helixflow(["run", "--no-progress"], ws).returncode, 1)
        page, dom = self.load(report(ws), "showcase")
        page.screenshot(ROOT / "target" / "report-showcase.png", full=False)
        self.assertEqual(dom["status"], "✗ failed")
        statuses = {p["name"]: p["status"] for p in dom["phases"]}
        self.assertEqual(statuses, {
            "plan": "✓ passed", "lexer": "✓ passed", "parser": "✓ passed", "docs": "✓ passed",
            "bench": "✓ passed", "migrate": "✗ failed", "cleanup": "↷ skipped",
            "release": "✓ passed"})
        # parser: two failed attempts with backoffs between them, the tests gate's output as text.
        parser = self.phase(dom, "parser")
        self.assertEqual(len(parser["attempts"]), 3)
        self.assertEqual(self.lane(dom, "parser")["waits"], 2)
        feedback = parser["attempts"][0]["feedback"]
        self.assertIn("</div><script>alert('gate')</script>", feedback)
        self.assertIn("</div><script>alert('gate')</script>",
                      " ".join(parser["attempts"][0]["gates"]))
        # docs: the verifier rejected the first attempt; its errors are the next one's feedback.
        docs = self.phase(dom, "docs")
        self.assertIn("rejected the work", docs["attempts"][0]["verdict"])
        self.assertIn("</div><script>alert('x')</script>", docs["attempts"][0]["verdict"])
        self.assertIn("approved the work", docs["attempts"][1]["verdict"])
        self.assertIn("</div><script>alert('x')</script>", docs["attempts"][0]["feedback"])
        self.assertIn("k-review", self.lane(dom, "docs")["segments"])
        # docs modified the plan that the phase "plan" created: a real diff, from the bundles.
        plan_diff = next(f for f in docs["files"] if f["path"] == "docs/plan.md")["diff"]
        self.assertIn("-2. Parser.", plan_diff)
        self.assertIn("+2. Parser, with precedence climbing.", plan_diff)
        # migrate failed for good; its stderr (markup) in the feedback; cleanup skipped for it.
        migrate = self.phase(dom, "migrate")
        self.assertIn("<b>no such file</b>", migrate["attempts"][0]["feedback"])
        self.assertIn('dependency "migrate" failed', self.phase(dom, "cleanup")["reason"])
        # release: a file name that is markup, and a cost that is unknown.
        release = self.phase(dom, "release")
        self.assertIn("release/x</div><script>alert(1)</script>.md",
                      release["attempts"][0]["changes"])
        self.assertIn("cost unknown", release["attempts"][0]["summary"])
        self.assertIn("the unknown cost of 1 attempt", dom["totals"]["Cost"])
        self.assertEqual(dom["totals"]["Retries spent"], "5 of the retry-budget of 8")
        self.assertIn("12", dom["totals"]["Attempts"])
        # Readable without colour: every phase's status is a word in the DAG and the lanes.
        self.assertTrue(all(("passed" in n["label"] or "failed" in n["label"]
                             or "skipped" in n["label"]) for n in dom["nodes"]))

    def test_an_up_to_date_phase(self):
        ws = workspace(ROOT / "examples" / "quickstart")
        self.assertEqual(helixflow(["run", "--no-progress"], ws).returncode, 0)
        self.assertEqual(helixflow(["run", "--no-progress", "--force=docs"], ws).returncode, 0)
        _, dom = self.load(report(ws), "up-to-date")
        statuses = {p["name"]: p["status"] for p in dom["phases"]}
        self.assertEqual(statuses["plan"], "≡ up to date")
        self.assertEqual(statuses["docs"], "✓ passed")
        self.assertIn("nothing it depends on changed since", self.phase(dom, "plan")["reason"])
        node = next(n for n in dom["nodes"] if n["label"].startswith("plan:"))
        self.assertIn("s-uptodate", node["cls"])
        self.assertEqual(self.lane(dom, "plan")["bars"], [])

    def test_a_run_interrupted_mid_way(self):
        ws = workspace(FIXTURES / "interrupted")
        child = subprocess.Popen([BIN, "run", "--no-progress"], cwd=ws,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        journal = ws / ".helixflow" / "runs" / "latest" / "events.jsonl"
        deadline = time.monotonic() + 60
        while not (journal.exists() and '"phase":"slow","attempt":1' in journal.read_text()):
            self.assertLess(time.monotonic(), deadline, "slow never started")
            time.sleep(0.1)
        child.send_signal(signal.SIGINT)
        self.assertEqual(child.wait(timeout=60), 130)
        _, dom = self.load(report(ws), "interrupted")
        self.assertEqual(dom["status"], "■ cancelled")
        statuses = {p["name"]: p["status"] for p in dom["phases"]}
        self.assertEqual(statuses["first"], "✓ passed")
        self.assertEqual(statuses["slow"], "■ cancelled")
        self.assertIn(statuses["last"], ("↷ skipped", "○ not started"))

    @contextlib.contextmanager
    def live_run(self):
        """A run of the `live` fixture under way, its report once "long" (the second phase) has
        its first attempt under way, and a small browser page not yet opened; the run is killed
        should the test end before it."""
        ws = workspace(FIXTURES / "live")
        child = subprocess.Popen([BIN, "run", "--no-progress"], cwd=ws,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            path = report(ws)
            deadline = time.monotonic() + 60
            while not (path.exists() and 'data-live' in path.read_text()
                       and 'id="p1-a1"' in path.read_text()):
                self.assertLess(time.monotonic(), deadline, "no live report")
                time.sleep(0.1)
            small = Browser(width=900, height=300)
            try:
                yield child, path, small.page()
            finally:
                small.close()
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()

    def test_live_report_refreshes_where_the_reader_was(self):
        with self.live_run() as (child, path, page):
            page.open(path)
            self.assertEqual(page.js("document.documentElement.dataset.live"), "3")
            self.assertIn("running", page.js("document.body.innerText"))
            # Right after the page reloaded itself, so that the reader's moves come well
            # before the next reload however slow the machine.
            page.wait_for_load(page.loads() + 1, timeout=10)
            page.js("window.scrollTo(0, 400); document.getElementById('p0-a1').open = false")
            loads = page.loads()
            page.wait_for_load(loads + 1, timeout=10)
            time.sleep(0.3)
            self.assertEqual(page.js("Math.round(window.scrollY)"), 400)
            self.assertFalse(page.js("document.getElementById('p0-a1').open"))
            page.screenshot(ARTIFACTS / "live.png", full=False)
            self.assertEqual(child.wait(timeout=60), 0)
            # The last page the run wrote no longer refreshes.
            page.wait_for_load(page.loads() + 1, timeout=10)
            self.assertIsNone(page.js("document.documentElement.dataset.live || null"))
            self.assertEqual(page.js("document.querySelector('h1 .badge').textContent"),
                             "✓ passed")
            self.assertEqual(page.problems(), [])
            self.assertEqual([u for u in page.requests() if u != page.url], [])

    def test_what_the_reader_does_as_the_live_page_goes_is_kept(self):
        # The page saves where the reader was, then asks for the reload, and stays up a moment:
        # an attempt the reader closes in that moment (simulated: right after the page's save)
        # is closed on the reloaded page too.
        with self.live_run() as (child, path, page):
            page.send("Page.addScriptToEvaluateOnNewDocument", {"source": """
                (function () {
                  var set = Storage.prototype.setItem;
                  Storage.prototype.setItem = function (key, value) {
                    set.call(this, key, value);
                    if (window.__closeAfterSave && String(key).indexOf("helixflow-report:") === 0) {
                      window.__closeAfterSave = false;
                      document.getElementById("p0-a1").open = false;
                    }
                  };
                })();"""})
            page.open(path)
            page.wait_for_load(page.loads() + 1, timeout=10)
            self.assertTrue(page.js("document.getElementById('p0-a1').open"))
            page.js("window.__closeAfterSave = true")
            page.wait_for_load(page.loads() + 1, timeout=10)
            time.sleep(0.3)
            self.assertFalse(page.js("document.getElementById('p0-a1').open"))
            self.assertEqual(child.wait(timeout=60), 0)
            self.assertEqual(page.problems(), [])

    def test_the_report_command_writes_the_same_page_anywhere(self):
        ws = workspace(FIXTURES / "showcase")
        helixflow(["run", "--no-progress", "--no-report"], ws)
        self.assertFalse(report(ws).exists())
        out = ws.parent / "elsewhere" / "report.html"
        out.parent.mkdir()
        written = helixflow(["report", "latest", "-o", str(out)], ws)
        self.assertEqual(written.returncode, 0, written.stderr)
        page, dom = self.load(out, "report-command")
        self.assertEqual(len(dom["phases"]), 8)
        # Links to the run folder's files still lead to them.
        href = page.js("document.querySelector('.logs a').href")
        self.assertTrue(href.startswith("file://"), href)
        self.assertTrue(Path(href[len("file://"):].replace("%20", " ")).is_file(), href)


    @unittest.skipUnless(shutil.which("firefox"), "Firefox is not installed")
    def test_firefox_draws_the_report_too(self):
        # A smoke test where Firefox is at hand (CI has Chromium only): it renders the page.
        ws = workspace(FIXTURES / "showcase")
        helixflow(["run", "--no-progress"], ws)
        shot = ARTIFACTS / "showcase-firefox.png"
        shot.unlink(missing_ok=True)
        profile = tempfile.mkdtemp(prefix="helixflow-firefox-")
        try:
            subprocess.run(["firefox", "--headless", "--profile", profile,
                            "--window-size=1300,1000", "--screenshot", str(shot),
                            "file://" + str(report(ws))],
                           capture_output=True, timeout=120, check=True)
        finally:
            shutil.rmtree(profile, ignore_errors=True)
        # A blank page compresses to a few kilobytes; the report's drawing does not.
        self.assertGreater(shot.stat().st_size, 50_000)


if __name__ == "__main__":
    unittest.main()
