#!/usr/bin/env python3
"""False alarms of helixflow's `syntax` gate on real, valid files of every language.

Fetches real files with the registries' own clients into a cache
(${HELIXFLOW_CORPUS_CACHE:-~/.cache/helixflow-corpus}), keeps only the files the language's own
tool accepts, runs the gate over them (`cargo bench --bench syntax`) and prints, per language,
the files checked, the files the gate rejects (each one a false alarm) and why.

Sources and the tool that confirms each file:
- Rust: the .rs files of the crates in cargo's registry cache (this project's dependency tree,
  fetched by cargo), each parsed by rustc's parser through `rustfmt --edition 2024` (or 2015);
- Python: the .py files of a few packages from PyPI (`pip download`), each compiled by CPython;
- JavaScript and TypeScript: a few npm packages (`npm pack`); JavaScript checked by
  `node --check` (as a script or a module), TypeScript by the TypeScript package's own parser
  (`ts.createSourceFile`, no type checking);
- Bash: the shell scripts of Debian packages (`apt-get download`): bash completions, and files
  under the packages' bin/ and share/ folders that start with a shell `#!` line; `bash -n`;
- Go: the .go files of Debian's golang-*-dev packages; `gofmt -e` when installed (else the
  files are kept as published, and the report says so);
- JSON (`json.load`, no NaN), YAML (PyYAML's safe loader with duplicate keys refused), TOML
  (`tomllib`): the files of that kind in all of the above.

Usage: bench/corpus.py [--languages rust,python,...] [--max N] [--keep DIR]
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.environ.get("HELIXFLOW_CORPUS_CACHE", os.path.expanduser("~/.cache/helixflow-corpus"))

PYPI_PACKAGES = ["django==5.0.6", "sqlalchemy==2.0.30", "requests==2.32.3", "flask==3.0.3",
                 "pydantic==2.7.4", "rich==13.7.1", "httpx==0.27.0", "pygments==2.18.0"]
NPM_PACKAGES = ["typescript@5.4.5", "rxjs@7.8.1", "lodash@4.17.21", "@types/node@20.14.2",
                "date-fns@3.6.0", "zod@3.23.8", "vue@3.4.27", "@angular/core@17.3.11"]
DEBIAN_PACKAGES = ["bash-completion", "devscripts", "git", "dkms", "debhelper", "autoconf",
                   "libtool-bin", "ucf", "initramfs-tools-core", "console-setup", "dracut-core",
                   "live-build", "grub-common", "os-prober", "kernel-wedge",
                   "golang-golang-x-text-dev", "golang-golang-x-sys-dev",
                   "golang-github-stretchr-testify-dev", "golang-github-spf13-cobra-dev",
                   "golang-gopkg-yaml.v3-dev"]

EXTENSIONS = {
    "rust": (".rs",), "python": (".py",), "javascript": (".js", ".mjs", ".cjs"),
    "typescript": (".ts", ".mts", ".cts"), "bash": (".sh", ".bash"), "go": (".go",),
    "json": (".json",), "yaml": (".yaml", ".yml"), "toml": (".toml",),
}


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def fetch_pypi(root):
    out = os.path.join(root, "pypi")
    if not os.path.isdir(out):
        os.makedirs(out + ".part", exist_ok=True)
        run([sys.executable, "-m", "pip", "download", "--no-deps",
             "-d", out + ".part", *PYPI_PACKAGES])
        for archive in glob.glob(out + ".part/*"):
            if archive.endswith((".whl", ".zip")):
                zipfile.ZipFile(archive).extractall(archive + ".d")
            elif archive.endswith((".tar.gz", ".tgz")):
                tarfile.open(archive).extractall(archive + ".d", filter="data")
        os.rename(out + ".part", out)
    return out


def fetch_npm(root):
    out = os.path.join(root, "npm")
    if not os.path.isdir(out):
        os.makedirs(out + ".part", exist_ok=True)
        run(["npm", "pack", "--silent", *NPM_PACKAGES], cwd=out + ".part")
        for archive in glob.glob(out + ".part/*.tgz"):
            tarfile.open(archive).extractall(archive + ".d", filter="data")
        os.rename(out + ".part", out)
    return out


def fetch_debian(root):
    out = os.path.join(root, "debian")
    os.makedirs(out, exist_ok=True)
    for package in DEBIAN_PACKAGES:
        folder = os.path.join(out, package)
        if os.path.isdir(folder):
            continue
        os.makedirs(folder + ".part", exist_ok=True)
        run(["apt-get", "download", package], cwd=folder + ".part")
        for deb in glob.glob(folder + ".part/*.deb"):
            run(["dpkg-deb", "-x", deb, deb + ".d"])
        os.rename(folder + ".part", folder)
    return out


def cargo_registry():
    home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    return glob.glob(os.path.join(home, "registry", "src", "*"))


def shell_scripts(debian):
    """Debian's shell scripts, as .sh files: completions, and files starting with a sh/bash `#!`."""
    folder = os.path.join(CACHE, "shell")
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(folder + ".part", ignore_errors=True)
    os.makedirs(folder + ".part", exist_ok=True)
    count = 0
    for path in sorted(glob.glob(os.path.join(debian, "**", "*"), recursive=True)):
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        try:
            with open(path, "rb") as f:
                head = f.read(64)
        except OSError:
            continue
        completion = "/bash-completion/completions/" in path
        shebang = re.match(rb"#!\s*/(usr/)?bin/(env\s+)?(ba)?sh\b", head)
        if completion or shebang or path.endswith((".sh", ".bash")):
            count += 1
            shutil.copyfile(path, os.path.join(folder + ".part", f"{count:05}-{os.path.basename(path)}.sh"))
    os.rename(folder + ".part", folder)


