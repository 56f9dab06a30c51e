//! `helixflow export github-actions`: a pipeline as a GitHub Actions workflow, one job per phase.
//!
//! Each phase's job checks out the repository, installs helixflow, downloads the bundles of every
//! phase it depends on (directly or not) and applies them in dependency order, runs the `--setup`
//! commands (the agent's CLI, the project's test dependencies), runs the phase with
//! `helixflow run --only PHASE --force --locked` (verification and retries happen inside the job;
//! remote imports at the commits the committed `helixflow.lock` pins, never another), and
//! uploads its bundle, its run folder (the journal) and its `JUnit` report as artifacts. A last job
//! applies every passing phase's bundle (the pipeline's result), joins the journals into one run
//! (`helixflow runs merge`) and publishes the `JUnit` report, the HTML report (linked from the
//! job's summary) and the summary.
//!
//! Nothing the pipeline's author wrote reaches a shell: phase names go into the workflow as YAML
//! strings and environment values, and into file and artifact names only as [`folder_name`]s.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::failure::{Failure, Outcome};
use super::input;
use crate::graph::PhaseGraph;
use crate::model::Pipeline;
use crate::store::run::folder_name;

/// Arguments of `helixflow export`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Write a GitHub Actions workflow that runs the pipeline, one job per phase.
    ///
    /// Jobs follow the DAG with `needs:`; each applies the bundles of the phases it depends on,
    /// runs its phase with `helixflow run --only PHASE --force --locked` (remote imports at the
    /// commits of the committed helixflow.lock), and uploads its bundle, run
    /// folder and `JUnit` report as artifacts. A last job applies every bundle, joins the journals
    /// with `helixflow runs merge` and publishes the `JUnit` report. The pipeline's `secret`
    /// variables come from the repository's secrets of the same name; name more (the agents' API
    /// keys) with `--secret`. helixflow is installed with `cargo install --locked --git URL`
    /// (`--git`, `--rev`), or by the command given with `--install`; what the phases need besides
    /// (the agent's CLI, the project's test dependencies) by the commands given with `--setup`.
    GithubActions(GithubArgs),
}

#[derive(Debug, clap::Args)]
struct GithubArgs {
    /// The pipeline file (default: helixflow.kdl or pipeline.kdl here or in a parent folder).
    file: Option<PathBuf>,
    /// Write the workflow to this file (e.g. `.github/workflows/helixflow.yml`) instead of
    /// standard output.
    #[arg(long, short = 'o', value_name = "PATH")]
    output: Option<PathBuf>,
    /// A repository secret each phase's job gets as an environment variable: `NAME` (the
    /// variable and the secret have one name) or `VARIABLE=SECRET`. Repeat for more, e.g.
    /// `--secret ANTHROPIC_API_KEY`.
    #[arg(long, value_name = "NAME")]
    secret: Vec<String>,
    /// The git repository helixflow is installed from (`cargo install --locked --git URL`).
    #[arg(long, value_name = "URL", default_value = DEFAULT_GIT)]
    git: String,
    /// The revision (tag, branch or commit) of `--git` to install.
    #[arg(long, value_name = "REV")]
    rev: Option<String>,
    /// A shell command that installs helixflow instead of `cargo install` (e.g. one that
    /// downloads a release binary into a folder on PATH).
    #[arg(long, value_name = "COMMAND", conflicts_with_all = ["git", "rev"])]
    install: Option<String>,
    /// A shell command each phase's job runs in the workspace before its phase, once the
    /// bundles it depends on are applied: what the agents and gates need that the runner lacks,
    /// e.g. `--setup 'npm install -g @anthropic-ai/claude-code'` for the agent's CLI and
    /// `--setup 'python3 -m pip install -r requirements.txt'` for the tests. Repeat for more; they
    /// run in the order given.
    #[arg(long, value_name = "COMMAND")]
    setup: Vec<String>,
    /// The runner's label.
    #[arg(long, value_name = "LABEL", default_value = "ubuntu-latest")]
    runs_on: String,
}

/// Where helixflow is installed from when `--git` is not given.
const DEFAULT_GIT: &str = "https://github.com/helixflow/helixflow";

