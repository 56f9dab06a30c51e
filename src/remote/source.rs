//! What a remote import names: a repository, in a URL git itself speaks, and a file in it.
//! `git+https://github.com/acme/lib.git//agents.kdl`: the scheme prefixed with `git+`, the
//! repository, `//`, the file's path inside the repository.

use std::fmt;

/// The prefix that makes an import remote.
pub(crate) const PREFIX: &str = "git+";

/// The schemes git speaks that a remote import may use, after `git+`.
const SCHEMES: &[&str] = &["https://", "ssh://", "file://", "git://"];

/// Whether an import's text names a file in a repository rather than a file on disk.
pub(crate) fn is_remote(import: &str) -> bool {
    import.starts_with(PREFIX)
}

/// A file in a repository.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Source {
    /// The repository as written, `git+` included: `git+https://github.com/acme/lib.git`.
    pub repository: String,
    /// The file's path in the repository, `/`-separated, without `.` or `..`: `python/t.kdl`.
    pub path: String,
}

impl Source {
    /// Reads `git+SCHEME://…//PATH`; the error says what is wrong, for a person.
    pub(crate) fn parse(text: &str) -> Result<Source, String> {
        let Some(url) = text.strip_prefix(PREFIX) else {
            return Err(format!("a remote import starts with `{PREFIX}`"));
        };
        if let Some(c) = text.chars().find(|c| c.is_control() || c.is_whitespace()) {
            return Err(format!(
                "a remote import has no spaces or control characters (found {c:?})"
            ));
        }
        let Some(scheme) = SCHEMES.iter().find(|s| url.starts_with(**s)) else {
            let written = url.split("://").next().unwrap_or(url);
            return Err(format!(
                "`git+{written}` is not a scheme helixflow fetches with: use git+https://, git+ssh://, git+file:// or git+git://"
            ));
        };
        let rest = &url[scheme.len()..];
        // The first `//` after the scheme's own ends the repository (a `file://` URL's path
        // starts with `/`, so its `//` is searched after that one).
        let start = usize::from(*scheme == "file://" && rest.starts_with('/'));
        let Some(at) = rest[start..].find("//").map(|i| i + start) else {
            return Err(
                "no file named: write the repository, then `//` and the file's path inside it (`…/lib.git//agents.kdl`)"
                    .to_owned(),
            );
        };
        let (repository, path) = (&rest[..at], &rest[at + 2..]);
        check_repository(scheme, repository)?;
        let path = clean_path(path)?;
        Ok(Source {
            repository: format!("{PREFIX}{scheme}{repository}"),
            path,
        })
    }

    /// The repository's URL as git takes it (without `git+`).
    pub(crate) fn git_url(&self) -> &str {
        self.repository
            .strip_prefix(PREFIX)
            .unwrap_or(&self.repository)
    }

    /// The file `relative` names from this one's folder, in the same repository; an error when it
    /// leaves the repository.
    pub(crate) fn sibling(&self, relative: &str) -> Result<Source, String> {
        if relative.starts_with('/') {
            return Err(format!(
                "`{relative}` is an absolute path: an import inside a repository is relative to the importing file"
            ));
        }
        let folder = self.path.rsplit_once('/').map_or("", |(folder, _)| folder);
        let joined = if folder.is_empty() {
            relative.to_owned()
        } else {
            format!("{folder}/{relative}")
        };
        let path = clean_path(&joined)
            .map_err(|_| format!("`{relative}` leaves the repository {}", self.repository))?;
        Ok(Source {
            repository: self.repository.clone(),
            path,
        })
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}//{}", self.repository, self.path)
    }
}

fn check_repository(scheme: &str, repository: &str) -> Result<(), String> {
    if repository.is_empty() || repository == "/" {
        return Err("no repository before `//`".to_owned());
    }
    if scheme == "file://" {
        if !repository.starts_with('/') {
            return Err(
                "a git+file:// repository is an absolute path: git+file:///srv/git/lib.git//agents.kdl"
                    .to_owned(),
            );
        }
        return Ok(());
    }
    // A host that starts with `-` would reach ssh as an option.
    let host = repository.rsplit_once('@').map_or(repository, |(_, h)| h);
    if host.starts_with('-') || repository.starts_with('-') {
        return Err("a host name does not start with `-`".to_owned());
    }
    if !repository.contains('/') {
        return Err(format!(
            "`{repository}` names a host but no repository on it"
        ));
    }
    Ok(())
}

