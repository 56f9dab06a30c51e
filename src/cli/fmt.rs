//! `helixflow fmt`: canonical formatting.

use std::path::PathBuf;

use super::input;
use crate::diagnostics::{FileId, Sources, rules};
use crate::language::format::format_source;
use crate::language::kdl::parse;

/// Arguments of `helixflow fmt`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Files to format in place (default: the nearest pipeline file); `-` formats standard input
    /// to standard output.
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Write nothing; print a diff and exit 1 when a file is not formatted.
    #[arg(long)]
    check: bool,
}

pub(crate) fn run(args: &Args) -> i32 {
    let files = if args.files.is_empty() {
        match super::pipeline_path(None) {
            Ok(path) => vec![path],
            Err(e) => return input::fail(&e),
        }
    } else {
        args.files.clone()
    };
    let mut code = crate::exit::SUCCESS;
    for file in &files {
        code = code.max(format_one(file, args.check));
    }
    code
}

fn format_one(file: &PathBuf, check: bool) -> i32 {
    let read = match input::read(file, None) {
        Ok(read) => read,
        Err(e) => return input::fail(&e),
    };
    if let Err(diagnostics) = parse::parse(&read.text, FileId(0), parse::PARSE_BUDGET) {
        let mut sources = Sources::new();
        sources.add(&read.path, read.text.as_str());
        input::report(&diagnostics, &sources);
        let why = if diagnostics.iter().any(|d| d.rule == &rules::INPUT_LIMIT) {
            "is over the limits of a pipeline file"
        } else {
            "is not valid KDL"
        };
        say!("error: {} {why}; not formatted", read.path.display());
        return crate::exit::INVALID;
    }
    let formatted = format_source(&read.text);
    let stdin = file.as_os_str() == "-";
    if check {
        if formatted == read.text {
            return crate::exit::SUCCESS;
        }
        let name = read.path.display().to_string();
        let diff = similar::TextDiff::from_lines(&read.text, &formatted);
        let diff = diff
            .unified_diff()
            .context_radius(3)
            .header(&name, &format!("{name} (formatted)"))
            .to_string();
        return super::emit(&diff).max(crate::exit::FAILURE);
    }
    if stdin {
        return super::emit(&formatted);
    } else if formatted != read.text
        && let Err(e) = std::fs::write(file, &formatted)
    {
        return input::fail(&format!("cannot write {}: {e}", file.display()));
    }
    crate::exit::SUCCESS
}