pub(crate) fn run(args: &Args) -> Outcome {
    let Command::GithubActions(args) = &args.command;
    let (_, pipeline) =
        input::checked_pipeline(args.file.clone(), &super::imports::ImportArgs::default())?;
    let secrets = secrets(&pipeline, &args.secret)?;
    let paths = RepoPaths::of(&pipeline)?;
    let install = Install {
        git: &args.git,
        rev: args.rev.as_deref(),
        command: args.install.as_deref(),
        setup: &args.setup,
    };
    let Some(workflow) = github_actions(&pipeline, &paths, &secrets, &install, &args.runs_on)
    else {
        return Err(Failure::usage(
            "the phases depend on each other in a cycle (`helixflow lint` shows it)",
        ));
    };
    match &args.output {
        None => super::emit(&workflow),
        Some(path) => {
            let written = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(path, &workflow));
            written
                .map(|()| crate::exit::SUCCESS)
                .map_err(|e| Failure::internal(format!("cannot write {}: {e}", path.display())))
        }
    }
}

/// The environment variables each phase's job takes from secrets: the pipeline's `secret`
/// names, then those of `--secret`, as (variable, secret) pairs.
fn secrets(pipeline: &Pipeline, extra: &[String]) -> Result<Vec<(String, String)>, String> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    let given = pipeline
        .secrets
        .iter()
        .map(|name| (name.clone(), name.clone()));
    let asked = extra.iter().map(|spec| match spec.split_once('=') {
        Some((variable, secret)) => (variable.to_owned(), secret.to_owned()),
        None => (spec.clone(), spec.clone()),
    });
    for (variable, secret) in given.chain(asked) {
        if !is_identifier(&variable) {
            return Err(format!(
                "--secret: \"{variable}\" is not an environment variable name (letters, digits and _, not first a digit)"
            ));
        }
        if !is_identifier(&secret) || secret.to_ascii_uppercase().starts_with("GITHUB_") {
            return Err(format!(
                "--secret: \"{secret}\" cannot name a GitHub secret (letters, digits and _, not first a digit, not starting with GITHUB_)"
            ));
        }
        if !pairs.iter().any(|(v, _)| *v == variable) {
            pairs.push((variable, secret));
        }
    }
    Ok(pairs)
}

fn is_identifier(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The paths a job uses, relative to the repository's root (where `actions/checkout` puts it).
struct RepoPaths {
    /// The pipeline file.
    file: String,
    /// The workspace (`.` at the root).
    workspace: String,
    /// The state folder's `runs/`.
    runs: String,
}

impl RepoPaths {
    fn of(pipeline: &Pipeline) -> Result<RepoPaths, String> {
        let absolute = |path: &Path| {
            std::path::absolute(path)
                .map(|p| crate::language::loader::normalize(Path::new("/"), &p))
                .map_err(|e| format!("cannot resolve {}: {e}", path.display()))
        };
        let file = absolute(&pipeline.file)?;
        let workspace = absolute(&pipeline.workspace)?;
        let root = workspace
            .ancestors()
            .find(|dir| dir.join(".git").exists())
            .ok_or_else(|| {
                format!(
                    "{} is not in a git repository: a workflow runs on a checkout of one",
                    workspace.display()
                )
            })?
            .to_owned();
        let relative = |path: &Path| -> Result<String, String> {
            let rel = path.strip_prefix(&root).map_err(|_| {
                format!(
                    "{} is outside the repository {}",
                    path.display(),
                    root.display()
                )
            })?;
            let text = rel.to_string_lossy().replace('\\', "/");
            if !text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
            {
                return Err(format!(
                    "{} has characters a workflow's paths are not given here (letters, digits, -, _, ., /)",
                    rel.display()
                ));
            }
            Ok(if text.is_empty() {
                ".".to_owned()
            } else {
                text
            })
        };
        Ok(RepoPaths {
            file: relative(&file)?,
            workspace: relative(&workspace)?,
            runs: relative(&workspace.join(&pipeline.state_dir).join("runs"))?,
        })
    }
}

/// How jobs install helixflow, and what else each phase's job sets up.
struct Install<'a> {
    git: &'a str,
    rev: Option<&'a str>,
    command: Option<&'a str>,
    /// Shell commands run in the workspace before each phase.
    setup: &'a [String],
}

/// A job's id for a phase: `phase-` and the name's letters, digits, `-` and `_`, with a short
/// hash when anything else had to be replaced, so that two phases never share one.
fn job_id(phase: &str) -> String {
    let safe: String = phase
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if safe == phase {
        format!("phase-{safe}")
    } else {
        let hash = blake3::hash(phase.as_bytes()).to_hex();
        format!("phase-{safe}-{}", &hash[..8])
    }
}

