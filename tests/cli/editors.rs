//! The editor packages under editors/ and the exported schema/ files: Neovim (headless) as a real
//! client of `helixflow lsp`, the VS Code extension's manifest and `TextMate` grammar, the Helix
//! snippet, and `helixflow schema`.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Test;
use helixflow::ALL_RULES;
use helixflow::schema::{self, NODES};
use serde_json::Value;

fn repository() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read_json(relative: &str) -> Value {
    let path = repository().join(relative);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{relative} is not JSON: {e}"))
}

// --- Neovim -------------------------------------------------------------------------------------

/// Run inside Neovim after the file given on its command line is loaded: waits for the language
/// server's diagnostics when asked to, then writes what Neovim knows about the buffer as JSON.
const PROBE: &str = r"
local function attached()
  return vim.lsp.get_clients and vim.lsp.get_clients({ bufnr = 0 }) or vim.lsp.buf_get_clients(0)
end
local wait = vim.env.HELIXFLOW_TEST_WAIT
if wait == 'diagnostics' then
  vim.wait(30000, function() return #vim.diagnostic.get(0) > 0 end, 20)
  -- A later publish would replace these; give a late one the time to arrive.
  vim.wait(300)
elseif wait == 'client' then
  -- A client counts as attached once the server has answered `initialize`.
  vim.wait(30000, function() return next(attached()) ~= nil end, 20)
else
  -- Time for a client that should not start to show up anyway.
  vim.wait(1000)
end
local clients = {}
for _, client in pairs(attached()) do
  table.insert(clients, client.name)
end
local diagnostics = {}
for _, d in ipairs(vim.diagnostic.get(0)) do
  table.insert(diagnostics, {
    code = d.code, severity = d.severity, message = d.message, source = d.source,
    lnum = d.lnum, col = d.col, end_lnum = d.end_lnum, end_col = d.end_col,
  })
end
local out = assert(io.open(vim.env.HELIXFLOW_TEST_OUT, 'w'))
out:write(vim.json.encode({
  filetype = vim.bo.filetype, clients = clients, diagnostics = diagnostics,
}))
out:close()
vim.cmd('qa!')
";

/// Evaluates the Neovim setup's pipeline-node check on the cases shared with the VS Code test.
const DETECT: &str = r"
local helixflow = require('helixflow')
local file = assert(io.open(vim.env.HELIXFLOW_TEST_CASES))
local cases = vim.json.decode(file:read('*a'))
file:close()
local wrong = {}
for _, text in ipairs(cases.pipelines) do
  if not helixflow.has_pipeline_node(text) then table.insert(wrong, text) end
end
for _, text in ipairs(cases.not_pipelines) do
  if helixflow.has_pipeline_node(text) then table.insert(wrong, text) end
end
local out = assert(io.open(vim.env.HELIXFLOW_TEST_OUT, 'w'))
out:write(vim.json.encode({ checked = #cases.pipelines + #cases.not_pipelines, wrong = wrong }))
out:close()
vim.cmd('qa!')
";

fn nvim_is_installed() -> bool {
    Command::new("nvim")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Skips the test, saying so, when Neovim is missing; `.ci/run` installs it.
macro_rules! require_nvim {
    () => {
        if !nvim_is_installed() {
            eprintln!(
                "SKIPPED: `nvim` is not installed (`apt-get install neovim`; .ci/run installs it)"
            );
            return;
        }
    };
}

/// A headless Neovim with editors/neovim on its runtime path, as the README sets it up, and
/// nothing of the user's configuration.
struct Neovim {
    dir: tempfile::TempDir,
    setup: String,
    path: String,
}

impl Neovim {
    fn new() -> Self {
        let bin = Path::new(env!("CARGO_BIN_EXE_helixflow")).parent().unwrap();
        // `helixflow` on PATH, as the setup's default `cmd` expects.
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Self {
            dir: tempfile::tempdir().unwrap(),
            setup: String::new(),
            path,
        }
    }

    /// Lua run before the plugins load, e.g. a `require('helixflow').setup{…}` call.
    fn setup(mut self, lua: &str) -> Self {
        lua.clone_into(&mut self.setup);
        self
    }

    fn file(&self, name: &str, text: &str) -> &Self {
        std::fs::write(self.dir.path().join(name), text).unwrap();
        self
    }

    /// Opens `file` and runs `script`, which writes its findings to $`HELIXFLOW_TEST_OUT`.
    fn run(&self, file: Option<&str>, script: &str, env: &[(&str, &str)]) -> Value {
        let work = self.dir.path();
        let state = work.join(".nvim-state");
        let script_path = state.join("script.lua");
        let out = state.join("out.json");
        let log = state.join("stderr.log");
        std::fs::create_dir_all(&state).unwrap();
        std::fs::write(&script_path, script).unwrap();
        let _ = std::fs::remove_file(&out);

        let mut command = Command::new("nvim");
        command
            .args(["--headless", "--clean", "--cmd"])
            .arg("lua vim.opt.runtimepath:prepend(os.getenv('HELIXFLOW_NVIM_RTP'))")
            .arg("--cmd")
            .arg("lua assert((loadstring or load)(os.getenv('HELIXFLOW_NVIM_SETUP')))()")
            .args(file)
            .arg("-c")
            .arg("lua dofile(os.getenv('HELIXFLOW_TEST_SCRIPT'))")
            .current_dir(work)
            .env("PATH", &self.path)
            .env("HELIXFLOW_NVIM_RTP", repository().join("editors/neovim"))
            .env("HELIXFLOW_NVIM_SETUP", &self.setup)
            .env("HELIXFLOW_TEST_SCRIPT", &script_path)
            .env("HELIXFLOW_TEST_OUT", &out)
            .env_remove("HELIXFLOW_PATH")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        // Neovim's logs, shada and swap files stay in the test's folder.
        for var in [
            "XDG_CONFIG_HOME",
            "XDG_DATA_HOME",
            "XDG_STATE_HOME",
            "XDG_CACHE_HOME",
        ] {
            command.env(var, state.join(var));
        }
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("nvim starts");
        let deadline = Instant::now() + Duration::from_secs(90);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "nvim did not finish in 90 s; stderr:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let stderr = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(status.success(), "nvim failed ({status}):\n{stderr}");
        let text = std::fs::read_to_string(&out)
            .unwrap_or_else(|e| panic!("the probe wrote nothing ({e}); nvim stderr:\n{stderr}"));
        serde_json::from_str(&text).unwrap()
    }

    /// Opens `file`, waits for `wait`, and reports its filetype, attached clients and
    /// diagnostics.
    fn open(&self, file: &str, wait: Wait) -> Probe {
        let wait = match wait {
            Wait::Diagnostics => "diagnostics",
            Wait::Client => "client",
            Wait::NoClient => "no-client",
        };
        Probe(self.run(Some(file), PROBE, &[("HELIXFLOW_TEST_WAIT", wait)]))
    }
}

/// What the probe waits for before it looks.
enum Wait {
    /// The first diagnostics.
    Diagnostics,
    /// An initialized client.
    Client,
    /// A second, to give a client that should not start the time to show up.
    NoClient,
}

/// What the probe saw in one buffer.
struct Probe(Value);

impl Probe {
    fn filetype(&self) -> &str {
        self.0["filetype"].as_str().unwrap()
    }

    fn clients(&self) -> Vec<String> {
        list(&self.0["clients"])
            .iter()
            .map(|c| c.as_str().unwrap().to_owned())
            .collect()
    }

    fn diagnostics(&self) -> Vec<Value> {
        list(&self.0["diagnostics"])
    }
}

/// A JSON array written by Neovim, which encodes an empty Lua table as `{}`.
fn list(value: &Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items.clone(),
        Value::Object(map) if map.is_empty() => Vec::new(),
        other => panic!("expected a list, got {other}"),
    }
}

/// A finding's place as Neovim keeps it: 0-based lines, byte columns, and its code.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Place {
    code: String,
    lnum: u64,
    col: u64,
    end_lnum: u64,
    end_col: u64,
}

/// The 0-based line and byte column of a byte offset.
fn line_and_byte_column(text: &str, offset: usize) -> (u64, u64) {
    let before = &text[..offset];
    let line = before.matches('\n').count();
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line as u64, (offset - line_start) as u64)
}

/// A pipeline with two errors on a line with non-ASCII text before them: a character outside
/// the Basic Multilingual Plane (two UTF-16 units) and two-byte and three-byte characters, so
/// that a server counting bytes or characters instead of UTF-16 units lands elsewhere.
const PIPELINE_WITH_ERRORS: &str =
    "pipeline \"démo\"\n\nphase \"ä€😀\" { prompt \"x\"; retires 2 }\n";

#[test]
fn neovim_shows_the_diagnostics_of_lint_at_the_same_places() {
    require_nvim!();
    let nvim = Neovim::new();
    nvim.file("pipeline.kdl", PIPELINE_WITH_ERRORS);
    let probe = nvim.open("pipeline.kdl", Wait::Diagnostics);
    assert_eq!(probe.filetype(), "helixflow");
    assert_eq!(probe.clients(), ["helixflow"]);

    let diagnostics = probe.diagnostics();
    // The misspelled node: line 3, after `phase "ä€😀" { prompt "x"; ` (32 bytes, 27 UTF-16 units).
    let unknown = diagnostics
        .iter()
        .find(|d| d["code"] == "HF101")
        .unwrap_or_else(|| panic!("no HF101 among {diagnostics:#?}"));
    assert_eq!(
        (&unknown["lnum"], &unknown["col"], &unknown["end_col"]),
        (&Value::from(2), &Value::from(32), &Value::from(39)),
        "{unknown:#}"
    );
    assert!(
        unknown["message"]
            .as_str()
            .unwrap()
            .starts_with("unknown node `retires` in `phase`"),
        "{unknown:#}"
    );
    assert_eq!(unknown["severity"], 1, "an error");

    // Every finding of `helixflow lint`, with the same code, place and message, and no other.
    let lint = Test::new()
        .pipeline(PIPELINE_WITH_ERRORS)
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1)
        .json();
    let mut expected = Vec::new();
    for finding in lint.as_array().unwrap() {
        let offset = finding["offset"].as_u64().unwrap() as usize;
        let length = finding["length"].as_u64().unwrap() as usize;
        let (lnum, col) = line_and_byte_column(PIPELINE_WITH_ERRORS, offset);
        let (end_lnum, end_col) = line_and_byte_column(PIPELINE_WITH_ERRORS, offset + length);
        let code = finding["code"].as_str().unwrap().to_owned();
        let message = finding["message"].as_str().unwrap();
        let shown = diagnostics
            .iter()
            .find(|d| d["code"] == code.as_str())
            .unwrap_or_else(|| panic!("{code} is missing in Neovim: {diagnostics:#?}"));
        assert!(
            shown["message"].as_str().unwrap().starts_with(message),
            "{code}: Neovim shows {:?}, lint says {message:?}",
            shown["message"]
        );
        expected.push(Place {
            code,
            lnum,
            col,
            end_lnum,
            end_col,
        });
    }
    let mut shown: Vec<Place> = diagnostics
        .iter()
        .map(|d| Place {
            code: d["code"].as_str().unwrap().to_owned(),
            lnum: d["lnum"].as_u64().unwrap(),
            col: d["col"].as_u64().unwrap(),
            end_lnum: d["end_lnum"].as_u64().unwrap(),
            end_col: d["end_col"].as_u64().unwrap(),
        })
        .collect();
    expected.sort();
    shown.sort();
    assert_eq!(shown, expected);
}

#[test]
fn neovim_detects_pipelines_by_name_and_by_content() {
    require_nvim!();
    let nvim = Neovim::new();
    nvim.file(
        "ci.kdl",
        "// Not named pipeline.kdl, but it is one.\npipeline \"ci\"\nphase \"a\" { run \"true\"; retires 1 }\n",
    )
    .file(
        "lib.kdl",
        "// A library of agents, imported by pipelines: not a pipeline itself.\nagent \"a\" { command \"a\" }\n",
    )
    .file(
        "shared.helixflow.kdl",
        "agent \"b\" { command \"b\" }\n",
    );

    let by_content = nvim.open("ci.kdl", Wait::Diagnostics);
    assert_eq!(by_content.filetype(), "helixflow");
    assert_eq!(by_content.clients(), ["helixflow"]);
    let codes: Vec<Value> = by_content
        .diagnostics()
        .iter()
        .map(|d| d["code"].clone())
        .collect();
    assert_eq!(codes, ["HF101"], "{:#?}", by_content.diagnostics());

    let library = nvim.open("lib.kdl", Wait::NoClient);
    assert_ne!(library.filetype(), "helixflow");
    assert!(library.clients().is_empty(), "{:?}", library.clients());

    let by_name = nvim.open("shared.helixflow.kdl", Wait::Client);
    assert_eq!(by_name.filetype(), "helixflow");
    assert_eq!(by_name.clients(), ["helixflow"]);
}

#[test]
fn neovim_without_the_binary_warns_instead_of_failing() {
    require_nvim!();
    let nvim = Neovim::new()
        .setup("require('helixflow').setup({ cmd = { '/nonexistent/helixflow', 'lsp' } })");
    nvim.file("pipeline.kdl", PIPELINE_WITH_ERRORS);
    // The probe runs to the end: the missing binary raised no Lua error.
    let probe = nvim.open("pipeline.kdl", Wait::NoClient);
    assert_eq!(probe.filetype(), "helixflow");
    assert!(probe.clients().is_empty(), "{:?}", probe.clients());
}

#[test]
fn neovim_and_vscode_agree_on_which_kdl_files_are_pipelines() {
    require_nvim!();
    let cases = repository().join("editors/test-cases/pipeline-node.json");
    let result = Neovim::new().run(
        None,
        DETECT,
        &[("HELIXFLOW_TEST_CASES", cases.to_str().unwrap())],
    );
    assert!(result["checked"].as_u64().unwrap() >= 20, "{result}");
    assert_eq!(
        list(&result["wrong"]),
        Vec::<Value>::new(),
        "misjudged cases"
    );
}

// --- VS Code ------------------------------------------------------------------------------------

#[test]
fn the_vscode_manifest_serves_pipelines_with_a_configurable_binary() {
    let manifest = read_json("editors/vscode/package.json");
    let contributes = &manifest["contributes"];

    let languages = contributes["languages"].as_array().unwrap();
    let language = |id: &str| {
        languages
            .iter()
            .find(|l| l["id"] == id)
            .unwrap_or_else(|| panic!("no language {id}"))
    };
    let helixflow = language("helixflow");
    assert_eq!(
        helixflow["filenames"],
        serde_json::json!(["helixflow.kdl", "pipeline.kdl"])
    );
    assert_eq!(
        helixflow["filenamePatterns"],
        serde_json::json!(["*.helixflow.kdl"])
    );
    assert_eq!(language("kdl")["extensions"], serde_json::json!([".kdl"]));
    for language in languages {
        let configuration = language["configuration"].as_str().unwrap();
        read_json(&format!("editors/vscode/{configuration}"));
    }

    let events: Vec<&str> = manifest["activationEvents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(events, ["onLanguage:helixflow", "onLanguage:kdl"]);

    let settings = &contributes["configuration"]["properties"];
    assert_eq!(settings["helixflow.path"]["type"], "string");
    assert_eq!(settings["helixflow.path"]["default"], "helixflow");
    assert_eq!(
        settings["helixflow.trace.server"]["enum"],
        serde_json::json!(["off", "messages", "verbose"])
    );

    // The grammars exist and declare the scope names the manifest gives them.
    for grammar in contributes["grammars"].as_array().unwrap() {
        let path = grammar["path"].as_str().unwrap();
        let file = read_json(&format!("editors/vscode/{path}"));
        assert_eq!(file["scopeName"], grammar["scopeName"], "{path}");
    }

    // What the extension's code uses is declared, and what is declared is used.
    let source =
        std::fs::read_to_string(repository().join("editors/vscode/src/extension.ts")).unwrap();
    for command in contributes["commands"].as_array().unwrap() {
        let id = command["command"].as_str().unwrap();
        assert!(
            source.contains(&format!("registerCommand(\"{id}\"")),
            "{id} is declared but never registered"
        );
    }
    assert!(source.contains("\"helixflow.path\""));
    assert!(source.contains("args: [\"lsp\"]"));

    // `npm ci && npm run package` builds the .vsix from the committed lock file.
    assert_eq!(manifest["main"], "./dist/extension.js");
    let scripts = &manifest["scripts"];
    assert!(
        scripts["bundle"]
            .as_str()
            .unwrap()
            .contains("--outfile=dist/extension.js")
    );
    assert!(
        scripts["package"]
            .as_str()
            .unwrap()
            .starts_with("vsce package")
    );
    assert!(manifest["devDependencies"]["@vscode/vsce"].is_string());
    let lock = read_json("editors/vscode/package-lock.json");
    let locked = &lock["packages"][""];
    assert_eq!(lock["name"], manifest["name"]);
    assert_eq!(lock["version"], manifest["version"]);
    assert_eq!(locked["dependencies"], manifest["dependencies"]);
    assert_eq!(locked["devDependencies"], manifest["devDependencies"]);
    // The type definitions may not be newer than the oldest VS Code the extension accepts.
    let engine = manifest["engines"]["vscode"]
        .as_str()
        .unwrap()
        .trim_start_matches('^');
    let types = manifest["devDependencies"]["@types/vscode"]
        .as_str()
        .unwrap()
        .trim_start_matches('~');
    assert_eq!(engine, types);

    let ignored = std::fs::read_to_string(repository().join("editors/vscode/.gitignore")).unwrap();
    for pattern in ["node_modules/", "out/", "dist/", "*.vsix"] {
        assert!(
            ignored.lines().any(|l| l == pattern),
            "{pattern} is not gitignored"
        );
    }
}

/// The names of every rule reachable through `include`s, and every scope name, of a grammar.
fn walk_grammar(
    value: &Value,
    includes: &mut BTreeSet<String>,
    scopes: &mut BTreeSet<String>,
    regexes: &mut Vec<String>,
) {
    match value {
        Value::Array(items) => {
            for item in items {
                walk_grammar(item, includes, scopes, regexes);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                match (key.as_str(), item) {
                    ("include", Value::String(target)) => {
                        includes.insert(target.clone());
                    }
                    ("name" | "contentName", Value::String(scope)) => {
                        scopes.insert(scope.clone());
                    }
                    ("match" | "begin" | "end" | "while", Value::String(regex)) => {
                        regexes.push(regex.clone());
                    }
                    _ => walk_grammar(item, includes, scopes, regexes),
                }
            }
        }
        _ => {}
    }
}

/// An Oniguruma pattern without its look-around groups and back-references, which the `regex`
/// crate does not support: what remains must still be a valid regex, which catches unbalanced
/// groups, broken classes and bad escapes. The tokenizer test in editors/vscode compiles the
/// patterns whole, with Oniguruma.
fn without_lookaround(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let rest: String = chars[i..chars.len().min(i + 4)].iter().collect();
        if ["(?=", "(?!", "(?<=", "(?<!"]
            .iter()
            .any(|open| rest.starts_with(open))
        {
            i = skip_group(&chars, i);
        } else if chars[i] == '\\' && chars.get(i + 1).is_some_and(char::is_ascii_digit) {
            i += 2;
        } else if chars[i] == '\\' {
            out.extend(&chars[i..chars.len().min(i + 2)]);
            i += 2;
        } else if chars[i] == '[' {
            let end = class_end(&chars, i);
            out.extend(&chars[i..end]);
            i = end;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// The index after the group that opens at `start`.
fn skip_group(chars: &[char], start: usize) -> usize {
    let mut depth = 0;
    let mut i = start;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '[' => i = class_end(chars, i) - 1,
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    chars.len()
}

/// The index after the character class that opens at `start`.
fn class_end(chars: &[char], start: usize) -> usize {
    let mut i = start + 1;
    if chars.get(i) == Some(&'^') {
        i += 1;
    }
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            ']' => return i + 1,
            _ => {}
        }
        i += 1;
    }
    chars.len()
}

#[test]
fn the_regex_check_rejects_broken_patterns() {
    assert_eq!(without_lookaround(r"(?<![a-z])x(?=[)])\1y"), "xy");
    assert!(regex::Regex::new(&without_lookaround(r"(?=a)[b")).is_err());
    assert!(regex::Regex::new(&without_lookaround(r"(a|b")).is_err());
    assert!(regex::Regex::new(&without_lookaround(r#"(")|(?<!\\)$"#)).is_ok());
}

#[test]
fn the_kdl_grammar_is_complete_and_its_regexes_compile() {
    let grammar = read_json("editors/vscode/syntaxes/kdl.tmLanguage.json");
    assert_eq!(grammar["scopeName"], "source.kdl");
    let repository_rules: BTreeSet<String> = grammar["repository"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let mut includes = BTreeSet::new();
    let mut scopes = BTreeSet::new();
    let mut regexes = Vec::new();
    // The grammar's own `name` is its display name, not a scope.
    walk_grammar(
        &grammar["patterns"],
        &mut includes,
        &mut scopes,
        &mut regexes,
    );
    walk_grammar(
        &grammar["repository"],
        &mut includes,
        &mut scopes,
        &mut regexes,
    );

    let local: BTreeSet<String> = includes
        .iter()
        .map(|i| {
            i.strip_prefix('#')
                .unwrap_or_else(|| panic!("unexpected include {i}"))
                .to_owned()
        })
        .collect();
    assert_eq!(local, repository_rules, "includes and rules differ");

    for scope in [
        "entity.name.tag.kdl",
        "entity.other.attribute-name.kdl",
        "entity.name.type.kdl",
        "string.quoted.double.kdl",
        "string.quoted.triple.kdl",
        "string.quoted.raw.kdl",
        "string.quoted.raw.triple.kdl",
        "string.unquoted.kdl",
        "constant.character.escape.kdl",
        "constant.numeric.decimal.kdl",
        "constant.numeric.integer.hexadecimal.kdl",
        "constant.numeric.integer.octal.kdl",
        "constant.numeric.integer.binary.kdl",
        "constant.language.boolean.kdl",
        "constant.language.null.kdl",
        "constant.language.numeric.kdl",
        "comment.line.double-slash.kdl",
        "comment.block.kdl",
        "comment.block.slashdash.kdl",
        "punctuation.section.block.begin.kdl",
        "punctuation.section.block.end.kdl",
        "punctuation.terminator.statement.kdl",
    ] {
        assert!(scopes.contains(scope), "no rule gives {scope}");
    }
    for scope in &scopes {
        #[expect(
            clippy::case_sensitive_file_extension_comparisons,
            reason = "a TextMate scope name, not a file name"
        )]
        let suffixed = scope.ends_with(".kdl");
        assert!(suffixed, "{scope} lacks the language suffix");
    }

    assert!(regexes.len() > 30, "only {} regexes", regexes.len());
    for pattern in &regexes {
        let stripped = without_lookaround(pattern);
        if let Err(e) = regex::Regex::new(&stripped) {
            panic!("{pattern:?} (checked as {stripped:?}) is not a valid regex: {e}");
        }
    }

    let helixflow = read_json("editors/vscode/syntaxes/helixflow.tmLanguage.json");
    assert_eq!(helixflow["scopeName"], "source.helixflow");
    assert_eq!(
        helixflow["patterns"],
        serde_json::json!([{ "include": "source.kdl" }])
    );
}

// --- Helix --------------------------------------------------------------------------------------

/// `(table, key) → value` for every key of a TOML document, parsed with tree-sitter; panics on
/// a syntax error.
fn toml_pairs(text: &str) -> Vec<(String, String, String)> {
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&tree_sitter_toml_ng::LANGUAGE.into())
        .unwrap();
    let tree = parser.parse(text, None).unwrap();
    let root = tree.root_node();
    assert!(!root.has_error(), "not valid TOML: {}", root.to_sexp());
    let source = |node: tree_sitter::Node| text[node.byte_range()].to_owned();
    let mut pairs = Vec::new();
    let mut cursor = root.walk();
    for section in root.children(&mut cursor) {
        let table = match section.kind() {
            "table" | "table_array_element" => {
                section.named_child(0).map(&source).unwrap_or_default()
            }
            _ => continue,
        };
        let mut inner = section.walk();
        for pair in section.named_children(&mut inner) {
            if pair.kind() == "pair" {
                let key = pair.named_child(0).unwrap();
                let value = pair.named_child(1).unwrap();
                pairs.push((table.clone(), source(key), source(value)));
            }
        }
    }
    pairs
}

#[test]
fn the_helix_snippet_runs_helixflow_lsp_for_pipelines() {
    let text = std::fs::read_to_string(repository().join("editors/helix/languages.toml")).unwrap();
    let pairs = toml_pairs(&text);
    let value = |table: &str, key: &str| {
        pairs
            .iter()
            .find(|(t, k, _)| t == table && k == key)
            .map_or_else(
                || panic!("no {key} in [{table}]: {pairs:#?}"),
                |(_, _, v)| v.as_str(),
            )
    };
    assert_eq!(
        value("language-server.helixflow", "command"),
        "\"helixflow\""
    );
    assert_eq!(value("language-server.helixflow", "args"), "[\"lsp\"]");
    assert_eq!(value("language", "name"), "\"helixflow\"");
    assert_eq!(value("language", "grammar"), "\"kdl\"");
    assert_eq!(value("language", "language-servers"), "[\"helixflow\"]");
    let file_types = value("language", "file-types");
    for glob in ["helixflow.kdl", "pipeline.kdl", "*.helixflow.kdl"] {
        assert!(
            file_types.contains(&format!("{{ glob = \"{glob}\" }}")),
            "{glob} missing in {file_types}"
        );
    }
    for query in ["highlights", "indents", "injections", "textobjects"] {
        let path = repository().join(format!(
            "editors/helix/runtime/queries/helixflow/{query}.scm"
        ));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.lines().any(|l| l == "; inherits: kdl"),
            "{}",
            path.display()
        );
    }
}

// --- schema/ ------------------------------------------------------------------------------------

#[test]
fn the_exported_language_table_has_every_node_context_and_rule() {
    let language = read_json("schema/language.json");

    let nodes = language["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), NODES.len());
    for (exported, node) in nodes.iter().zip(NODES) {
        assert_eq!(exported["name"], node.name);
        assert_eq!(exported["doc"], node.doc);
        assert_eq!(exported["signature"], node.signature());
        assert_eq!(exported["contexts"], serde_json::json!(node.contexts));
        assert_eq!(exported["args"].as_array().unwrap().len(), node.args.len());
        assert_eq!(
            exported["props"].as_array().unwrap().len(),
            node.props.len()
        );
    }
    // Choices travel with their types, documented.
    let verify = nodes.iter().find(|n| n["name"] == "verify").unwrap();
    let modes: Vec<&Value> = verify["args"][0]["type"]["of"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["value"])
        .collect();
    assert_eq!(modes, ["self", "external", "sub-agent", "both"]);

    let mut contexts = BTreeMap::new();
    for context in language["contexts"].as_array().unwrap() {
        contexts.insert(context["name"].as_str().unwrap(), context);
    }
    for node in NODES {
        for context in node.contexts.iter().chain(node.children.as_ref()) {
            let name = serde_json::to_value(context).unwrap();
            let exported = contexts
                .get(name.as_str().unwrap())
                .unwrap_or_else(|| panic!("context {name} is not exported"));
            let expected: Vec<&str> = schema::nodes_in(*context).map(|n| n.name).collect();
            assert_eq!(exported["nodes"], serde_json::json!(expected), "{name}");
        }
    }
    assert_eq!(contexts["vars"]["any_name"]["name"], "NAME");

    let codes: Vec<&str> = language["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = ALL_RULES.iter().map(|r| r.code).collect();
    assert_eq!(codes, expected);
}

#[test]
fn schema_check_fails_when_a_generated_file_is_stale_or_missing() {
    let test = Test::new();
    let check = test
        .with_args(&["schema", "--check", "--dir", "out"])
        .run()
        .code(1);
    assert_eq!(
        check.stderr,
        "out/pipeline.schema.json is missing; run `helixflow schema` to write it\n\
         out/language.json is missing; run `helixflow schema` to write it\n"
    );
    let written = test.with_args(&["schema", "--dir", "out"]).run().code(0);
    assert!(
        written.stderr.contains("language.json"),
        "{}",
        written.stderr
    );
    for name in ["pipeline.schema.json", "language.json"] {
        let committed = std::fs::read_to_string(repository().join("schema").join(name)).unwrap();
        assert!(
            test.read(&format!("out/{name}")) == committed,
            "schema/{name} differs from what `helixflow schema` writes; run it"
        );
    }
    test.with_args(&["schema", "--check", "--dir", "out"])
        .run()
        .code(0);

    let stale: PathBuf = test.path().join("out/language.json");
    let text = std::fs::read_to_string(&stale).unwrap();
    std::fs::write(&stale, text.replace("\"phase\"", "\"stage\"")).unwrap();
    let check = test
        .with_args(&["schema", "--check", "--dir", "out"])
        .run()
        .code(1);
    assert!(
        check.stderr.contains("language.json is stale"),
        "{}",
        check.stderr
    );
    assert!(!check.stderr.contains("pipeline.schema.json"));

    std::fs::remove_file(test.path().join("out/pipeline.schema.json")).unwrap();
    let check = test
        .with_args(&["schema", "--check", "--dir", "out"])
        .run()
        .code(1);
    assert_eq!(
        check.stderr,
        "out/pipeline.schema.json is missing; run `helixflow schema` to write it\n\
         out/language.json is stale; run `helixflow schema` to regenerate it\n"
    );
    test.with_args(&["schema", "--dir", "out"]).run().code(0);
    test.with_args(&["schema", "--check", "--dir", "out"])
        .run()
        .code(0);
}
