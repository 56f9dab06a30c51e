//! `helixflow schema`: the JSON Schema of the compiled pipeline, generated from the model types.

use std::path::PathBuf;

/// Arguments of `helixflow schema`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The folder to write into.
    #[arg(long, default_value = "schema")]
    dir: PathBuf,
    /// Only check that the files are up to date; exit 1 when they are not.
    #[arg(long)]
    check: bool,
}

/// The generated files: name and content.
pub fn generated() -> Vec<(&'static str, String)> {
    let schema = schemars::schema_for!(crate::model::Pipeline);
    let mut json = serde_json::to_string_pretty(&schema).expect("schema serializes");
    json.push('\n');
    vec![("pipeline.schema.json", json)]
}

pub(crate) fn run(args: &Args) -> i32 {
    let mut stale = false;
    for (name, content) in generated() {
        let path = args.dir.join(name);
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current == content {
            continue;
        }
        if args.check {
            eprintln!(
                "{} is stale; run `helixflow schema` to regenerate it",
                path.display()
            );
            stale = true;
        } else if let Err(e) =
            std::fs::create_dir_all(&args.dir).and_then(|()| std::fs::write(&path, content))
        {
            eprintln!("error: cannot write {}: {e}", path.display());
            return crate::exit::INTERNAL;
        } else {
            eprintln!("wrote {}", path.display());
        }
    }
    if stale {
        crate::exit::FAILURE
    } else {
        crate::exit::SUCCESS
    }
}