/// A YAML scalar that Actions reads as exactly `text`: single-quoted with `'` doubled (or
/// double-quoted with escapes when it holds a control character), and any `${{` written as an
/// expression that gives it back, since Actions evaluates expressions in every string.
fn quote(text: &str) -> String {
    let text = &text.replace("${{", "${{ '${{' }}");
    if text.chars().any(char::is_control) {
        serde_json::to_string(text).unwrap_or_default()
    } else {
        format!("'{}'", text.replace('\'', "''"))
    }
}

/// The name of a phase's artifact of one kind.
fn artifact(kind: &str, phase: &str) -> String {
    format!("helixflow-{kind}-{}", folder_name(phase))
}

/// The workflow, or `None` when the phases depend on each other in a cycle.
fn github_actions(
    pipeline: &Pipeline,
    paths: &RepoPaths,
    secrets: &[(String, String)],
    install: &Install<'_>,
    runs_on: &str,
) -> Option<String> {
    let graph = PhaseGraph::new(pipeline);
    let order: Vec<usize> = graph.levels()?.into_iter().flatten().collect();
    let upstream = upstream(pipeline, &order);
    let workflow = Workflow {
        pipeline,
        paths,
        secrets,
        install,
        runs_on,
        order,
        upstream,
    };
    let mut out = String::new();
    workflow.header(&mut out);
    for &i in &workflow.order {
        workflow.phase_job(&mut out, i);
    }
    workflow.last_job(&mut out);
    Some(out)
}

/// Every phase each one depends on, directly or not, by index; `order` is a topological order.
fn upstream(pipeline: &Pipeline, order: &[usize]) -> Vec<BTreeSet<usize>> {
    let index = |name: &str| pipeline.phases.iter().position(|p| p.name.value == name);
    let mut upstream: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); pipeline.phases.len()];
    for &i in order {
        for dependency in &pipeline.phases[i].depends_on {
            if let Some(d) = index(&dependency.value) {
                let mut set = upstream[d].clone();
                set.insert(d);
                upstream[i].extend(set);
            }
        }
    }
    upstream
}

/// What the workflow is written from.
struct Workflow<'a> {
    pipeline: &'a Pipeline,
    paths: &'a RepoPaths,
    secrets: &'a [(String, String)],
    install: &'a Install<'a>,
    runs_on: &'a str,
    /// The phases in a topological order.
    order: Vec<usize>,
    /// Every phase each one depends on, directly or not.
    upstream: Vec<BTreeSet<usize>>,
}

