// The pipeline-node check that decides which KDL files the extension serves.

import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";

import { hasPipelineNode } from "../src/detect";

const repository = path.join(__dirname, "..", "..", "..", "..");

interface Cases {
  pipelines: string[];
  not_pipelines: string[];
}

// The cases the Neovim setup is tested with as well (tests/cli/editors.rs).
const cases: Cases = JSON.parse(
  fs.readFileSync(path.join(repository, "editors", "test-cases", "pipeline-node.json"), "utf8"),
);

test("a top-level pipeline node makes a KDL file a pipeline", () => {
  assert.ok(cases.pipelines.length > 0);
  for (const text of cases.pipelines) {
    assert.equal(hasPipelineNode(text), true, JSON.stringify(text));
  }
  // VS Code keeps a byte order mark in the text; Neovim strips it.
  assert.equal(hasPipelineNode('\uFEFFpipeline "demo"'), true);
});

test("pipeline elsewhere than a top-level node name does not count", () => {
  assert.ok(cases.not_pipelines.length > 0);
  for (const text of cases.not_pipelines) {
    assert.equal(hasPipelineNode(text), false, JSON.stringify(text));
  }
});

test("every bundled example pipeline is detected, and imported libraries are not", () => {
  const files: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith(".kdl")) files.push(full);
    }
  };
  walk(path.join(repository, "examples"));
  assert.ok(files.length >= 4, "expected the bundled examples");
  for (const file of files) {
    const expected = path.basename(file) === "pipeline.kdl";
    assert.equal(hasPipelineNode(fs.readFileSync(file, "utf8")), expected, file);
  }
});
