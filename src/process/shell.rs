//! Shell commands that need no shell.
//!
//! `run` steps, gate commands, fixes and `escalate` are shell commands (`sh -c COMMAND`). Many are
//! a plain list of words, like `cargo fmt --check` or `true`, for which the shell only looks the
//! program up on `PATH` and replaces itself with it. Such a command is started directly, as GNU
//! make does: the same program, arguments, environment, working directory and process group, minus
//! the cost of starting a shell first (about 0.15 ms of CPU per command here, a tenth of what a
//! short step costs in all). Anything the shell would interpret goes to the shell, and so does a
//! command whose program is not found or cannot be started, so that the shell reports it in its own
//! words and with its own exit code (127, 126).

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Words the shell gives a meaning of its own at the start of a command: keywords, built-ins that
/// change or read the shell's state (`cd`, `export`, `exit`, `read`, `wait`, ...), and built-ins
/// whose shell versions differ from the programs of the same name (`echo`, `printf`, `pwd`,
/// `kill`).
const SHELL_WORDS: &[&str] = &[
    "!", ".", ":", "[", "[[", "alias", "bg", "break", "case", "cd", "chdir", "command", "continue",
    "declare", "do", "done", "echo", "elif", "else", "esac", "eval", "exec", "exit", "export",
    "fc", "fg", "fi", "for", "function", "getopts", "hash", "if", "in", "jobs", "kill", "let",
    "local", "printf", "pwd", "read", "readonly", "return", "select", "set", "shift", "source",
    "then", "time", "times", "trap", "type", "typeset", "ulimit", "umask", "unalias", "unset",
    "until", "wait", "while", "{", "}",
];

/// The words of `command` when it has no shell syntax at all: words of letters, digits and
/// `-_./,:+@%=` separated by spaces or tabs, the first without `=` (an assignment) or `/` (a
/// path, which the shell resolves against the working directory) and not one of
/// [`SHELL_WORDS`]. `None` for anything else, including quotes, variables, globs, `~`,
/// redirections, pipes, separators, comments and newlines.
pub(crate) fn plain_words(command: &str) -> Option<Vec<&str>> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./,:+@%=".contains(c);
    let words: Vec<&str> = command
        .split([' ', '\t'])
        .filter(|w| !w.is_empty())
        .collect();
    let first = words.first()?;
    if !words.iter().all(|word| word.chars().all(plain))
        || first.contains(['=', '/'])
        || SHELL_WORDS.contains(first)
    {
        return None;
    }
    Some(words)
}

/// Where the shell would find `program` on `path` (a `PATH` value): the first folder holding an
/// executable file of that name. `None` when it is not found, and when `path` has an empty or
/// relative entry before it (the shell would look in its working directory there).
pub(crate) fn find_program(program: &str, path: &OsStr) -> Option<PathBuf> {
    let mut tried: Vec<PathBuf> = Vec::new();
    for folder in std::env::split_paths(path) {
        if !folder.is_absolute() {
            return None;
        }
        // A folder listed twice answers the same the second time.
        if tried.contains(&folder) {
            continue;
        }
        let candidate = folder.join(program);
        if is_executable_file(&candidate) {
            return Some(candidate);
        }
        tried.push(folder);
    }
    None
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_commands_are_split_into_words() {
        assert_eq!(plain_words("true"), Some(vec!["true"]));
        assert_eq!(
            plain_words("cargo  fmt\t--check"),
            Some(vec!["cargo", "fmt", "--check"])
        );
        assert_eq!(
            plain_words("make -j4 CC=gcc src/a.o"),
            Some(vec!["make", "-j4", "CC=gcc", "src/a.o"])
        );
    }

    #[test]
    fn anything_the_shell_interprets_goes_to_the_shell() {
        for command in [
            "",
            "   ",
            "echo hi",
            "cd src",
            "exit 3",
            "FOO=1 make",
            "./build.sh",
            "bin/tool",
            "ls *.rs",
            "ls ~",
            "echo $HOME",
            "a && b",
            "a; b",
            "a | b",
            "a > out",
            "a < in",
            "a &",
            "a # comment",
            "printf 'x'",
            "grep \"a b\"",
            "a\\ b",
            "a\nb",
            "cat `x`",
            "(a)",
            "{ a; }",
            "if true",
            "kill 1",
            "[ -f x ]",
            "tr a-z [A-Z]",
            "!x",
            "a^b",
        ] {
            assert_eq!(plain_words(command), None, "{command:?}");
        }
    }

    #[test]
    fn programs_are_found_as_the_shell_finds_them() {
        let dir = tempfile::tempdir().unwrap();
        let first = dir.path().join("first");
        let second = dir.path().join("second");
        std::fs::create_dir_all(&first).unwrap();
        std::fs::create_dir_all(&second).unwrap();
        let write = |path: &Path, mode: u32| {
            std::fs::write(path, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        write(&first.join("tool"), 0o644);
        write(&second.join("tool"), 0o755);
        std::fs::create_dir(first.join("dir")).unwrap();
        let path = std::env::join_paths([&first, &second]).unwrap();
        // Not executable in the first folder: the second one's.
        assert_eq!(find_program("tool", &path), Some(second.join("tool")));
        // A folder is not a program.
        assert_eq!(find_program("dir", &path), None);
        assert_eq!(find_program("missing", &path), None);
        // A relative entry before it: left to the shell.
        let relative = std::env::join_paths([Path::new("bin"), &second]).unwrap();
        assert_eq!(find_program("tool", &relative), None);
        let empty = OsStr::new(":/usr/bin");
        assert_eq!(find_program("tool", empty), None);
        // A folder listed twice is searched once, and the order still decides.
        let twice = std::env::join_paths([&first, &first, &second, &first]).unwrap();
        assert_eq!(find_program("tool", &twice), Some(second.join("tool")));
    }
}
