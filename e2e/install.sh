#!/usr/bin/env bash
# Installs the four agent CLIs the end-to-end suite drives, at the versions the presets are tested
# with, into a cache folder reused between runs (HELIXFLOW_E2E_CACHE, default
# ~/.cache/helixflow-e2e). Prints the folder whose bin/ holds claude, codex, gemini and aider.
# Installs nothing that is already there at the pinned version.
set -euo pipefail

CLAUDE_VERSION=2.1.331
CODEX_VERSION=0.169.0
GEMINI_VERSION=0.61.0
AIDER_VERSION=0.86.2

cache=${HELIXFLOW_E2E_CACHE:-$HOME/.cache/helixflow-e2e}
mkdir -p "$cache/bin"
log() { echo "e2e/install.sh: $*" >&2; }

npm_cli() { # package version binary
    local package=$1 version=$2 binary=$3
    local prefix="$cache/npm/$binary-$version"
    if [ ! -x "$prefix/node_modules/.bin/$binary" ]; then
        log "installing $package@$version"
        rm -rf "$prefix.partial"
        mkdir -p "$prefix.partial"
        (cd "$prefix.partial" &&
            npm install --no-audit --no-fund --loglevel=error --prefix . "$package@$version" >&2)
        rm -rf "$prefix"
        mv "$prefix.partial" "$prefix"
    fi
    ln -sfn "$prefix/node_modules/.bin/$binary" "$cache/bin/$binary"
}

npm_cli @anthropic-ai/claude-code "$CLAUDE_VERSION" claude
npm_cli @openai/codex "$CODEX_VERSION" codex
npm_cli @google/gemini-cli "$GEMINI_VERSION" gemini

venv="$cache/aider-$AIDER_VERSION"
# A venv's scripts name their interpreter by absolute path, so it is built where it lives; the
# marker is written last, so an interrupted install is redone.
if [ ! -e "$venv/.installed" ]; then
    log "installing aider-chat==$AIDER_VERSION"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "aider-chat==$AIDER_VERSION" >&2
    touch "$venv/.installed"
fi
ln -sfn "$venv/bin/aider" "$cache/bin/aider"

echo "$cache"
