//! The HTML report of a run (`report.html`): one self-contained page made from the run's journal
//! alone, with the DAG, a timeline of every attempt, and each phase's attempts in detail (gates,
//! feedback, the verifier's verdict, cost, the files changed with their diffs). `helixflow
//! report` writes it for any run; every run keeps its own up to date while it goes on
//! ([`LiveReport`]).

mod dag;
mod escape;
mod files;
mod live;
mod model;
mod page;
mod status;
mod timeline;

use std::io;
use std::path::Path;
use std::time::SystemTime;

pub(crate) use live::LiveReport;

use crate::event::Stamped;
use crate::redact::Redactor;
use crate::store::run::RunDir;

/// The report's file name in a run's folder.
pub(crate) const FILE_NAME: &str = "report.html";

/// Seconds between the reloads of a live report in the browser.
const REFRESH_SECS: u64 = 3;

/// Writes reports of one run, keeping what does not change between two of them (the folders of
/// attempts that ended, the bundles of phases that passed).
pub(crate) struct Writer {
    run: RunDir,
    /// Redacts the contents of the files bundles hold; `None` withholds them.
    redactor: Option<Redactor>,
    folders: model::FolderCache,
    files: files::FilesCache,
}

impl Writer {
    /// A writer for `run` outside it: changed files' contents are those the run's own report
    /// saved (redacted), else shown only when the pipeline declares no secret.
    pub(crate) fn new(run: RunDir) -> Self {
        let redactor = without_secrets(&run);
        Self {
            run,
            redactor,
            folders: model::FolderCache::default(),
            files: files::FilesCache::default(),
        }
    }

    /// The writer of a run's own report: `redactor` is the run's, which knows every secret, so
    /// the changed files' contents are shown (and saved, redacted, for later reports). `pipeline`
    /// is what it reads of the run's `pipeline.json`, when the caller has it.
    pub(crate) fn for_run(
        run: RunDir,
        redactor: Redactor,
        pipeline: Option<model::PipelineFile>,
    ) -> Self {
        Self {
            run,
            redactor: Some(redactor),
            folders: model::FolderCache::keeping(pipeline),
            files: files::FilesCache::saving(),
        }
    }

    /// Reads what the run's folder holds from its start (`pipeline.json`) ahead of the first
    /// page, for a writer that keeps it.
    pub(crate) fn read_ahead(&mut self) {
        self.folders.pipeline(&self.run.path);
        self.folders.read_ahead(&self.run.path);
    }

    /// Reads ahead what the page will show of the attempts and phases that `events` end: the
    /// attempts' folders, and the bundles of the phases that passed. Called while the run goes
    /// on, so that its last page has little left to read.
    pub(crate) fn read_ended(&mut self, events: &[Stamped]) {
        let mut attempts = Vec::new();
        let mut passed = Vec::new();
        for stamped in events {
            match &stamped.event {
                crate::event::Event::AttemptFinished { phase, attempt, .. } => {
                    attempts.push((crate::store::run::folder_name(phase), *attempt));
                }
                crate::event::Event::PhaseFinished {
                    phase,
                    status: crate::event::PhaseStatus::Passed,
                    ..
                } => passed.push(crate::store::run::folder_name(phase)),
                _ => {}
            }
        }
        if !attempts.is_empty() {
            self.folders.read_ended(&self.run.path, attempts);
        }
        if !passed.is_empty() {
            let folders: Vec<&str> = passed.iter().map(String::as_str).collect();
            files::bundled_files(
                &self.run.path,
                &folders,
                self.redactor.as_ref(),
                &mut self.files,
            );
        }
    }

    /// The page for the run's `events` so far. `live` says whether the run is still going (when
    /// the caller knows; else `run.json` and the run lock tell); `out` is where the page goes,
    /// for its links into the run folder (absolute without it).
    pub(crate) fn render(
        &mut self,
        events: &[Stamped],
        live: Option<bool>,
        out: Option<&Path>,
    ) -> String {
        let view = model::Builder::new(&self.run)
            .events(events)
            .finish(live, &mut self.folders);
        // Only a phase that passed leaves a bundle, and it is written before the phase ends.
        let folders: Vec<&str> = view
            .phases
            .iter()
            .filter(|p| p.status == Some(crate::event::PhaseStatus::Passed))
            .map(|p| p.folder.as_str())
            .collect();
        let files = files::bundled_files(
            &self.run.path,
            &folders,
            self.redactor.as_ref(),
            &mut self.files,
        );
        let links = model::link_base(&self.run.path, out);
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let written = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
        page::Page {
            view: &view,
            files: &files,
            links: &links,
            refresh_secs: REFRESH_SECS,
            nonce: &nonce,
            written: &written,
        }
        .render()
    }

    /// Renders and writes the page to `out`, through a temporary file and a rename: a reader
    /// never sees half a page.
    pub(crate) fn write(
        &mut self,
        events: &[Stamped],
        live: Option<bool>,
        out: &Path,
    ) -> io::Result<()> {
        let html = self.render(events, live, Some(out));
        crate::store::replace_unsynced(out, html.as_bytes())
    }
}

/// An empty redactor when the run's pipeline declares no secret (`pipeline.json`): there is then
/// nothing to redact from the files bundles hold. `None` otherwise: their values are not in the
/// journal, and this environment's need not be the run's.
fn without_secrets(run: &RunDir) -> Option<Redactor> {
    let text = std::fs::read_to_string(run.path.join("pipeline.json")).ok()?;
    let pipeline: serde_json::Value = serde_json::from_str(&text).ok()?;
    let secrets = pipeline.get("secrets")?.as_array()?;
    secrets.is_empty().then(Redactor::default)
}
