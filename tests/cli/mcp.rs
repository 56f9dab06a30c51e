//! `helixflow mcp`: the Model Context Protocol over standard input and output, checked message by
//! message as a client sends them: `server/discover` (what Claude Code asks first),
//! `initialize`, `tools/list`, `tools/call` of each tool, and the errors.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

use crate::common::Test;

struct Session {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    next: u64,
}

impl Session {
    fn start(test: &Test) -> Session {
        let mut child = Command::new(env!("CARGO_BIN_EXE_helixflow"))
            .arg("mcp")
            .current_dir(test.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("helixflow mcp starts");
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        Session {
            child,
            input,
            output,
            next: 1,
        }
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.input, "{message}").unwrap();
        self.input.flush().unwrap();
    }

    /// Sends a request and returns its response (the server sends nothing else unasked).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        let response: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON-RPC ({e}): {line}"));
        assert_eq!(response["jsonrpc"], "2.0", "{response}");
        assert_eq!(response["id"], id, "{response}");
        response
    }

    fn call(&mut self, tool: &str, arguments: Value) -> (bool, String) {
        let response = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        let result = &response["result"];
        let content = result["content"].as_array().expect("content");
        assert_eq!(content.len(), 1, "{response}");
        assert_eq!(content[0]["type"], "text");
        (
            result["isError"] == true,
            content[0]["text"].as_str().unwrap().to_owned(),
        )
    }

    fn close(mut self) -> i32 {
        drop(self.input);
        self.child.wait().unwrap().code().unwrap_or(-1)
    }
}

const PIPELINE: &str = r#"pipeline "p"
phase "code" {
    run "touch ran-the-run-step"
    outputs { file "hello.py" }
    gates {
        syntax
        command "exit 1" name="fixable" fix="touch the-fix-ran"
    }
}
phase "docs" {
    run "true"
    depends-on "code"
}
"#;

fn initialize(session: &mut Session) -> Value {
    let response = session.request(
        "initialize",
        json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "conformance", "version": "1"}
        }),
    );
    session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    response
}

#[test]
fn initialize_tools_list_and_every_tool_call_follow_the_protocol() {
    let test = Test::new()
        .pipeline(PIPELINE)
        .file("hello.py", "def broken(:\n    pass\n");
    let mut session = Session::start(&test);
    let init = initialize(&mut session);
    let result = &init["result"];
    assert_eq!(result["protocolVersion"], "2025-11-25", "{init}");
    assert_eq!(result["serverInfo"]["name"], "helixflow");
    assert!(result["capabilities"]["tools"].is_object(), "{init}");

    let list = session.request("tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().expect("tools");
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["verify", "status", "explain", "lint"]);
    for tool in tools {
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        assert_eq!(tool["annotations"]["readOnlyHint"], true, "{tool}");
        assert!(tool["description"].as_str().is_some_and(|d| !d.is_empty()));
    }

    let (error, text) = session.call("verify", json!({"phase": "code"}));
    assert!(!error, "a failing phase is a result, not an error: {text}");
    let verdict: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(verdict["success"], false);
    assert!(
        verdict["feedback"]
            .as_str()
            .unwrap()
            .contains("hello.py:1:12: missing `)`"),
        "{text}"
    );
    let gates: Vec<&str> = verdict["gates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["status"].as_str().unwrap())
        .collect();
    assert_eq!(gates, ["passed", "failed", "failed"], "{text}");
    assert!(
        !test.path().join("the-fix-ran").exists(),
        "the server ran a gate's fix"
    );
    assert!(
        !test.path().join("ran-the-run-step").exists(),
        "the server ran a run step"
    );

    let (error, text) = session.call("verify", json!({}));
    assert!(
        error && text.contains("which phase? give `phase`, one of: code, docs"),
        "{text}"
    );
    let (error, text) = session.call("status", json!({}));
    assert!(!error);
    let status: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(status["phases"][0]["status"], "will-run", "{text}");
    let (error, text) = session.call("explain", json!({"code": "HF305"}));
    assert!(
        !error && text.starts_with("HF305 (unknown-prompt-variable)"),
        "{text}"
    );
    let (error, text) = session.call("explain", json!({"code": "HF999"}));
    assert!(error && text.contains("unknown code"), "{text}");
    let (error, text) = session.call("lint", json!({}));
    assert!(
        !error && serde_json::from_str::<Value>(&text).unwrap() == json!([]),
        "{text}"
    );

    let unknown = session.request("tools/call", json!({"name": "run", "arguments": {}}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert_eq!(session.close(), 0, "the server ends when its input closes");
}

#[test]
fn lint_reports_diagnostics_and_discover_answers_before_initialize() {
    let test = Test::new().pipeline("pipeline \"p\"\nphase \"a\" {\n    bogus 1\n}\n");
    let mut session = Session::start(&test);
    let discover = session.request(
        "server/discover",
        json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        }}),
    );
    let versions = discover["result"]["supportedVersions"]
        .as_array()
        .unwrap_or_else(|| panic!("{discover}"));
    assert!(versions.contains(&json!("2025-11-25")), "{discover}");
    initialize(&mut session);
    let (error, text) = session.call("lint", json!({"file": "pipeline.kdl"}));
    assert!(!error, "{text}");
    let diagnostics: Value = serde_json::from_str(&text).unwrap();
    let codes: Vec<&str> = diagnostics
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"HF101"), "{text}");
    let (error, text) = session.call("verify", json!({"phase": "a"}));
    assert!(
        error && text.contains("has errors: the `lint` tool lists them"),
        "{text}"
    );
    assert_eq!(session.close(), 0);
}