impl Workflow<'_> {
    /// The comment, the name, the trigger, the permissions and the workflow's `env`.
    fn header(&self, out: &mut String) {
        let (pipeline, paths, install) = (self.pipeline, self.paths, self.install);
        let _ = writeln!(
            out,
            "# Generated by `helixflow export github-actions {}`: regenerate it rather than edit it.",
            paths.file
        );
        out.push_str(
            "# One job per phase, following the pipeline's DAG; each applies the bundles of the phases it\n\
             # depends on, runs its phase (verification and retries inside the job) and uploads its bundle,\n\
             # run folder and JUnit report. The last job joins the journals into one run, and uploads its\n\
             # JUnit and HTML reports (linked from the job's summary).\n",
        );
        let _ = writeln!(
            out,
            "name: {}",
            quote(&format!("helixflow: {}", pipeline.name))
        );
        out.push_str("on:\n  workflow_dispatch:\npermissions:\n  contents: read\n");
        out.push_str("env:\n");
        let _ = writeln!(out, "  HELIXFLOW_PIPELINE: {}", quote(&paths.file));
        let _ = writeln!(out, "  HELIXFLOW_WORKSPACE: {}", quote(&paths.workspace));
        let _ = writeln!(out, "  HELIXFLOW_RUNS: {}", quote(&paths.runs));
        if install.command.is_none() {
            let _ = writeln!(out, "  HELIXFLOW_GIT: {}", quote(install.git));
            if let Some(rev) = install.rev {
                let _ = writeln!(out, "  HELIXFLOW_REV: {}", quote(rev));
            }
        }
        out.push_str("jobs:\n");
    }

    /// The checkout and helixflow's installation, first in every job.
    fn install_steps(&self, out: &mut String) {
        out.push_str("      - uses: actions/checkout@v4\n");
        out.push_str("      - name: Install helixflow\n");
        match self.install.command {
            Some(command) => {
                let _ = writeln!(out, "        run: {}", quote(command));
            }
            None if self.install.rev.is_some() => out.push_str(
                "        run: cargo install --locked --git \"$HELIXFLOW_GIT\" --rev \"$HELIXFLOW_REV\" helixflow\n",
            ),
            None => out.push_str(
                "        run: cargo install --locked --git \"$HELIXFLOW_GIT\" helixflow\n",
            ),
        }
    }

    /// Downloads and applies the bundles of `phases`, in dependency order; `only_passed` guards
    /// each with its job's result (the last job runs whatever happened).
    fn apply_steps(&self, out: &mut String, phases: &[usize], only_passed: bool) {
        for &d in phases {
            let name = &self.pipeline.phases[d].name.value;
            let items = self.pipeline.phases[d].for_each.is_some();
            let folder = folder_name(name);
            let guard = if only_passed {
                format!("        if: needs.{}.result == 'success'\n", job_id(name))
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "      - name: {}",
                quote(&format!("Download the bundle of {name}"))
            );
            out.push_str(&guard);
            if items {
                // A `for-each` phase may have no items, and so no bundle.
                out.push_str("        continue-on-error: true\n");
            }
            out.push_str("        uses: actions/download-artifact@v4\n        with:\n");
            let _ = writeln!(out, "          name: {}", artifact("bundle", name));
            let _ = writeln!(
                out,
                "          path: ${{{{ runner.temp }}}}/bundles/{folder}"
            );
            let _ = writeln!(
                out,
                "      - name: {}",
                quote(&format!("Apply the bundle of {name}"))
            );
            out.push_str(&guard);
            if items {
                // One bundle per item; items ran side by side, so any order applies.
                let _ = writeln!(
                    out,
                    "        run: find \"$RUNNER_TEMP/bundles/{folder}\" -name bundle.hxb -print0 | sort -z | xargs -0 -r -n 1 helixflow bundle apply -C \"$HELIXFLOW_WORKSPACE\""
                );
            } else {
                let _ = writeln!(
                    out,
                    "        run: helixflow bundle apply -C \"$HELIXFLOW_WORKSPACE\" \"$RUNNER_TEMP/bundles/{folder}/bundle.hxb\""
                );
            }
        }
    }

    /// The job of the phase at index `i`: the bundles it builds on, the setup, the phase, and
    /// its uploads.
    fn phase_job(&self, out: &mut String, i: usize) {
        let phase = &self.pipeline.phases[i];
        let name = &phase.name.value;
        let _ = writeln!(out, "  {}:", job_id(name));
        let _ = writeln!(out, "    name: {}", quote(&format!("phase {name}")));
        let _ = writeln!(out, "    runs-on: {}", quote(self.runs_on));
        let needs: Vec<String> = phase
            .depends_on
            .iter()
            .map(|d| job_id(&d.value))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if !needs.is_empty() {
            let _ = writeln!(out, "    needs: [{}]", needs.join(", "));
        }
        out.push_str("    env:\n");
        let _ = writeln!(out, "      HELIXFLOW_PHASE_NAME: {}", quote(name));
        for (variable, secret) in self.secrets {
            let _ = writeln!(out, "      {variable}: ${{{{ secrets.{secret} }}}}");
        }
        out.push_str("    steps:\n");
        self.install_steps(out);
        let rank = |i: &usize| self.order.iter().position(|o| o == i);
        let mut before: Vec<usize> = self.upstream[i].iter().copied().collect();
        before.sort_by_key(|d| rank(d));
        self.apply_steps(out, &before, false);
        // After the bundles: a setup may install what an upstream phase wrote (a requirements
        // file, a package). In the workspace, where the phase's own commands run.
        for command in self.install.setup {
            let _ = writeln!(
                out,
                "      - name: {}",
                quote(&format!("Set up: {command}"))
            );
            out.push_str("        working-directory: ${{ env.HELIXFLOW_WORKSPACE }}\n");
            let _ = writeln!(out, "        run: {}", quote(command));
        }
        let _ = writeln!(out, "      - name: {}", quote(&format!("Run phase {name}")));
        out.push_str(
            "        run: helixflow run --only \"$HELIXFLOW_PHASE_NAME\" --force --locked --bundles --no-progress --junit \"$RUNNER_TEMP/junit.xml\" \"$HELIXFLOW_PIPELINE\"\n",
        );
        upload_steps(out, name, phase.for_each.is_some());
    }

    /// The last job: the pipeline's result and its one run.
    fn last_job(&self, out: &mut String) {
        out.push_str("  helixflow-run:\n    name: 'helixflow run'\n");
        let _ = writeln!(out, "    runs-on: {}", quote(self.runs_on));
        let all: Vec<String> = self
            .order
            .iter()
            .map(|&i| job_id(&self.pipeline.phases[i].name.value))
            .collect();
        let _ = writeln!(out, "    needs: [{}]", all.join(", "));
        out.push_str("    if: always()\n    steps:\n");
        self.install_steps(out);
        self.apply_steps(out, &self.order, true);
        out.push_str(
            "      - name: Download the journals\n        uses: actions/download-artifact@v4\n        with:\n          pattern: helixflow-journal-*\n          path: ${{ runner.temp }}/journals\n",
        );
        out.push_str(
            "      - name: Join the journals into one run\n        run: helixflow runs merge --file \"$HELIXFLOW_PIPELINE\" --junit \"$RUNNER_TEMP/junit.xml\" \"$RUNNER_TEMP/journals\"\n",
        );
        out.push_str(
            "      - name: Summary\n        run: helixflow show --file \"$HELIXFLOW_PIPELINE\" >> \"$GITHUB_STEP_SUMMARY\"\n",
        );
        out.push_str(
            "      - name: Write the HTML report\n        run: helixflow report --file \"$HELIXFLOW_PIPELINE\" -o \"$RUNNER_TEMP/report.html\"\n",
        );
        for (kind, path) in [
            ("junit", "${{ runner.temp }}/junit.xml"),
            ("report", "${{ runner.temp }}/report.html"),
            ("run", RUNS_BUT_LATEST),
        ] {
            let _ = writeln!(
                out,
                "      - name: {}",
                quote(&format!("Upload the {kind}"))
            );
            if kind == "report" {
                out.push_str("        id: report\n");
            }
            out.push_str("        uses: actions/upload-artifact@v4\n        with:\n");
            let _ = writeln!(out, "          name: helixflow-{kind}");
            let _ = writeln!(out, "          path: {path}");
            out.push_str("          include-hidden-files: true\n");
        }
        // The artifact's address is known once it is uploaded.
        out.push_str(
            "      - name: Link the report from the summary\n        env:\n          REPORT_URL: ${{ steps.report.outputs.artifact-url }}\n        run: |\n          echo \"The HTML report of the run: [report.html]($REPORT_URL)\" >> \"$GITHUB_STEP_SUMMARY\"\n",
        );
    }
}

