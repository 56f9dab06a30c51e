// Whether a KDL document is a helixflow pipeline: it has a top-level `pipeline` node.
//
// This is a small KDL v2 scanner, not a parser: it follows exactly what decides whether a word at
// brace depth 0 starts a node (comments, slashdash, strings, raw strings, line continuations), so
// that `pipeline` inside a string, a comment, a commented-out node or a child block does not count.
// It never throws, and it stops at the first top-level `pipeline`.

const NOT_IDENTIFIER = new Set([..."\\/(){};[]\"#="]);

function isSpace(ch: string): boolean {
  return ch === " " || ch === "\t" || ch === "\uFEFF" || /\s/u.test(ch);
}

function isNewline(ch: string): boolean {
  return ch === "\n" || ch === "\r" || ch === "\u0085" || ch === "\u2028" || ch === "\u2029" || ch === "\f";
}

function isIdentifierChar(ch: string): boolean {
  return !isSpace(ch) && !NOT_IDENTIFIER.has(ch);
}

/** True when `text` has a `pipeline` node at the top level. */
export function hasPipelineNode(text: string): boolean {
  const n = text.length;
  let depth = 0;
  // Whether the next word is a node name (rather than an argument or a property).
  let atNodeStart = true;
  // Whether the node about to start is commented out with `/-`.
  let slashdashed = false;
  let i = 0;

  // Skips a quoted, multi-line or raw string starting at `start` (at `"` or `#`).
  const skipString = (start: number): number => {
    let j = start;
    let hashes = 0;
    while (text[j] === "#") {
      hashes++;
      j++;
    }
    const multiLine = text.startsWith('"""', j);
    const close = (multiLine ? '"""' : '"') + "#".repeat(hashes);
    j += multiLine ? 3 : 1;
    // Raw strings have no escapes; in quoted ones an escaped character is skipped whole.
    while (j < n && !text.startsWith(close, j)) {
      j += hashes === 0 && text[j] === "\\" ? 2 : 1;
    }
    return Math.min(j + close.length, n);
  };

  // Skips a block comment starting at `start` (at `/*`); block comments nest in KDL.
  const skipBlockComment = (start: number): number => {
    let j = start + 2;
    let nesting = 1;
    while (j < n && nesting > 0) {
      if (text.startsWith("/*", j)) {
        nesting++;
        j += 2;
      } else if (text.startsWith("*/", j)) {
        nesting--;
        j += 2;
      } else {
        j++;
      }
    }
    return j;
  };

  while (i < n) {
    const ch = text[i];
    if (isNewline(ch) || ch === ";") {
      atNodeStart = true;
      i++;
    } else if (isSpace(ch)) {
      i++;
    } else if (text.startsWith("//", i)) {
      while (i < n && !isNewline(text[i])) i++;
    } else if (text.startsWith("/*", i)) {
      i = skipBlockComment(i);
    } else if (text.startsWith("/-", i)) {
      // Before a node name it comments out the whole node (its children are deeper anyway);
      // before an argument, property or block it does not change where nodes start.
      slashdashed = slashdashed || atNodeStart;
      i += 2;
    } else if (ch === "\\") {
      // A line continuation: the next line continues this node.
      i++;
      while (i < n && isSpace(text[i]) && !isNewline(text[i])) i++;
      if (text.startsWith("//", i)) {
        while (i < n && !isNewline(text[i])) i++;
      }
      if (text[i] === "\r" && text[i + 1] === "\n") i++;
      i++;
    } else if (ch === "{" || ch === "}") {
      depth = ch === "{" ? depth + 1 : Math.max(0, depth - 1);
      atNodeStart = true;
      slashdashed = false;
      i++;
    } else if (ch === "(") {
      // A type annotation, before a node name or a value: it does not end the node start.
      const end = text.indexOf(")", i);
      i = end < 0 ? n : end + 1;
    } else if (ch === '"' || /^#+"/.test(text.slice(i, i + 256))) {
      i = skipString(i);
      atNodeStart = false;
      slashdashed = false;
    } else {
      const start = i;
      i++;
      while (i < n && isIdentifierChar(text[i])) i++;
      const isPipeline = text.slice(start, i) === "pipeline";
      if (atNodeStart && depth === 0 && !slashdashed && isPipeline) {
        return true;
      }
      atNodeStart = false;
      slashdashed = false;
    }
  }
  return false;
}
