//! The file an agent reads its prompt from (`{{ prompt_file }}`).
//!
//! The journal keeps the prompt redacted (`prompt.md`), but the agent must get it exactly as
//! rendered. When redaction left the prompt unchanged, the journal's copy is the agent's file; when
//! it did not, the agent gets a private temporary file (readable by the owner only, outside the
//! state folder) that is removed as soon as the attempt is over (by the watchdog, should helixflow
//! be killed first: its caller registers it there).

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::redact::Redactor;

/// Where the agent finds its prompt; keep it alive until the agent has exited.
#[derive(Debug)]
pub(crate) enum PromptFile {
    /// The journal's copy: the prompt holds no secret.
    Journal(PathBuf),
    /// A private copy of a prompt that holds a secret, removed when dropped.
    Private(tempfile::NamedTempFile),
}

impl PromptFile {
    /// Writes the journal's copy of `prompt` to `journal_copy` (redacted) and, when `needed` and
    /// redaction changed it, the agent's private copy.
    pub(crate) fn write(
        journal_copy: &Path,
        prompt: &str,
        redactor: &Redactor,
        needed: bool,
    ) -> io::Result<Self> {
        let redacted = redactor.redact(prompt);
        std::fs::write(journal_copy, &redacted)?;
        if !needed || redacted == prompt {
            return Ok(Self::Journal(journal_copy.to_path_buf()));
        }
        // `tempfile` creates the file with mode 0600 and a name no one can guess.
        let mut private = tempfile::Builder::new()
            .prefix("helixflow-prompt-")
            .suffix(".md")
            .tempfile()?;
        private.write_all(prompt.as_bytes())?;
        private.flush()?;
        Ok(Self::Private(private))
    }

    /// The path to give the agent.
    pub(crate) fn path(&self) -> &Path {
        match self {
            Self::Journal(path) => path,
            Self::Private(file) => file.path(),
        }
    }

    /// The private copy's path, when there is one: whoever supervises the agent removes it should
    /// helixflow be killed first (see `process::watchdog::cleanup_on_crash`).
    pub(crate) fn private_path(&self) -> Option<&Path> {
        match self {
            Self::Journal(_) => None,
            Self::Private(file) => Some(file.path()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_with_a_secret_reaches_the_agent_whole_and_the_journal_redacted() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("prompt.md");
        let redactor = Redactor::new([("TOKEN".to_owned(), "sekrit123".to_owned())]);

        let plain = PromptFile::write(&journal, "no secret\n", &redactor, true).unwrap();
        assert_eq!(plain.path(), journal);

        let private = PromptFile::write(&journal, "use sekrit123\n", &redactor, true).unwrap();
        assert_ne!(private.path(), journal);
        assert_eq!(
            std::fs::read_to_string(private.path()).unwrap(),
            "use sekrit123\n"
        );
        assert_eq!(
            std::fs::read_to_string(&journal).unwrap(),
            "use [REDACTED:TOKEN]\n"
        );
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(private.path()).unwrap().permissions(),
        );
        assert_eq!(mode & 0o077, 0, "readable by its owner only");
        let path = private.path().to_path_buf();
        drop(private);
        assert!(!path.exists(), "removed with the attempt");

        let unneeded = PromptFile::write(&journal, "use sekrit123\n", &redactor, false).unwrap();
        assert_eq!(unneeded.path(), journal);
    }
}
