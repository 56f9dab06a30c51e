// The bundled TextMate grammars, run by the engine VS Code itself uses (vscode-textmate with
// Oniguruma): every regex compiles, and KDL v2 text gets the scopes themes colour.

import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { before, test } from "node:test";
import * as oniguruma from "vscode-oniguruma";
import * as textmate from "vscode-textmate";

const root = path.join(__dirname, "..", "..");
const grammarFiles: Record<string, string> = {
  "source.kdl": path.join(root, "syntaxes", "kdl.tmLanguage.json"),
  "source.helixflow": path.join(root, "syntaxes", "helixflow.tmLanguage.json"),
};

let registry: textmate.Registry;

before(async () => {
  const wasm = fs.readFileSync(require.resolve("vscode-oniguruma/release/onig.wasm"));
  await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  registry = new textmate.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (patterns: string[]) => new oniguruma.OnigScanner(patterns),
      createOnigString: (text: string) => new oniguruma.OnigString(text),
    }),
    loadGrammar: async (scopeName: string) => {
      const file = grammarFiles[scopeName];
      if (file === undefined) return null;
      return textmate.parseRawGrammar(fs.readFileSync(file, "utf8"), file);
    },
  });
});

interface Token {
  text: string;
  scopes: string[];
}

async function tokenize(text: string, scopeName = "source.kdl"): Promise<Token[][]> {
  const grammar = await registry.loadGrammar(scopeName);
  assert.ok(grammar, `grammar ${scopeName} loads`);
  let state = textmate.INITIAL;
  return text.split("\n").map((line) => {
    const result = grammar.tokenizeLine(line, state);
    state = result.ruleStack;
    return result.tokens.map((t) => ({
      text: line.slice(t.startIndex, t.endIndex),
      scopes: t.scopes,
    }));
  });
}

/** The innermost scopes of the first token on `line` whose text is exactly `text`. */
function scopesOf(lines: Token[][], line: number, text: string): string[] {
  const token = lines[line].find((t) => t.text === text);
  assert.ok(token, `no token ${JSON.stringify(text)} on line ${line}: ${JSON.stringify(lines[line])}`);
  return token.scopes;
}

function assertScope(lines: Token[][], line: number, text: string, scope: string): void {
  const scopes = scopesOf(lines, line, text);
  assert.ok(
    scopes.some((s) => s === scope),
    `${JSON.stringify(text)} on line ${line} has ${scopes.join(" ")}, expected ${scope}`,
  );
}

function collectRegexes(value: unknown, out: string[]): void {
  if (Array.isArray(value)) {
    for (const item of value) collectRegexes(item, out);
  } else if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) {
      if (["match", "begin", "end", "while"].includes(key) && typeof item === "string") {
        out.push(item);
      } else {
        collectRegexes(item, out);
      }
    }
  }
}

test("every regex of the grammars compiles in Oniguruma", () => {
  for (const file of Object.values(grammarFiles)) {
    const regexes: string[] = [];
    collectRegexes(JSON.parse(fs.readFileSync(file, "utf8")), regexes);
    for (const regex of regexes) {
      // An `end` may refer to the `begin` captures, which the tokenizer substitutes first.
      const standalone = regex.replace(/\\[1-9]/g, "#");
      assert.doesNotThrow(() => new oniguruma.OnigScanner([standalone]).dispose(), regex);
    }
  }
});

test("nodes, properties, values and type annotations", async () => {
  const lines = await tokenize(
    [
      'phase "parser" use="python-module" {',
      "    retries 2; timeout (duration)\"5m\"",
      "    (meta)glob \"docs/*.md\" min=1",
      "    node 0x1F 0o17 0b1010 -3.5e+10 1_000 #true #false #null #inf #-inf #nan bare-word",
      "    bad 1.x #yes",
      "}",
    ].join("\n"),
  );
  assertScope(lines, 0, "phase", "entity.name.tag.kdl");
  assertScope(lines, 0, "parser", "string.quoted.double.kdl");
  assertScope(lines, 0, "use", "entity.other.attribute-name.kdl");
  assertScope(lines, 0, "=", "punctuation.separator.key-value.kdl");
  assertScope(lines, 0, "{", "punctuation.section.block.begin.kdl");
  assertScope(lines, 1, "retries", "entity.name.tag.kdl");
  assertScope(lines, 1, "2", "constant.numeric.decimal.kdl");
  assertScope(lines, 1, ";", "punctuation.terminator.statement.kdl");
  assertScope(lines, 1, "timeout", "entity.name.tag.kdl");
  assertScope(lines, 1, "duration", "entity.name.type.kdl");
  assertScope(lines, 2, "meta", "entity.name.type.kdl");
  assertScope(lines, 2, "glob", "entity.name.tag.kdl");
  assertScope(lines, 2, "min", "entity.other.attribute-name.kdl");
  assertScope(lines, 2, "1", "constant.numeric.decimal.kdl");
  assertScope(lines, 3, "0x1F", "constant.numeric.integer.hexadecimal.kdl");
  assertScope(lines, 3, "0o17", "constant.numeric.integer.octal.kdl");
  assertScope(lines, 3, "0b1010", "constant.numeric.integer.binary.kdl");
  assertScope(lines, 3, "-3.5e+10", "constant.numeric.decimal.kdl");
  assertScope(lines, 3, "1_000", "constant.numeric.decimal.kdl");
  assertScope(lines, 3, "#true", "constant.language.boolean.kdl");
  assertScope(lines, 3, "#false", "constant.language.boolean.kdl");
  assertScope(lines, 3, "#null", "constant.language.null.kdl");
  assertScope(lines, 3, "#inf", "constant.language.numeric.kdl");
  assertScope(lines, 3, "#-inf", "constant.language.numeric.kdl");
  assertScope(lines, 3, "#nan", "constant.language.numeric.kdl");
  assertScope(lines, 3, "bare-word", "string.unquoted.kdl");
  assertScope(lines, 4, "1.x", "invalid.illegal.number.kdl");
  assertScope(lines, 4, "#yes", "invalid.illegal.keyword.kdl");
  assertScope(lines, 5, "}", "punctuation.section.block.end.kdl");
});