/// A file's path in a repository, `.` segments removed; an error for an empty path, a `..` that
/// leaves the repository, or a `.git` folder.
fn clean_path(path: &str) -> Result<String, String> {
    let mut parts: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(format!("`{path}` leaves the repository"));
                }
            }
            ".git" => return Err("a file in `.git` is not part of a commit".to_owned()),
            other => parts.push(other),
        }
    }
    if parts.is_empty() {
        return Err("no file named after `//`".to_owned());
    }
    if path.contains('\\') {
        return Err("a path in a repository is written with `/`".to_owned());
    }
    Ok(parts.join("/"))
}

/// Whether `rev` can be a tag, a branch or a commit: what `git check-ref-format` accepts, and
/// never an option for git (`-…`). The error says why not.
pub(crate) fn check_rev(rev: &str) -> Result<(), String> {
    if rev.is_empty() {
        return Err("`rev` is empty: give a tag, a branch or a full commit SHA".to_owned());
    }
    if rev.starts_with('-') || rev.starts_with('/') || rev.ends_with('/') || rev.ends_with('.') {
        return Err(format!("`{rev}` cannot be a tag, a branch or a commit"));
    }
    let bad = |c: char| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c);
    if rev.chars().any(bad) || rev.contains("..") || rev.contains("@{") || rev.contains("//") {
        return Err(format!(
            "`{rev}` cannot be a tag, a branch or a commit (git refuses spaces, `~^:?*[\\`, `..` and `@{{` in names)"
        ));
    }
    Ok(())
}

/// Whether `rev` is a full commit id (SHA-1, or SHA-256 for repositories that use it).
pub(crate) fn is_full_sha(rev: &str) -> bool {
    matches!(rev.len(), 40 | 64) && rev.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_repository_and_the_file() {
        let s = Source::parse("git+https://github.com/acme/lib.git//python/t.kdl").unwrap();
        assert_eq!(s.repository, "git+https://github.com/acme/lib.git");
        assert_eq!(s.path, "python/t.kdl");
        assert_eq!(s.git_url(), "https://github.com/acme/lib.git");
        let f = Source::parse("git+file:///srv/git/lib.git//./agents.kdl").unwrap();
        assert_eq!(f.repository, "git+file:///srv/git/lib.git");
        assert_eq!(f.path, "agents.kdl");
        let ssh = Source::parse("git+ssh://git@github.com/acme/lib.git//a.kdl").unwrap();
        assert_eq!(ssh.git_url(), "ssh://git@github.com/acme/lib.git");
        assert_eq!(
            ssh.to_string(),
            "git+ssh://git@github.com/acme/lib.git//a.kdl"
        );
    }

    #[test]
    fn refuses_what_git_should_not_see() {
        for bad in [
            "git+ftp://host/lib.git//a.kdl",
            "git+https://host/lib.git",
            "git+https://host/lib.git//",
            "git+https://host/lib.git//../a.kdl",
            "git+https://host/lib.git//.git/config",
            "git+file://srv/lib.git//a.kdl",
            "git+ssh://-oProxyCommand=x/lib.git//a.kdl",
            "git+https://host//a.kdl",
            "git+https://host/lib.git//a b.kdl",
        ] {
            assert!(Source::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_sibling_stays_in_the_repository() {
        let s = Source::parse("git+file:///r.git//python/t.kdl").unwrap();
        assert_eq!(s.sibling("common.kdl").unwrap().path, "python/common.kdl");
        assert_eq!(s.sibling("../agents.kdl").unwrap().path, "agents.kdl");
        assert!(s.sibling("../../x.kdl").is_err());
        assert!(s.sibling("/etc/x.kdl").is_err());
    }

    #[test]
    fn revs_are_names_git_accepts() {
        for good in ["v1.4.0", "main", "release/2", &"a".repeat(40)] {
            assert!(check_rev(good).is_ok(), "{good}");
        }
        for bad in ["", "-u", "a..b", "a b", "x^", "@{1}", "a/"] {
            assert!(check_rev(bad).is_err(), "{bad}");
        }
        assert!(is_full_sha(&"0f".repeat(20)));
        assert!(!is_full_sha("3f2c1a9"));
    }
}