/// Leaves out the runs folder's `latest` link, which the upload would follow: every file of the
/// newest run would be there twice (and a bundle found twice would not be where the next job
/// looks for it).
const NOT_LATEST: &str = "!${{ env.HELIXFLOW_RUNS }}/latest/**";

/// The runs folder without its `latest` link.
const RUNS_BUT_LATEST: &str =
    "|\n            ${{ env.HELIXFLOW_RUNS }}/\n            !${{ env.HELIXFLOW_RUNS }}/latest/**";

/// A phase job's uploads: its bundle (which must be there; for a `for-each` phase, its items'
/// bundles, one per item), then its journal and `JUnit` report whatever happened.
fn upload_steps(out: &mut String, name: &str, items: bool) {
    let folder = folder_name(name);
    // `migrate[parser]`, `migrate[src_a.py]-1a2b3c4d`: `[[]` matches the bracket itself.
    let (bundles, if_none) = if items {
        (format!("{folder}[[]*"), "warn")
    } else {
        (folder.clone(), "error")
    };
    let _ = writeln!(
        out,
        "      - name: {}",
        quote(&format!("Upload the bundle of {name}"))
    );
    out.push_str("        uses: actions/upload-artifact@v4\n        with:\n");
    let _ = writeln!(out, "          name: {}", artifact("bundle", name));
    let _ = writeln!(
        out,
        "          path: |\n            ${{{{ env.HELIXFLOW_RUNS }}}}/*/phases/{bundles}/bundle.hxb\n            {NOT_LATEST}"
    );
    let _ = writeln!(
        out,
        "          include-hidden-files: true\n          if-no-files-found: {if_none}"
    );
    for (kind, path) in [
        ("journal", RUNS_BUT_LATEST),
        ("junit", "${{ runner.temp }}/junit.xml"),
    ] {
        let _ = writeln!(
            out,
            "      - name: {}",
            quote(&format!("Upload the {kind} of {name}"))
        );
        out.push_str(
            "        if: always()\n        uses: actions/upload-artifact@v4\n        with:\n",
        );
        let _ = writeln!(out, "          name: {}", artifact(kind, name));
        let _ = writeln!(out, "          path: {path}");
        out.push_str("          include-hidden-files: true\n          if-no-files-found: ignore\n");
    }
}