test("strings: escapes, raw, multi-line and raw multi-line", async () => {
  const lines = await tokenize(
    [
      'a "tab\\t\\u{1F600} \\q"',
      'b #"raw \\n "quoted" "# ##"two"#hashes"##',
      'c """',
      "  pipeline \\s inside",
      '  """ d',
      'e #"""',
      '  "not the end"""',
      '  """#',
      "f \"unterminated",
      "g 1",
    ].join("\n"),
  );
  assertScope(lines, 0, "\\t", "constant.character.escape.kdl");
  assertScope(lines, 0, "\\u{1F600}", "constant.character.escape.kdl");
  assertScope(lines, 0, "\\q", "invalid.illegal.unrecognized-escape.kdl");
  assertScope(lines, 1, 'raw \\n "quoted" ', "string.quoted.raw.kdl");
  assertScope(lines, 1, 'two"#hashes', "string.quoted.raw.kdl");
  assertScope(lines, 3, "\\s", "constant.character.escape.kdl");
  assertScope(lines, 3, "  pipeline ", "string.quoted.triple.kdl");
  assertScope(lines, 4, "d", "string.unquoted.kdl");
  assertScope(lines, 6, '  "not the end"""', "string.quoted.raw.triple.kdl");
  assertScope(lines, 8, "unterminated", "string.quoted.double.kdl");
  // An unterminated single-line string ends with its line; the next node is still a node.
  assertScope(lines, 9, "g", "entity.name.tag.kdl");
});

test("comments: line, nested block and slashdash", async () => {
  const lines = await tokenize(
    [
      "// a comment",
      "node 1 // trailing",
      "/* outer /* inner */ still */ node2",
      "/-node3 \"gone\" {",
      "    child 1 { grandchild }",
      "}",
      "node4 /-\"gone\" /-key=\"gone\" kept /-{ gone }",
      "node5",
    ].join("\n"),
  );
  assertScope(lines, 0, "// a comment".slice(2), "comment.line.double-slash.kdl");
  assertScope(lines, 1, " trailing", "comment.line.double-slash.kdl");
  assertScope(lines, 2, " still ", "comment.block.kdl");
  assert.ok(!scopesOf(lines, 2, "node2").some((s) => s.startsWith("comment")));
  for (const [line, text] of [
    [3, "/-"],
    [4, "    child 1 "],
    [5, "}"],
  ] as const) {
    assert.ok(
      scopesOf(lines, line, text).some((s) => s.startsWith("comment.block.slashdash")),
      `line ${line}: ${JSON.stringify(lines[line])}`,
    );
  }
  assertScope(lines, 6, "node4", "entity.name.tag.kdl");
  assertScope(lines, 6, 'key="gone"', "comment.block.slashdash.kdl");
  assertScope(lines, 6, "kept", "string.unquoted.kdl");
  assertScope(lines, 6, " gone ", "comment.block.slashdash.kdl");
  assertScope(lines, 7, "node5", "entity.name.tag.kdl");
});

test("a line continuation keeps the next line's first word an argument", async () => {
  const lines = await tokenize(['command "claude" \\ // more', '    "-p" next', "other"].join("\n"));
  assertScope(lines, 0, "\\", "punctuation.separator.continuation.line.kdl");
  assertScope(lines, 1, "next", "string.unquoted.kdl");
  assertScope(lines, 2, "other", "entity.name.tag.kdl");
});

test("the helixflow grammar highlights the bundled examples as KDL", async () => {
  const examples = path.join(root, "..", "..", "examples");
  const files: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith(".kdl")) files.push(full);
    }
  };
  walk(examples);
  assert.ok(files.length >= 4, "expected the bundled examples");
  const names = new Set<string>();
  for (const file of files) {
    const lines = await tokenize(fs.readFileSync(file, "utf8"), "source.helixflow");
    for (const token of lines.flat()) {
      assert.equal(token.scopes[0], "source.helixflow", JSON.stringify(token));
      const invalid = token.scopes.some((s) => s.startsWith("invalid"));
      assert.ok(!invalid, `${file}: invalid token ${JSON.stringify(token)}`);
      if (token.scopes.includes("entity.name.tag.kdl")) names.add(token.text.trim());
    }
  }
  for (const node of ["pipeline", "import", "agent", "phase", "outputs", "gates", "verify"]) {
    assert.ok(names.has(node), `${node} is a node name; names: ${[...names].join(", ")}`);
  }
});
