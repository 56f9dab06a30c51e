// The helixflow extension: runs `helixflow lsp` for pipeline files.
//
// Pipeline files are the `helixflow` language: `helixflow.kdl`, `pipeline.kdl` and
// `*.helixflow.kdl` by name (see package.json), and any other KDL file whose text has a top-level
// `pipeline` node, which is switched to `helixflow` when it is opened or saved. The language client
// serves only the `helixflow` language, so other KDL files never reach the server.

import * as os from "node:os";
import * as path from "node:path";
import * as vscode from "vscode";
import {
  LanguageClient,
  type LanguageClientOptions,
  type ServerOptions,
  TransportKind,
} from "vscode-languageclient/node";

import { hasPipelineNode } from "./detect";

const LANGUAGE = "helixflow";

let client: LanguageClient | undefined;
// The binary that failed to start, so that every pipeline opened afterwards does not repeat the
// error; changing `helixflow.path` or restarting tries again.
let failedBinary: string | undefined;
let output: vscode.OutputChannel | undefined;

export function activate(context: vscode.ExtensionContext): void {
  output = vscode.window.createOutputChannel("helixflow");
  context.subscriptions.push(output);

  const claim = (document: vscode.TextDocument): void => {
    void claimDocument(document);
  };
  context.subscriptions.push(
    vscode.workspace.onDidOpenTextDocument(claim),
    vscode.workspace.onDidSaveTextDocument(claim),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration("helixflow.path")) {
        void restart();
      }
    }),
    vscode.commands.registerCommand("helixflow.restartServer", restart),
    vscode.commands.registerCommand("helixflow.showOutput", () => output?.show(true)),
  );
  for (const document of vscode.workspace.textDocuments) {
    claim(document);
  }
}

export function deactivate(): Thenable<void> | undefined {
  const running = client;
  client = undefined;
  return running?.stop();
}

/** Switches a KDL pipeline to the helixflow language, and starts the server for pipelines. */
async function claimDocument(document: vscode.TextDocument): Promise<void> {
  if (document.languageId === "kdl" && hasPipelineNode(document.getText())) {
    // Reopens the document as `helixflow`; the open event that follows starts the server.
    await vscode.languages.setTextDocumentLanguage(document, LANGUAGE);
    return;
  }
  if (document.languageId === LANGUAGE && client === undefined && failedBinary === undefined) {
    await start();
  }
}

async function start(): Promise<void> {
  const command = resolveBinary(
    vscode.workspace.getConfiguration("helixflow").get<string>("path", "helixflow"),
  );
  const serverOptions: ServerOptions = {
    command,
    args: ["lsp"],
    transport: TransportKind.stdio,
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { scheme: "file", language: LANGUAGE },
      { scheme: "untitled", language: LANGUAGE },
    ],
    outputChannel: output,
    // The trace level comes from the `helixflow.trace.server` setting (the client's id).
    traceOutputChannel: output,
  };
  const created = new LanguageClient(LANGUAGE, "helixflow", serverOptions, clientOptions);
  client = created;
  try {
    await created.start();
  } catch (error) {
    client = undefined;
    failedBinary = command;
    const message = error instanceof Error ? error.message : String(error);
    const choice = await vscode.window.showErrorMessage(
      `helixflow: cannot start \`${command} lsp\` (${message}). Install helixflow, or set "helixflow.path" to the binary.`,
      "Open Settings",
    );
    if (choice === "Open Settings") {
      await vscode.commands.executeCommand("workbench.action.openSettings", "helixflow.path");
    }
  }
}

async function restart(): Promise<void> {
  const running = client;
  client = undefined;
  failedBinary = undefined;
  if (running !== undefined) {
    await running.stop().catch(() => undefined);
  }
  if (vscode.workspace.textDocuments.some((d) => d.languageId === LANGUAGE)) {
    await start();
  }
}

/** The binary to run: `~` expanded, and a relative path with a folder resolved in the workspace. */
function resolveBinary(configured: string): string {
  let binary = configured.trim() || "helixflow";
  if (binary === "~" || binary.startsWith("~/")) {
    binary = path.join(os.homedir(), binary.slice(1));
  }
  const folder = vscode.workspace.workspaceFolders?.[0];
  if (!path.isAbsolute(binary) && /[\\/]/.test(binary) && folder !== undefined) {
    binary = path.join(folder.uri.fsPath, binary);
  }
  return binary;
}