def files_of(language, roots):
    found = []
    for root in roots:
        for folder, dirs, names in os.walk(root):
            dirs.sort()
            found.extend(os.path.join(folder, n) for n in sorted(names)
                         if n.endswith(EXTENSIONS[language]) and not n.endswith(".d.mts.map"))
    return [p for p in found if os.path.isfile(p) and not os.path.islink(p)]


# --- the languages' own verdicts -------------------------------------------------------------

def accepted(command, path, stdin=True):
    with open(path, "rb") as f:
        data = f.read()
    result = subprocess.run(command, input=data if stdin else None, capture_output=True)
    return result.returncode == 0


def python_ok(path):
    try:
        with open(path, "rb") as f:
            compile(f.read(), path, "exec", dont_inherit=True)
        return True
    except (SyntaxError, ValueError):
        return False


def json_ok(path):
    def no_constant(name):
        raise ValueError(name)
    try:
        with open(path, encoding="utf-8") as f:
            json.load(f, parse_constant=no_constant)
        return True
    except (ValueError, UnicodeDecodeError):
        return False


def yaml_ok(path):
    import yaml

    class Strict(yaml.SafeLoader):
        pass

    def mapping(loader, node, deep=False):
        keys = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            try:
                if key in keys:
                    raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
                keys.add(key)
            except TypeError:
                pass
        return yaml.SafeLoader.construct_mapping(loader, node, deep)

    Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                           lambda loader, node: dict(mapping(loader, node)))
    try:
        with open(path, encoding="utf-8") as f:
            list(yaml.load_all(f, Loader=Strict))
        return True
    except (yaml.YAMLError, UnicodeDecodeError, ValueError, RecursionError):
        return False


def toml_ok(path):
    import tomllib
    try:
        with open(path, "rb") as f:
            tomllib.load(f)
        return True
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return False


def rust_ok(path):
    return any(accepted(["rustfmt", "--edition", e, "--emit", "stdout", "--quiet"], path)
               for e in ("2024", "2015"))


def javascript_ok(path):
    if path.endswith(".mjs"):
        return accepted(["node", "--input-type=module", "--check", "-"], path)
    return (accepted(["node", "--check", "-"], path)
            or accepted(["node", "--input-type=module", "--check", "-"], path))


TS_CHECK = r"""
const ts = require(process.argv[1]);
const fs = require('fs');
let bad = 0;
for (const path of fs.readFileSync(0, 'utf8').split('\n').filter(Boolean)) {
  const kind = path.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS;
  const file = ts.createSourceFile(path, fs.readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, false, kind);
  if (file.parseDiagnostics.length) { console.log(path); bad++; }
}
"""


def typescript_rejects(paths, npm_root):
    """The TypeScript package's own parser on each file; the paths it rejects."""
    found = glob.glob(os.path.join(npm_root, "typescript-*", "package", "lib", "typescript.js"))
    if not found:
        return None
    result = subprocess.run(["node", "-e", TS_CHECK, found[0]], input="\n".join(paths),
                            capture_output=True, text=True)
    return set(result.stdout.split("\n")) - {""}


def gofmt():
    """gofmt on PATH, or Debian's (golang-1.NN-go installs it under /usr/lib/go-1.NN/bin)."""
    return shutil.which("gofmt") or next(iter(sorted(glob.glob("/usr/lib/go-*/bin/gofmt"))), None)


