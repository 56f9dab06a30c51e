//! `helixflow lsp` spoken to as an editor would: JSON-RPC with Content-Length framing over the
//! real binary's standard input and output.

use crate::common::lsp_wire;

use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long any one answer may take before the test fails (a debug build on two busy cores).
const PATIENCE: Duration = Duration::from_secs(30);

const AGENTS: &str = r#"agent "claude" {
    command "claude" "-p" "{{ prompt_file }}"
}

agent "reviewer" {
    command "claude" "-p" "{{ prompt_file }}"
    response "claude-stream-json"
}
"#;

/// A pipeline with one error (`retires`) on a line that has non-ASCII text before it, after
/// another non-ASCII line.
const PIPELINE: &str = r#"pipeline "größe-😀" {
    description "Prüft die Ausgabe: ünïcödé 😀"
}

import "lib/agents.kdl"

defaults {
    agent "claude"
}

template "python-module" {
    param "module"
    param "tests" default="tests"
    prompt "Implement {{ module }} with tests under {{ tests }}"
    outputs { file "src/{{ module }}.py"; }
}

phase "parser" {
    description "Write the ADR parser"
    prompt "Write the parser"
    outputs { file "src/parser.py"; }
    gates {
        syntax
        command "pytest -q" name="tests"
    }
}

phase "docs" {
    depends-on "parser"
    prompt "Document it"
    verify "sub-agent"
    verifier "reviewer"
    description "ü😀"; retires 1
}

phase "lexer" use="python-module" module="adr/lexer" {
    depends-on "parser"
}
"#;

/// A running `helixflow lsp` and the files it works on.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    incoming: Receiver<Value>,
    /// Messages read while waiting for something else.
    backlog: Vec<Value>,
    next_id: i64,
    root: PathBuf,
    /// Removed when the client is dropped.
    _dir: tempfile::TempDir,
}

impl Client {
    /// Starts the server in a new temporary folder and initializes the session.
    fn start() -> Self {
        Self::start_with(json!({}))
    }

    /// Like `start`, for a client with these capabilities.
    fn start_with(capabilities: Value) -> Self {
        Self::start_in(capabilities, tempfile::tempdir().unwrap(), &[])
    }