def go_ok(path):
    return accepted([gofmt(), "-e", path], path, stdin=False)


# --- the gate ---------------------------------------------------------------------------------

def gate(paths, work, name):
    list_path = os.path.join(work, f"{name}-files.txt")
    out = os.path.join(work, f"{name}-invalid.txt")
    with open(list_path, "w", encoding="utf-8") as f:
        f.write("".join(p + "\n" for p in paths))
    result = run(["cargo", "bench", "--quiet", "--bench", "syntax", "--", list_path, out], cwd=REPO)
    if result.returncode != 0:
        sys.exit(f"cargo bench --bench syntax failed:\n{result.stdout}\n{result.stderr}")
    seconds = re.search(r"seconds=([0-9.]+)", result.stdout)
    rejected = {}
    with open(out, encoding="utf-8") as f:
        for line in f:
            path, _, message = line.rstrip("\n").partition("\t")
            rejected[path] = message
    return rejected, float(seconds.group(1)) if seconds else 0.0


def judged_with_cache(language, paths, judge):
    """The files `judge` accepts; verdicts are kept in the cache by path, size and time, as the
    tools take minutes over thousands of files."""
    cache_path = os.path.join(CACHE, f"verdicts-{language}.json")
    try:
        with open(cache_path, encoding="utf-8") as f:
            cache = json.load(f)
    except (OSError, ValueError):
        cache = {}
    valid = []
    for path in paths:
        stat = os.stat(path)
        key = f"{path}|{stat.st_size}|{int(stat.st_mtime)}"
        if key not in cache:
            cache[key] = bool(judge(path))
        if cache[key]:
            valid.append(path)
    with open(cache_path, "w", encoding="utf-8") as f:
        json.dump(cache, f)
    return valid


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--languages", default=",".join(EXTENSIONS))
    parser.add_argument("--max", type=int, default=5000, help="at most this many files per language")
    parser.add_argument("--keep", help="keep the file lists and verdicts here")
    args = parser.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="helixflow-corpus-")
    os.makedirs(work, exist_ok=True)
    os.makedirs(CACHE, exist_ok=True)
    languages = args.languages.split(",")
    subprocess.run(["cargo", "bench", "--quiet", "--bench", "syntax", "--no-run"], cwd=REPO, check=True)

    pypi = fetch_pypi(CACHE) if {"python", "json", "yaml", "toml"} & set(languages) else None
    npm = fetch_npm(CACHE) if {"javascript", "typescript", "json", "yaml"} & set(languages) else None
    debian = fetch_debian(CACHE) if {"bash", "go", "json", "yaml"} & set(languages) else None
    if debian:
        shell_scripts(debian)
    crates = cargo_registry()
    roots = {
        "rust": crates,
        "python": [pypi],
        "javascript": [npm],
        "typescript": [npm],
        "bash": [os.path.join(CACHE, "shell")],
        "go": [debian],
        "json": [r for r in (npm, pypi, debian, *crates) if r],
        "yaml": [r for r in (pypi, debian, npm, *crates) if r],
        "toml": [r for r in (pypi, debian, *crates) if r],
    }
    judges = {"rust": rust_ok, "python": python_ok, "javascript": javascript_ok, "bash": None,
              "json": json_ok, "yaml": yaml_ok, "toml": toml_ok,
              "go": go_ok if gofmt() else None}
    summary = {}
    for language in languages:
        paths = files_of(language, [r for r in roots[language] if r])[: args.max]
        if language == "typescript":
            rejected_by_tool = typescript_rejects(paths, npm)
            judged = "TypeScript's parser" if rejected_by_tool is not None else "not judged"
            valid = [p for p in paths if p not in (rejected_by_tool or set())]
        elif language == "bash":
            valid = judged_with_cache(language, paths, lambda p: accepted(["bash", "-n"], p))
            judged = "bash -n"
        elif judges.get(language):
            valid = judged_with_cache(language, paths, judges[language])
            judged = judges[language].__name__
        else:
            valid, judged = paths, "not judged (no tool installed)"
        rejected, seconds = gate(valid, work, language) if valid else ({}, 0.0)
        summary[language] = {"found": len(paths), "valid": len(valid), "judge": judged,
                             "gate_rejects": len(rejected), "seconds": seconds,
                             "false_alarms": rejected}
        print(f"{language}: {len(paths)} files found, {len(valid)} accepted by {judged}; "
              f"the gate rejects {len(rejected)} ({seconds:.2f} s)")
        for path, message in sorted(rejected.items()):
            print(f"  {path}\n    {message}")
    with open(os.path.join(work, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