    /// Like `start_with`, in `dir`, with these environment variables.
    fn start_in(capabilities: Value, dir: tempfile::TempDir, env: &[(&str, &str)]) -> Self {
        let root = dir.path().canonicalize().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_helixflow"))
            .args(["lsp", "--stdio"])
            .current_dir(&root)
            .env_remove("HELIXFLOW_PATH")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start helixflow lsp");
        let stdout = child.stdout.take().unwrap();
        let (sender, incoming) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            while let Some(message) = lsp_wire::read_message(&mut reader) {
                if sender.send(message).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut client = Self {
            child,
            stdin,
            incoming,
            backlog: Vec::new(),
            next_id: 0,
            root,
            _dir: dir,
        };
        let result = client.request(
            "initialize",
            json!({
                "processId": null,
                "rootUri": client.uri("."),
                "capabilities": capabilities,
            }),
        );
        assert_eq!(result["capabilities"]["positionEncoding"], "utf-16");
        assert_eq!(result["serverInfo"]["name"], "helixflow");
        client.notify("initialized", json!({}));
        client
    }

    /// Writes a file under the temporary folder.
    fn file(&self, path: &str, text: &str) -> &Self {
        let full = self.root.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
        self
    }

    /// The `file:` URI of a path under the temporary folder.
    fn uri(&self, path: &str) -> String {
        let full = if path == "." {
            self.root.clone()
        } else {
            self.root.join(path)
        };
        format!("file://{}", full.display())
    }

    fn send(&mut self, message: &Value) {
        let body = serde_json::to_string(message).unwrap();
        let stdin = self.stdin.as_mut().expect("stdin is open");
        write!(stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        stdin.flush().unwrap();
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and returns its id without waiting.
    fn send_request(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Sends a request and waits for its result; an error response fails the test.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        let response = self.response(id);
        assert!(
            response.get("error").is_none(),
            "{method} failed: {response}"
        );
        response["result"].clone()
    }

    /// Waits for the response to request `id`.
    fn response(&mut self, id: i64) -> Value {
        self.wait(&format!("the response to request {id}"), |m| {
            m.get("id") == Some(&json!(id)) && m.get("method").is_none()
        })
    }

    /// The next message (from the backlog first) that `wanted` accepts.
    fn wait(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.backlog.iter().position(&wanted) {
            return self.backlog.remove(i);
        }
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.incoming.recv_timeout(left) {
                Ok(message) if wanted(&message) => return message,
                Ok(message) => self.backlog.push(message),
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no {what} within {PATIENCE:?}; got {:#?}", self.backlog)
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("the server exited while waiting for {what}")
                }
            }
        }
    }

    /// The next diagnostics published for `uri` that `wanted` accepts.
    fn diagnostics_where(&mut self, uri: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        let message = self.wait(&format!("diagnostics for {uri}"), |m| {
            m["method"] == "textDocument/publishDiagnostics"
                && m["params"]["uri"] == uri
                && wanted(&m["params"])
        });
        message["params"].clone()
    }

    /// The next diagnostics published for `uri`.
    fn diagnostics(&mut self, uri: &str) -> Vec<Value> {
        let params = self.diagnostics_where(uri, |_| true);
        params["diagnostics"].as_array().unwrap().clone()
    }

    /// Opens a document with `text` (the file need not exist).
    fn open(&mut self, path: &str, text: &str) -> String {
        let uri = self.uri(path);
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "kdl", "version": 1, "text": text}}),
        );
        uri
    }

    /// Writes the usual project (pipeline and agent library) and opens the pipeline.
    fn open_project(&mut self) -> String {
        self.file("lib/agents.kdl", AGENTS);
        self.file("pipeline.kdl", PIPELINE);
        self.open("pipeline.kdl", PIPELINE)
    }

    fn hover(&mut self, uri: &str, position: Value) -> Value {
        self.request(
            "textDocument/hover",
            json!({"textDocument": {"uri": uri}, "position": position}),
        )
    }

    /// `shutdown`, `exit`, and the server's exit status.
    fn shut_down(mut self) -> ExitStatus {
        let result = self.request("shutdown", Value::Null);
        assert_eq!(result, Value::Null);
        self.notify("exit", Value::Null);
        self.exit_status()
    }

    fn exit_status(&mut self) -> ExitStatus {
        drop(self.stdin.take());
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `value` as pretty JSON with the temporary folder's URI replaced, for snapshots.
    fn redact(&self, value: &Value) -> String {
        serde_json::to_string_pretty(value)
            .unwrap()
            .replace(&self.uri("."), "file:///TMP")
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The protocol position (line, UTF-16 column) of the `nth` occurrence of `needle` in `text`,
/// plus `delta` bytes.
fn position_of(text: &str, needle: &str, nth: usize, delta: usize) -> Value {
    let offset = text
        .match_indices(needle)
        .nth(nth)
        .unwrap_or_else(|| panic!("{needle:?} #{nth} not in the text"))
        .0
        + delta;
    let before = &text[..offset];
    let line = before.matches('\n').count();
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let character = text[line_start..offset].encode_utf16().count();
    json!({"line": line, "character": character})
}

/// The byte offset of a protocol position in `text` (lines end at `\n` here).
fn offset_of(text: &str, position: &Value) -> usize {
    let line = position["line"].as_u64().unwrap() as usize;
    let character = position["character"].as_u64().unwrap() as usize;
    let line_start: usize = text.split_inclusive('\n').take(line).map(str::len).sum();
    let mut units = 0;
    for (i, c) in text[line_start..].char_indices() {
        if units >= character || c == '\n' {
            return line_start + i;
        }
        units += c.len_utf16();
    }
    text.len()
}

/// `text` with protocol edits applied (they do not overlap; the last is applied first).
fn apply_edits(text: &str, edits: &[Value]) -> String {
    let mut spans: Vec<(usize, usize, String)> = edits
        .iter()
        .map(|e| {
            (
                offset_of(text, &e["range"]["start"]),
                offset_of(text, &e["range"]["end"]),
                e["newText"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    spans.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut out = text.to_owned();
    for (start, end, new) in spans {
        out.replace_range(start..end, &new);
    }
    out
}

fn codes(diagnostics: &[Value]) -> Vec<String> {
    diagnostics
        .iter()
        .map(|d| d["code"].as_str().unwrap().to_owned())
        .collect()
}

/// `helixflow lint --format json` on a file of the client's folder.
fn lint_json(root: &Path, file: &str) -> Vec<Value> {
    let output = Command::new(env!("CARGO_BIN_EXE_helixflow"))
        .args(["lint", "--format", "json", file])
        .current_dir(root)
        .env_remove("HELIXFLOW_PATH")
        .output()
        .unwrap();
    serde_json::from_slice::<Vec<Value>>(&output.stdout).unwrap()
}

#[test]
fn publishes_the_lint_diagnostics_with_utf16_ranges() {
    let mut client = Client::start();
    let uri = client.open_project();
    let diagnostics = client.diagnostics(&uri);
    assert_eq!(codes(&diagnostics), ["HF101"]);
    let d = &diagnostics[0];
    // `    description "ü😀"; ` is 23 UTF-16 units (26 bytes, 22 characters).
    assert_eq!(
        d["range"],
        json!({"start": {"line": 32, "character": 23}, "end": {"line": 32, "character": 30}})
    );
    assert_eq!(d["severity"], 1);
    assert_eq!(d["source"], "helixflow");

    // The same findings, in the same words, as `helixflow lint`.
    let lint = lint_json(&client.root, "pipeline.kdl");
    assert_eq!(lint.len(), diagnostics.len());
    for (published, linted) in diagnostics.iter().zip(&lint) {
        assert_eq!(published["code"], linted["code"]);
        let text = format!(
            "{}\nhelp: {}",
            linted["message"].as_str().unwrap(),
            linted["help"].as_str().unwrap()
        );
        assert_eq!(published["message"], text);
        assert_eq!(
            published["range"]["start"]["line"],
            linted["line"].as_u64().unwrap() - 1
        );
    }
    assert!(client.shut_down().success());
}

#[test]
fn diagnostics_in_an_import_are_published_for_the_imported_file() {
    let mut client = Client::start();
    client.file(
        "lib/agents.kdl",
        "agent \"claude\" {\n    comand \"claude\"\n}\n",
    );
    let text = "pipeline \"p\"\nimport \"lib/agents.kdl\"\nphase \"a\" { agent \"claude\"; prompt \"x\" }\n";
    let uri = client.open("pipeline.kdl", text);
    let library = client.uri("lib/agents.kdl");
    let in_library = client.diagnostics(&library);
    assert!(
        codes(&in_library).contains(&"HF101".to_owned()),
        "{in_library:?}"
    );
    let unknown = in_library.iter().find(|d| d["code"] == "HF101").unwrap();
    assert_eq!(
        unknown["range"]["start"],
        json!({"line": 1, "character": 4})
    );
    let own = client.diagnostics(&uri);
    assert!(!codes(&own).contains(&"HF101".to_owned()), "{own:?}");
}

#[test]
fn files_changed_outside_the_editor_are_checked_again() {
    let mut client = Client::start_with(
        json!({"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": true}}}),
    );
    let registration = client.wait("a request to watch files", |m| {
        m["method"] == "client/registerCapability"
    });
    let watch = &registration["params"]["registrations"][0];
    assert_eq!(watch["method"], "workspace/didChangeWatchedFiles");
    let globs: Vec<&Value> = watch["registerOptions"]["watchers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| &w["globPattern"])
        .collect();
    assert!(globs.contains(&&json!("**/*.kdl")), "{globs:?}");
    let id = registration["id"].clone();
    client.send(&json!({"jsonrpc": "2.0", "id": id, "result": null}));

    // An import that changes on disk: the library's new error is published.
    client.file(
        "lib/agents.kdl",
        "agent \"claude\" {\n    command \"claude\"\n}\n",
    );
    let text = "pipeline \"p\"\nimport \"lib/agents.kdl\"\nphase \"a\" { agent \"claude\"; prompt \"x\" }\n";
    let uri = client.open("pipeline.kdl", text);
    assert_eq!(client.diagnostics(&uri), Vec::<Value>::new());
    let library = client.uri("lib/agents.kdl");
    client.file(
        "lib/agents.kdl",
        "agent \"claude\" {\n    comand \"claude\"\n}\n",
    );
    client.notify(
        "workspace/didChangeWatchedFiles",
        json!({"changes": [{"uri": library, "type": 2}]}),
    );
    let in_library = client.diagnostics(&library);
    assert_eq!(codes(&in_library), ["HF125", "HF101"], "{in_library:?}");

    // A missing import that is created: the pipeline is checked again and comes out clean.
    let text =
        "pipeline \"p\"\nimport \"lib/more.kdl\"\nphase \"a\" { agent \"codex\"; prompt \"x\" }\n";
    let other = client.open("other.kdl", text);
    let missing = client.diagnostics_where(&other, |p| p["diagnostics"] != json!([]));
    assert!(
        !codes(missing["diagnostics"].as_array().unwrap()).is_empty(),
        "{missing:?}"
    );
    client.file(
        "lib/more.kdl",
        "agent \"codex\" {\n    command \"codex\"\n}\n",
    );
    client.notify(
        "workspace/didChangeWatchedFiles",
        json!({"changes": [{"uri": client.uri("lib/more.kdl"), "type": 1}]}),
    );
    client.diagnostics_where(&other, |p| p["diagnostics"] == json!([]));
    assert!(client.shut_down().success());
}

#[test]
fn hover_documents_nodes_properties_values_and_names() {
    let mut client = Client::start();
    let uri = client.open_project();
    let cases = [
        ("node `outputs`", position_of(PIPELINE, "outputs {", 1, 2)),
        (
            "gate property `name=`",
            position_of(PIPELINE, "name=", 0, 1),
        ),
        ("verify mode", position_of(PIPELINE, "sub-agent", 0, 2)),
        ("phase reference", position_of(PIPELINE, "\"parser\"", 1, 3)),
        (
            "agent reference",
            position_of(PIPELINE, "\"reviewer\"", 0, 1),
        ),
        ("template parameter", position_of(PIPELINE, "module=", 0, 2)),
        ("gate kind", position_of(PIPELINE, "syntax", 0, 1)),
    ];
    let mut report = String::new();
    for (label, position) in cases {
        let hover = client.hover(&uri, position);
        assert_eq!(hover["contents"]["kind"], "markdown", "{label}");
        report.push_str(&format!(
            "## {label} {}\n{}\n\n",
            hover["range"],
            hover["contents"]["value"].as_str().unwrap()
        ));
    }
    // Between nodes there is nothing to say.
    let blank = client.hover(&uri, json!({"line": 3, "character": 0}));
    assert_eq!(blank, Value::Null);
    insta::assert_snapshot!("hover", report);
}

/// An agent's declared `cost` is documented on hover, from the schema table.
#[test]
fn hover_documents_an_agents_declared_cost() {
    let mut client = Client::start();
    let text = "pipeline \"p\"\nagent \"script\" {\n    command \"./agent.sh\"\n    cost 0\n}\nphase \"a\" { agent \"script\"; prompt \"go\" }\n";
    let uri = client.open("pipeline.kdl", text);
    assert_eq!(client.diagnostics(&uri), Vec::<Value>::new());
    let hover = client.hover(&uri, position_of(text, "cost 0", 0, 1));
    let doc = hover["contents"]["value"].as_str().unwrap();
    assert!(
        doc.contains("cost USD") && doc.contains("`cost 0` declares an agent free"),
        "{doc}"
    );
    assert!(client.shut_down().success());
}

/// `for-each`, its limits and `generates` are offered in a phase, and documented on hover, from
/// the schema table.
#[test]
fn for_each_and_generates_are_completed_and_documented() {
    let mut client = Client::start();
    let text = "pipeline \"p\"\nphase \"m\" {\n    for-each json=\"items.json\" key=\"id\"\n    run \"echo {{ item.key }}\"\n    \n}\n";
    let uri = client.open("pipeline.kdl", text);
    assert_eq!(client.diagnostics(&uri), Vec::<Value>::new());
    let result = client.request(
        "textDocument/completion",
        json!({"textDocument": {"uri": uri}, "position": position_of(text, "    \n}", 0, 4)}),
    );
    let labels: Vec<&str> = result
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["label"].as_str().unwrap())
        .collect();
    // `for-each` is there already: one per phase.
    for wanted in ["max-items", "max-parallel", "generates"] {
        assert!(labels.contains(&wanted), "{wanted} in {labels:?}");
    }
    assert!(!labels.contains(&"for-each"), "{labels:?}");
    let hover = client.hover(&uri, position_of(text, "for-each", 0, 2));
    let doc = hover["contents"]["value"].as_str().unwrap();
    assert!(doc.contains("one phase per item"), "{doc}");
    let hover = client.hover(&uri, position_of(text, "json=", 0, 1));
    let doc = hover["contents"]["value"].as_str().unwrap();
    assert!(doc.contains("A JSON array of objects or strings"), "{doc}");
    assert!(client.shut_down().success());
}

/// `worktree-include` and `worktree-share` are documented on hover, from the schema table.
#[test]
fn hover_documents_what_a_worktree_brings() {
    let mut client = Client::start();
    let text = "pipeline \"p\"\nphase \"a\" {\n    run \"true\"\n    isolation \"worktree\"\n    worktree-include \".env\"\n    worktree-share \".venv\"\n}\n";
    let uri = client.open("pipeline.kdl", text);
    for (node, words) in [
        ("worktree-include", "copy-on-write clone"),
        ("worktree-share", "read-only bind mount"),
    ] {
        let hover = client.hover(&uri, position_of(text, node, 0, 2));
        let doc = hover["contents"]["value"].as_str().unwrap();
        assert!(doc.contains(node) && doc.contains(words), "{doc}");
    }
    assert!(client.shut_down().success());
}

/// A document with half-written lines, as while typing.
const TYPING: &str = r#"pipeline "typing"
import "lib/agents.kdl"

template "python-module" {
    param "module"
    param "tests" default="tests"
    run "true"
}

agent "local" {
    command "sh" "-c" "{{ prompt }}"
    response 
}

phase "parser" {
    run "true"
    
    gates {
        
    }
    verify "s
    on-failure 
    depends-on 
    agent 
    fail-fast 
}

phase "lexer" use=
phase "y" use="python-module" 
phase "z" {
    outputs {
        glob "x" 
    }
}
"#;

#[test]
fn completion_offers_what_fits_the_cursor() {
    let mut client = Client::start();
    client.file("lib/agents.kdl", AGENTS);
    let uri = client.open("typing.kdl", TYPING);
    let cases = [
        ("phase body", position_of(TYPING, "    \n    gates", 0, 4)),
        ("gates", position_of(TYPING, "        \n    }", 0, 8)),
        ("verify", position_of(TYPING, "verify \"s", 0, 9)),
        ("on-failure", position_of(TYPING, "on-failure ", 0, 11)),
        ("depends-on", position_of(TYPING, "depends-on ", 0, 11)),
        ("agent", position_of(TYPING, "    agent \n", 0, 10)),
        ("fail-fast", position_of(TYPING, "fail-fast ", 0, 10)),
        ("response", position_of(TYPING, "response ", 0, 9)),
        ("use=", position_of(TYPING, "use=\n", 0, 4)),
        (
            "template parameters",
            position_of(TYPING, "\"python-module\" \n", 0, 16),
        ),
        ("glob properties", position_of(TYPING, "glob \"x\" ", 0, 9)),
        (
            "top level",
            position_of(TYPING, "}\n\nphase \"parser\"", 0, 2),
        ),
    ];
    let mut report = String::new();
    for (label, position) in cases {
        let result = client.request(
            "textDocument/completion",
            json!({"textDocument": {"uri": uri}, "position": position}),
        );
        let items = result.as_array().unwrap();
        let labels: Vec<String> = items
            .iter()
            .map(|i| {
                format!(
                    "{} → {}",
                    i["label"].as_str().unwrap(),
                    i["textEdit"]["newText"].as_str().unwrap()
                )
            })
            .collect();
        report.push_str(&format!("## {label}\n{}\n\n", labels.join("\n")));
    }
    insta::assert_snapshot!("completion", report);

    // One item in full: the documentation is the schema table's, and the edit replaces the
    // unterminated string up to the cursor.
    let position = position_of(TYPING, "verify \"s", 0, 9);
    let result = client.request(
        "textDocument/completion",
        json!({"textDocument": {"uri": uri}, "position": position}),
    );
    let item = result
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["label"] == "self")
        .unwrap()
        .clone();
    insta::assert_snapshot!("completion_item", client.redact(&item));
}

/// Inside an `attempt` block the server offers what an attempt may set and the agents it may
/// name, documents the block on hover, and reports a setting an attempt cannot change (HF142).
#[test]
fn attempt_blocks_complete_hover_and_lint() {
    let mut client = Client::start();
    let text = "pipeline \"p\"\nagent \"sonnet\" { command \"a\"; }\nagent \"opus\" { command \"b\"; }\nphase \"parser\" {\n    agent \"sonnet\"\n    prompt \"go\"\n    attempt 2 {\n        retries 4\n        agent \n    }\n}\n";
    let uri = client.open("pipeline.kdl", text);
    let codes = |diagnostics: Vec<Value>| -> Vec<String> {
        diagnostics
            .iter()
            .map(|d| d["code"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert!(codes(client.diagnostics(&uri)).contains(&"HF142".to_owned()));
    let labels = |client: &mut Client, position: Value| -> Vec<String> {
        let result = client.request(
            "textDocument/completion",
            json!({"textDocument": {"uri": uri}, "position": position}),
        );
        result
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["label"].as_str().unwrap().to_owned())
            .collect()
    };
    let mut settings = labels(&mut client, position_of(text, "        agent \n", 0, 8));
    settings.sort();
    let mut expected = [
        "agent",
        "backoff",
        "env",
        "idle-timeout",
        "max-turns",
        "prompt",
        "timeout",
        "vars",
        "verifier",
        "verifier-prompt",
    ];
    expected.sort_unstable();
    assert_eq!(settings, expected);
    let agents = labels(&mut client, position_of(text, "        agent \n", 0, 14));
    assert!(
        agents.iter().any(|a| a.contains("opus")) && agents.iter().any(|a| a.contains("sonnet")),
        "{agents:?}"
    );
    let hover = client.hover(&uri, position_of(text, "attempt 2", 0, 1));
    let doc = hover["contents"]["value"].as_str().unwrap();
    assert!(doc.contains("escalation tier"), "{doc}");
    assert!(client.shut_down().success());
}

#[test]
fn definition_and_references_cross_imports() {
    let mut client = Client::start();
    let uri = client.open_project();
    let library = client.uri("lib/agents.kdl");

    // `agent "claude"` in `defaults` → the imported file.
    let position = position_of(PIPELINE, "\"claude\"", 0, 2);
    let result = client.request(
        "textDocument/definition",
        json!({"textDocument": {"uri": uri}, "position": position}),
    );
    assert_eq!(
        result,
        json!([{"uri": library, "range": {"start": {"line": 0, "character": 6}, "end": {"line": 0, "character": 14}}}])
    );

    // `use="python-module"` → the template.
    let position = position_of(PIPELINE, "use=\"python-module\"", 0, 6);
    let result = client.request(
        "textDocument/definition",
        json!({"textDocument": {"uri": uri}, "position": position}),
    );
    assert_eq!(
        result[0]["range"]["start"],
        json!({"line": 10, "character": 9})
    );

    // Every use of phase "parser", with its definition.
    let position = position_of(PIPELINE, "\"parser\"", 0, 1);
    let result = client.request(
        "textDocument/references",
        json!({
            "textDocument": {"uri": uri},
            "position": position,
            "context": {"includeDeclaration": true},
        }),
    );
    let lines: Vec<u64> = result
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["range"]["start"]["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, [17, 28, 36]);

    // From the library, the uses in the pipeline that imports it.
    client.open("lib/agents.kdl", AGENTS);
    let result = client.request(
        "textDocument/references",
        json!({
            "textDocument": {"uri": library},
            "position": {"line": 4, "character": 8},
            "context": {"includeDeclaration": false},
        }),
    );
    assert_eq!(
        result,
        json!([{"uri": uri, "range": {"start": {"line": 31, "character": 13}, "end": {"line": 31, "character": 23}}}])
    );
}

/// Document symbols as an indented list: kind, name, detail, range and selection range.
fn outline(symbols: &Value, depth: usize, out: &mut String) {
    let range = |r: &Value| {
        format!(
            "{}:{}-{}:{}",
            r["start"]["line"], r["start"]["character"], r["end"]["line"], r["end"]["character"]
        )
    };
    for symbol in symbols.as_array().unwrap() {
        out.push_str(&format!(
            "{}{} {} ({}) {} name at {}\n",
            "  ".repeat(depth),
            symbol["kind"],
            symbol["name"].as_str().unwrap(),
            symbol["detail"].as_str().unwrap_or(""),
            range(&symbol["range"]),
            range(&symbol["selectionRange"]),
        ));
        if let Some(children) = symbol.get("children") {
            outline(children, depth + 1, out);
        }
    }
}

#[test]
fn document_symbols_outline_the_pipeline() {
    let mut client = Client::start();
    let uri = client.open_project();
    let result = client.request(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": uri}}),
    );
    let mut report = String::new();
    outline(&result, 0, &mut report);
    insta::assert_snapshot!("document_symbols", report);
}

#[test]
fn a_document_over_the_limits_gets_the_answer_lint_gives() {
    let mut client = Client::start();
    // 100,000 phases on 3 MB of one line.
    let mut text = String::from("pipeline \"p\"; ");
    for i in 0..100_000 {
        text.push_str(&format!("phase \"p{i}\" {{ run \"x\"; }}; "));
    }
    client.file("pipeline.kdl", &text);
    let uri = client.open("pipeline.kdl", &text);
    let diagnostics = client.diagnostics(&uri);
    assert_eq!(codes(&diagnostics), ["HF005"]);
    let lint = lint_json(&client.root, "pipeline.kdl");
    assert_eq!(
        diagnostics[0]["message"],
        format!(
            "{}\nhelp: {}",
            lint[0]["message"].as_str().unwrap(),
            lint[0]["help"].as_str().unwrap()
        )
    );
    // Nothing past the limits is read for the outline, completion or hover either.
    let symbols = client.request(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": uri}}),
    );
    assert_eq!(symbols, json!([]));
    assert_eq!(
        client.hover(&uri, json!({"line": 0, "character": 20})),
        Value::Null
    );
    let edits = client.request(
        "textDocument/formatting",
        json!({"textDocument": {"uri": uri}, "options": {"tabSize": 4, "insertSpaces": true}}),
    );
    assert!(edits.is_null() || edits == json!([]), "{edits}");
    assert!(client.shut_down().success());
}

#[test]
fn formatting_is_fmt_and_leaves_broken_text_alone() {
    let mut client = Client::start();
    let text = "pipeline   \"p\" {\n  description \"ü😀\"   // kept\n}\nphase \"a\"  {  run \"true\"; retries 1 }\n";
    let uri = client.open("pipeline.kdl", text);
    let edits = client.request(
        "textDocument/formatting",
        json!({"textDocument": {"uri": uri}, "options": {"tabSize": 4, "insertSpaces": true}}),
    );
    let formatted = apply_edits(text, edits.as_array().unwrap());

    let mut fmt = Command::new(env!("CARGO_BIN_EXE_helixflow"))
        .args(["fmt", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    fmt.stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = fmt.wait_with_output().unwrap();
    assert!(output.status.success());
    assert_eq!(formatted, String::from_utf8(output.stdout).unwrap());
    assert_ne!(formatted, text);

    let broken = client.open("broken.kdl", "phase \"a\" {\n  run \"x\n");
    let edits = client.request(
        "textDocument/formatting",
        json!({"textDocument": {"uri": broken}, "options": {"tabSize": 4, "insertSpaces": true}}),
    );
    assert_eq!(edits, json!([]));
}

#[test]
fn code_action_applies_the_did_you_mean() {
    let mut client = Client::start();
    let uri = client.open_project();
    let diagnostics = client.diagnostics(&uri);
    let range = diagnostics[0]["range"].clone();
    let actions = client.request(
        "textDocument/codeAction",
        json!({
            "textDocument": {"uri": uri},
            "range": {"start": range["start"], "end": range["start"]},
            "context": {"diagnostics": diagnostics},
        }),
    );
    let actions = actions.as_array().unwrap();
    assert_eq!(actions.len(), 1, "{actions:?}");
    assert_eq!(actions[0]["title"], "rename to `retries`");
    assert_eq!(actions[0]["kind"], "quickfix");
    assert_eq!(actions[0]["diagnostics"][0]["code"], "HF101");
    let edits = actions[0]["edit"]["changes"][&uri].as_array().unwrap();
    let fixed = apply_edits(PIPELINE, edits);
    assert!(fixed.contains("description \"ü😀\"; retries 1"));

    // Nowhere near a finding, nothing to fix.
    let actions = client.request(
        "textDocument/codeAction",
        json!({
            "textDocument": {"uri": uri},
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
            "context": {"diagnostics": []},
        }),
    );
    assert_eq!(actions, json!([]));
}

#[test]
fn a_change_that_fixes_the_error_clears_the_diagnostics() {
    let mut client = Client::start();
    let uri = client.open_project();
    assert_eq!(codes(&client.diagnostics(&uri)), ["HF101"]);
    let start = position_of(PIPELINE, "retires", 0, 0);
    let end = position_of(PIPELINE, "retires", 0, 7);
    client.notify(
        "textDocument/didChange",
        json!({
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{"range": {"start": start, "end": end}, "text": "retries"}],
        }),
    );
    let params = client.diagnostics_where(&uri, |p| p["version"] == 2);
    assert_eq!(params["diagnostics"], json!([]));
}

#[test]
fn typing_is_debounced_and_stale_results_are_dropped() {
    let mut client = Client::start();
    let uri = client.open_project();
    client.diagnostics(&uri);
    // Keystrokes in quick succession: `retires` becomes `retriesXXXX` and back to `retries`.
    let at = position_of(PIPELINE, "retires", 0, 0);
    let end = position_of(PIPELINE, "retires", 0, 7);
    let mut text = "retries".to_owned();
    let mut version = 1;
    let mut previous_end = end;
    for step in 0..8 {
        version += 1;
        let replacement = if step == 7 {
            "retries".to_owned()
        } else {
            format!("retries{}", "X".repeat(step + 1))
        };
        client.notify(
            "textDocument/didChange",
            json!({
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"range": {"start": at, "end": previous_end}, "text": replacement}],
            }),
        );
        let character = at["character"].as_u64().unwrap() + replacement.len() as u64;
        previous_end = json!({"line": at["line"], "character": character});
        text = replacement;
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(text, "retries");
    let last = client.diagnostics_where(&uri, |p| p["version"] == version);
    assert_eq!(last["diagnostics"], json!([]));
    // The first keystroke may be checked at once; the rest wait for the pause. Nothing is
    // published for a version that was already outdated.
    let published: Vec<&Value> = client
        .backlog
        .iter()
        .filter(|m| m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri)
        .collect();
    assert!(published.len() <= 1, "{published:#?}");
}

#[test]
fn pathological_documents_do_not_freeze_the_server() {
    let mut client = Client::start();
    let uri = client.open_project();
    client.diagnostics(&uri);

    // Unclosed slashdashed blocks, on which the KDL parser's recovery is exponential.
    let slashdash = client.open("slashdash.kdl", &"a /-{\n".repeat(16));
    let diagnostics = client.diagnostics(&slashdash);
    assert_eq!(codes(&diagnostics), vec!["HF002"; 16]);

    // A document of about a megabyte takes the checker a while; requests are answered meanwhile.
    let mut big = String::from("pipeline \"big\" {\n    description \"ünïcödé 😀\"\n}\n");
    let mut n = 0;
    while big.len() < 1_000_000 {
        big.push_str(&format!(
            "phase \"p{n:05}\" {{\n    description \"Phase {n}\"\n    run \"make p{n:05}\"\n    outputs {{ file \"out/p{n:05}.txt\"; }}\n    gates {{ command \"test -s out/p{n:05}.txt\" name=\"non-empty\"; }}\n}}\n"
        ));
        n += 1;
    }
    let started = Instant::now();
    let big_uri = client.open("big.kdl", &big);
    let small = client.send_request(
        "textDocument/hover",
        json!({"textDocument": {"uri": uri}, "position": position_of(PIPELINE, "syntax", 0, 1)}),
    );
    let on_big = client.send_request(
        "textDocument/hover",
        json!({"textDocument": {"uri": big_uri}, "position": {"line": 3, "character": 2}}),
    );
    let hover = client.response(small);
    let answered = started.elapsed();
    assert!(
        hover["result"]["contents"]["value"]
            .as_str()
            .unwrap()
            .contains("Every output")
    );
    let big_published = |client: &Client| {
        client.backlog.iter().any(|m| {
            m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == big_uri
        })
    };
    assert!(
        !big_published(&client),
        "the check of the big document finished before the hover was answered ({answered:?})"
    );
    assert!(answered < Duration::from_secs(2), "hover took {answered:?}");
    // The big document's own hover is answered too, while it is being checked.
    let hover = client.response(on_big);
    assert!(
        hover["result"]["contents"]["value"]
            .as_str()
            .unwrap()
            .contains("One unit of work")
    );
    // The check ends, with findings or with the budget's.
    client.diagnostics(&big_uri);
    assert!(client.shut_down().success());
}

#[test]
fn exit_without_shutdown_is_an_error() {
    let mut client = Client::start();
    client.notify("exit", Value::Null);
    let status = client.exit_status();
    assert_eq!(status.code(), Some(1));
}

#[test]
fn requests_after_shutdown_are_refused() {
    let mut client = Client::start();
    client.request("shutdown", Value::Null);
    let id = client.send_request(
        "textDocument/hover",
        json!({"textDocument": {"uri": client.uri("x.kdl")}, "position": {"line": 0, "character": 0}}),
    );
    let response = client.response(id);
    assert_eq!(response["error"]["code"], -32600);
    client.notify("exit", Value::Null);
    assert_eq!(client.exit_status().code(), Some(0));
}

#[test]
fn remote_imports_resolve_from_the_cache_and_are_never_fetched() {
    let repo = crate::common::repos::Repo::new();
    repo.write("agents.kdl", AGENTS);
    let commit = repo.commit("agents");
    repo.tag("v1");
    let cache = tempfile::tempdir().unwrap();
    let spy = crate::common::repos::GitSpy::new("0");
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "pipeline \"p\"\nimport \"{}\" rev=\"v1\"\nphase \"a\" {{\n    agent \"claude\"\n    prompt \"Go\"\n}}\n",
        repo.url("agents.kdl")
    );
    std::fs::write(dir.path().join("pipeline.kdl"), &text).unwrap();
    let path = spy.path();
    let env = [
        ("HELIXFLOW_CACHE", cache.path().to_str().unwrap()),
        ("PATH", path.as_str()),
    ];
    let mut client = Client::start_in(json!({}), dir, &env);

    // Nothing in the cache and no lock: the server says so, and does not fetch.
    let uri = client.open("pipeline.kdl", &text);
    let diagnostics =
        client.diagnostics_where(&uri, |p| !p["diagnostics"].as_array().unwrap().is_empty());
    assert_eq!(
        codes(diagnostics["diagnostics"].as_array().unwrap())[0],
        "HF513"
    );
    assert_eq!(spy.calls(), Vec::<String>::new());

    // `helixflow lock` fetches; the server then reads the cached copy.
    let status = Command::new(env!("CARGO_BIN_EXE_helixflow"))
        .arg("lock")
        .current_dir(&client.root)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    spy.clear();
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": format!("{text}\n")}]}),
    );
    client.diagnostics_where(&uri, |p| {
        p["version"] == 2
            && !codes(p["diagnostics"].as_array().unwrap()).contains(&"HF513".to_owned())
    });

    // Go to definition: the agent, in the cached file (read-only).
    let copy = cache.path().join(&commit).join("agents.kdl");
    let copy_uri = format!("file://{}", copy.display());
    let position = position_of(&text, "\"claude\"", 0, 2);
    let result = client.request(
        "textDocument/definition",
        json!({"textDocument": {"uri": uri}, "position": position}),
    );
    assert_eq!(result[0]["uri"], copy_uri.as_str());
    assert!(std::fs::metadata(&copy).unwrap().permissions().readonly());
    // On the import itself: the cached file.
    let position = position_of(&text, "agents.kdl", 0, 1);
    let result = client.request(
        "textDocument/definition",
        json!({"textDocument": {"uri": uri}, "position": position}),
    );
    assert_eq!(result[0]["uri"], copy_uri.as_str());

    // Hover on the import: the repository, the rev and the commit.
    let hover = client.hover(&uri, position_of(&text, "agents.kdl", 0, 1));
    let markdown = hover["contents"]["value"].as_str().unwrap();
    assert!(
        markdown.contains(&repo.repository().replace("git+", "")),
        "{markdown}"
    );
    assert!(
        markdown.contains(&format!("`rev` `v1` is commit `{commit}`")),
        "{markdown}"
    );
    assert!(markdown.contains(&copy.display().to_string()), "{markdown}");
    assert_eq!(
        spy.calls(),
        Vec::<String>::new(),
        "the server never runs git"
    );
    assert!(client.shut_down().success());
}
