//! The server's loop: messages from the editor, finished checks and timers, one at a time on one
//! thread, so that no request ever waits for a check.
//!
//! Checks (diagnostics) run on threads of their own. A document is checked at once when it is
//! opened and when it changes after a quiet spell; changes in quick succession (typing) wait until
//! the typing pauses for [`DEBOUNCE`]. A check that outlives [`CHECK_BUDGET`] is reported as over
//! budget and no longer waited for (its findings still count if it finishes before the document
//! changes); a result for a version that is no longer current is dropped. Findings in
//! imported files are published under those files' URIs, merged with what the checks of other
//! open documents found there.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, select};
use lsp_server::ResponseError;
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types::notification::{
    DidChangeTextDocument, DidChangeWatchedFiles, DidCloseTextDocument, DidOpenTextDocument,
    Initialized, Notification as _, PublishDiagnostics,
};
use lsp_types::request::{
    CodeActionRequest, Completion, DocumentSymbolRequest, Formatting, GotoDefinition, HoverRequest,
    References, RegisterCapability, Request as _,
};
use lsp_types::{
    CodeActionKind, CodeActionOptions, CodeActionProviderCapability, CompletionOptions,
    CompletionResponse, DidChangeWatchedFilesRegistrationOptions, DocumentSymbolResponse,
    FileChangeType, FileSystemWatcher, GlobPattern, GotoDefinitionResponse,
    HoverProviderCapability, InitializeParams, InitializeResult, Location, OneOf,
    PositionEncodingKind, PublishDiagnosticsParams, Registration, RegistrationParams,
    ServerCapabilities, ServerInfo, TextDocumentSyncCapability, TextDocumentSyncKind,
    TextDocumentSyncOptions, Uri,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::check::{self, FileFindings, Finding, Job, Outcome};
use super::documents::{Document, Documents};
use super::position::LineIndex;
use super::workspace::{self, Workspace};
use super::{completion, edits, hover, locate, symbols};
use crate::language::schema::Context;
use crate::language::{FsLoader, Loader};

/// How long typing must pause before a document that changed in quick succession is checked.
pub(crate) const DEBOUNCE: Duration = Duration::from_millis(150);

/// How long a check may run before it is abandoned and reported.
pub(crate) const CHECK_BUDGET: Duration = Duration::from_secs(5);

/// The most checks computing at once, abandoned ones included; more wait for one to finish.
const MAX_LIVE_CHECKS: usize = 4;

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// `shutdown`, then `exit`: the editor closed the session properly.
    Clean,
    /// `exit` without `shutdown`, or the editor went away.
    Abrupt,
}

/// The editor is gone: the connection cannot take messages any more.
#[derive(Debug)]
pub(crate) struct Closed;

/// A check that is computing.
#[derive(Debug)]
struct Running {
    generation: u64,
    deadline: Instant,
}

/// What a check thread sends back.
struct Finished {
    uri: Uri,
    generation: u64,
    /// `None` when the check panicked.
    outcome: Option<Outcome>,
}

/// What one document's last check found in one file.
#[derive(Debug)]
struct Contribution {
    version: Option<i32>,
    findings: Vec<Finding>,
}

/// The language server's state.
pub(crate) struct Server {
    connection: Connection,
    documents: Documents,
    search_path: Vec<PathBuf>,
    initialized: bool,
    /// Whether the editor watches files for the server when asked to (dynamic registration).
    can_watch_files: bool,
    shutdown: bool,
    /// When each document with a check to do should be checked.
    pending: HashMap<Uri, Instant>,
    running: HashMap<Uri, Running>,
    /// When each document last changed.
    last_change: HashMap<Uri, Instant>,
    generation: u64,
    /// Check threads still computing.
    live: Arc<AtomicUsize>,
    finished: (Sender<Finished>, Receiver<Finished>),
    /// The generation of each document's last published check.
    accepted: HashMap<Uri, u64>,
    /// The files each document's last check read, to check it again when one of them changes.
    reads: HashMap<Uri, Vec<PathBuf>>,
    /// Findings by the file they are in, then by the document whose check found them.
    findings: HashMap<Uri, BTreeMap<Uri, Contribution>>,
    /// The files each document's last check found something in.
    targets: HashMap<Uri, HashSet<Uri>>,
}

impl Server {
    /// A server on `connection`.
    pub(crate) fn new(connection: Connection) -> Self {
        Self {
            connection,
            documents: Documents::default(),
            search_path: FsLoader.search_path(),
            initialized: false,
            can_watch_files: false,
            shutdown: false,
            pending: HashMap::new(),
            running: HashMap::new(),
            last_change: HashMap::new(),
            generation: 0,
            live: Arc::new(AtomicUsize::new(0)),
            finished: crossbeam_channel::unbounded(),
            accepted: HashMap::new(),
            reads: HashMap::new(),
            findings: HashMap::new(),
            targets: HashMap::new(),
        }
    }

    /// Serves until the editor says `exit` or goes away; [`Closed`] when writing to it failed.
    pub(crate) fn run(mut self) -> Result<Ending, Closed> {
        self.serve()
    }

    fn serve(&mut self) -> Result<Ending, Closed> {
        loop {
            let wake = match self.next_wake() {
                Some(at) => crossbeam_channel::at(at),
                None => crossbeam_channel::never(),
            };
            let receiver = self.connection.receiver.clone();
            let finished = self.finished.1.clone();
            select! {
                recv(receiver) -> message => match message {
                    Ok(message) => {
                        if let Some(ending) = self.message(message)? {
                            return Ok(ending);
                        }
                    }
                    Err(_) => return Ok(Ending::Abrupt),
                },
                recv(finished) -> done => {
                    if let Ok(done) = done {
                        self.check_finished(done)?;
                    }
                }
                recv(wake) -> _ => {}
            }
            self.tick()?;
        }
    }

    fn send(&self, message: impl Into<Message>) -> Result<(), Closed> {
        self.connection
            .sender
            .send(message.into())
            .map_err(|_| Closed)
    }

    fn message(&mut self, message: Message) -> Result<Option<Ending>, Closed> {
        match message {
            Message::Request(request) => self.request(request)?,
            Message::Notification(notification) if notification.method == "exit" => {
                return Ok(Some(if self.shutdown {
                    Ending::Clean
                } else {
                    Ending::Abrupt
                }));
            }
            Message::Notification(notification) if self.initialized => {
                self.notification(notification)?;
            }
            // Nothing but `exit` counts before `initialize`. The one request this server sends
            // (to watch files) needs nothing from its response: without it, edits made outside
            // the editor are seen at the next change of the document instead.
            Message::Notification(_) | Message::Response(_) => {}
        }
        Ok(None)
    }

    // -----------------------------------------------------------------------------------------
    // requests

    fn request(&mut self, request: Request) -> Result<(), Closed> {
        let id = request.id.clone();
        if request.method == "initialize" {
            // Unreadable parameters are an old or odd client: it gets no file watching.
            let params = serde_json::from_value::<InitializeParams>(request.params).ok();
            self.can_watch_files = params
                .and_then(|p| p.capabilities.workspace)
                .and_then(|w| w.did_change_watched_files)
                .and_then(|d| d.dynamic_registration)
                .unwrap_or(false);
            return self.initialize(id);
        }
        if !self.initialized {
            return self.fail(id, ErrorCode::ServerNotInitialized, "initialize first");
        }
        if self.shutdown {
            return self.fail(id, ErrorCode::InvalidRequest, "the server is shutting down");
        }
        match request.method.as_str() {
            "shutdown" => {
                self.shutdown = true;
                self.reply(id, ())
            }
            HoverRequest::METHOD => self.answer::<HoverRequest>(request, |s, p| {
                let position = p.text_document_position_params;
                let document = s.documents.get(&position.text_document.uri)?;
                let overlay = s.documents.overlay(&s.search_path);
                hover::hover(document, &s.documents, &overlay, position.position)
            }),
            Completion::METHOD => self.answer::<Completion>(request, |s, p| {
                let position = p.text_document_position;
                let document = s.documents.get(&position.text_document.uri)?;
                let overlay = s.documents.overlay(&s.search_path);
                let items =
                    completion::complete(document, &s.documents, &overlay, position.position);
                Some(CompletionResponse::Array(items))
            }),
            GotoDefinition::METHOD => self.answer::<GotoDefinition>(request, |s, p| {
                let position = p.text_document_position_params;
                let uri = &position.text_document.uri;
                let locations = s
                    .locations(uri, position.position, |o| o.definition)
                    .or_else(|| s.imported_file(uri, position.position))?;
                Some(GotoDefinitionResponse::Array(locations))
            }),
            References::METHOD => self.answer::<References>(request, |s, p| {
                let position = p.text_document_position;
                let declarations = p.context.include_declaration;
                s.locations(&position.text_document.uri, position.position, |o| {
                    declarations || !o.definition
                })
            }),
            DocumentSymbolRequest::METHOD => {
                self.answer::<DocumentSymbolRequest>(request, |s, p| {
                    let document = s.documents.get(&p.text_document.uri)?;
                    let outline = symbols::document_symbols(&document.text, &document.tree());
                    Some(DocumentSymbolResponse::Nested(outline))
                })
            }
            CodeActionRequest::METHOD => self.answer::<CodeActionRequest>(request, |s, p| {
                let document = s.documents.get(&p.text_document.uri)?;
                let current = s
                    .findings
                    .get(&document.uri)
                    .into_iter()
                    .flat_map(BTreeMap::values)
                    // Fixes computed for an older text would edit the wrong place.
                    .filter(|c| c.version == Some(document.version))
                    .flat_map(|c| &c.findings);
                Some(edits::quick_fixes(current, p.range))
            }),
            Formatting::METHOD => self.format(request),
            _ => self.fail(
                id,
                ErrorCode::MethodNotFound,
                &format!("unknown method {}", request.method),
            ),
        }
    }

    fn initialize(&mut self, id: RequestId) -> Result<(), Closed> {
        if self.initialized {
            return self.fail(id, ErrorCode::InvalidRequest, "already initialized");
        }
        self.initialized = true;
        let capabilities = ServerCapabilities {
            position_encoding: Some(PositionEncodingKind::UTF16),
            text_document_sync: Some(TextDocumentSyncCapability::Options(
                TextDocumentSyncOptions {
                    open_close: Some(true),
                    change: Some(TextDocumentSyncKind::INCREMENTAL),
                    ..TextDocumentSyncOptions::default()
                },
            )),
            hover_provider: Some(HoverProviderCapability::Simple(true)),
            completion_provider: Some(CompletionOptions {
                trigger_characters: Some(vec!["\"".to_owned(), "=".to_owned()]),
                ..CompletionOptions::default()
            }),
            definition_provider: Some(OneOf::Left(true)),
            references_provider: Some(OneOf::Left(true)),
            document_symbol_provider: Some(OneOf::Left(true)),
            document_formatting_provider: Some(OneOf::Left(true)),
            code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
                code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
                ..CodeActionOptions::default()
            })),
            ..ServerCapabilities::default()
        };
        let result = InitializeResult {
            capabilities,
            server_info: Some(ServerInfo {
                name: "helixflow".to_owned(),
                version: Some(env!("CARGO_PKG_VERSION").to_owned()),
            }),
        };
        self.reply(id, result)
    }

    /// Answers a request whose parameters decode as `R::Params` with `handle`'s result.
    fn answer<R: lsp_types::request::Request>(
        &self,
        request: Request,
        handle: impl FnOnce(&Self, R::Params) -> R::Result,
    ) -> Result<(), Closed>
    where
        R::Params: DeserializeOwned,
        R::Result: Serialize,
    {
        match serde_json::from_value::<R::Params>(request.params) {
            Ok(params) => self.reply(request.id, handle(self, params)),
            Err(e) => self.fail(
                request.id,
                ErrorCode::InvalidParams,
                &format!("invalid parameters for {}: {e}", R::METHOD),
            ),
        }
    }

    fn reply(&self, id: RequestId, result: impl Serialize) -> Result<(), Closed> {
        self.send(response(id, result))
    }

    fn fail(&self, id: RequestId, code: ErrorCode, message: &str) -> Result<(), Closed> {
        self.send(Response {
            id,
            response_result: Err(ResponseError {
                code: code as i32,
                message: message.to_owned(),
                data: None,
            }),
        })
    }

    /// The places of the name at `position` that `wanted` accepts, across the document's
    /// workspace; `None` when no name is there.
    fn locations(
        &self,
        uri: &Uri,
        position: lsp_types::Position,
        wanted: impl Fn(&workspace::Occurrence) -> bool,
    ) -> Option<Vec<Location>> {
        let document = self.documents.get(uri)?;
        let offset = LineIndex::new(&document.text).offset(position);
        let symbol = workspace::symbol_at(&document.tree(), offset)?.symbol;
        let overlay = self.documents.overlay(&self.search_path);
        let workspace = Workspace::of(&document.path, &self.documents, &overlay);
        let mut indexes: HashMap<&std::path::Path, LineIndex<'_>> = HashMap::new();
        let mut locations = Vec::new();
        for found in workspace.occurrences() {
            if found.occurrence.symbol != symbol || !wanted(&found.occurrence) {
                continue;
            }
            let Some(uri) = self.documents.uri_of(&found.file.path) else {
                continue;
            };
            let index = indexes
                .entry(&found.file.path)
                .or_insert_with(|| LineIndex::new(&found.file.text));
            let span = &found.occurrence.span;
            locations.push(Location::new(uri, index.range(span.start, span.end)));
        }
        Some(locations)
    }

    /// The file an `import` at `position` points to (for a remote import, its read-only copy in
    /// the import cache), as a location at its start; `None` when no import path is there.
    fn imported_file(&self, uri: &Uri, position: lsp_types::Position) -> Option<Vec<Location>> {
        let document = self.documents.get(uri)?;
        let offset = LineIndex::new(&document.text).offset(position);
        let tree = document.tree();
        let hit = locate::hit(&tree, offset)?;
        let on_path = matches!(hit.part, locate::Part::Value { index: Some(0), .. });
        if !on_path || hit.node.name() != "import" || hit.context != Some(Context::TopLevel) {
            return None;
        }
        let overlay = self.documents.overlay(&self.search_path);
        let folder = document.path.parent().unwrap_or(std::path::Path::new(""));
        let target = workspace::import_target(&overlay, &document.path, folder, hit.node)?;
        let uri = self.documents.uri_of(&target)?;
        Some(vec![Location::new(uri, lsp_types::Range::default())])
    }

    /// Formats on a thread of its own: the parse before it has a budget, but a request must not
    /// wait for it.
    fn format(&self, request: Request) -> Result<(), Closed> {
        let (id, params) =
            match serde_json::from_value::<lsp_types::DocumentFormattingParams>(request.params) {
                Ok(params) => (request.id, params),
                Err(e) => {
                    return self.fail(
                        request.id,
                        ErrorCode::InvalidParams,
                        &format!("invalid parameters for {}: {e}", Formatting::METHOD),
                    );
                }
            };
        let Some(document) = self.documents.get(&params.text_document.uri) else {
            return self.reply(id, ());
        };
        let text = Arc::clone(&document.text);
        let sender = self.connection.sender.clone();
        let thread_id = id.clone();
        let spawned = std::thread::Builder::new()
            .name("helixflow-format".to_owned())
            .spawn(move || {
                let edits = edits::format(&text).unwrap_or_default();
                // The editor may have gone meanwhile; then nobody waits for the answer.
                let _ = sender.send(response(thread_id, edits).into());
            });
        match spawned {
            Ok(_) => Ok(()),
            Err(e) => self.fail(
                id,
                ErrorCode::InternalError,
                &format!("cannot start formatting: {e}"),
            ),
        }
    }

    // -----------------------------------------------------------------------------------------
    // notifications

    fn notification(&mut self, notification: Notification) -> Result<(), Closed> {
        let now = Instant::now();
        match notification.method.as_str() {
            Initialized::METHOD if self.can_watch_files => self.watch_files()?,
            DidChangeWatchedFiles::METHOD => {
                let Some(params) = decode::<lsp_types::DidChangeWatchedFilesParams>(notification)
                else {
                    return Ok(());
                };
                for change in params.changes {
                    let Some(path) = super::uri::to_path(&change.uri) else {
                        continue;
                    };
                    if self.documents.by_path(&path).is_some() {
                        // The editor's text of an open document wins over the disk.
                        continue;
                    }
                    if change.typ == FileChangeType::CREATED {
                        // It may be an import or a prompt file that was missing: check them all.
                        let open: Vec<Uri> = self.documents.iter().map(|d| d.uri.clone()).collect();
                        self.schedule(open, now);
                    } else {
                        self.schedule_importers(&path, now);
                    }
                }
            }
            DidOpenTextDocument::METHOD => {
                let Some(params) = decode::<lsp_types::DidOpenTextDocumentParams>(notification)
                else {
                    return Ok(());
                };
                let item = params.text_document;
                let uri = item.uri.clone();
                self.documents
                    .open(Document::new(item.uri, item.text, item.version));
                self.pending.insert(uri.clone(), now);
                self.last_change.insert(uri, now);
            }
            DidChangeTextDocument::METHOD => {
                let Some(params) = decode::<lsp_types::DidChangeTextDocumentParams>(notification)
                else {
                    return Ok(());
                };
                let uri = params.text_document.uri;
                let Some(document) = self.documents.get_mut(&uri) else {
                    return Ok(());
                };
                document.apply(params.content_changes, params.text_document.version);
                let path = document.path.clone();
                let quiet = self
                    .last_change
                    .get(&uri)
                    .is_none_or(|last| now.duration_since(*last) >= DEBOUNCE);
                let at = if quiet && !self.running.contains_key(&uri) {
                    now
                } else {
                    now + DEBOUNCE
                };
                self.last_change.insert(uri.clone(), now);
                self.pending.insert(uri, at);
                self.schedule_importers(&path, at);
            }
            DidCloseTextDocument::METHOD => {
                let Some(params) = decode::<lsp_types::DidCloseTextDocumentParams>(notification)
                else {
                    return Ok(());
                };
                let uri = params.text_document.uri;
                let Some(document) = self.documents.close(&uri) else {
                    return Ok(());
                };
                self.pending.remove(&uri);
                self.running.remove(&uri);
                self.last_change.remove(&uri);
                self.accepted.remove(&uri);
                self.reads.remove(&uri);
                self.contribute(&uri, Vec::new())?;
                // Documents that import it read the file from disk again.
                self.schedule_importers(&document.path, now + DEBOUNCE);
            }
            _ => {}
        }
        Ok(())
    }

    /// Asks the editor to report changes to the files a pipeline may read: other pipelines
    /// (imports) and prompt files.
    fn watch_files(&self) -> Result<(), Closed> {
        let watchers = ["**/*.kdl", "**/*.md", "**/*.txt", "**/*.j2", "**/*.jinja"]
            .into_iter()
            .map(|glob| FileSystemWatcher {
                glob_pattern: GlobPattern::String(glob.to_owned()),
                kind: None,
            })
            .collect();
        let options = DidChangeWatchedFilesRegistrationOptions { watchers };
        let params = RegistrationParams {
            registrations: vec![Registration {
                id: "helixflow-watched-files".to_owned(),
                method: DidChangeWatchedFiles::METHOD.to_owned(),
                register_options: serde_json::to_value(options).ok(),
            }],
        };
        self.send(Request::new(
            RequestId::from("helixflow/watch-files".to_owned()),
            RegisterCapability::METHOD.to_owned(),
            params,
        ))
    }

    /// Schedules a check of every open document whose last check read `path`.
    fn schedule_importers(&mut self, path: &std::path::Path, at: Instant) {
        let importers: Vec<Uri> = self
            .reads
            .iter()
            .filter(|(_, read)| read.iter().any(|p| p == path))
            .map(|(uri, _)| uri.clone())
            .collect();
        self.schedule(importers, at);
    }

    /// Schedules a check of each document by `at`, or sooner when one is already due sooner.
    fn schedule(&mut self, uris: Vec<Uri>, at: Instant) {
        for uri in uris {
            let when = self.pending.get(&uri).map_or(at, |&t| t.min(at));
            self.pending.insert(uri, when);
        }
    }

    // -----------------------------------------------------------------------------------------
    // checks

    /// The earliest time something is due: a pending check that may start, or a budget.
    fn next_wake(&self) -> Option<Instant> {
        let startable = self.live.load(Ordering::SeqCst) < MAX_LIVE_CHECKS;
        let pending = self
            .pending
            .iter()
            .filter(|(uri, _)| startable && !self.running.contains_key(*uri))
            .map(|(_, &at)| at);
        let budgets = self.running.values().map(|r| r.deadline);
        pending.chain(budgets).min()
    }

    /// Abandons checks over budget and starts the checks that are due.
    fn tick(&mut self) -> Result<(), Closed> {
        let now = Instant::now();
        let expired: Vec<Uri> = self
            .running
            .iter()
            .filter(|(_, r)| r.deadline <= now)
            .map(|(uri, _)| uri.clone())
            .collect();
        for uri in expired {
            self.running.remove(&uri);
            let Some(document) = self.documents.get(&uri) else {
                continue;
            };
            let findings = vec![FileFindings {
                uri: uri.clone(),
                version: Some(document.version),
                findings: vec![check::over_budget(CHECK_BUDGET)],
            }];
            self.contribute(&uri, findings)?;
        }
        let mut due: Vec<(Instant, Uri)> = self
            .pending
            .iter()
            .filter(|(uri, at)| **at <= now && !self.running.contains_key(*uri))
            .map(|(uri, at)| (*at, uri.clone()))
            .collect();
        due.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        for (_, uri) in due {
            if self.live.load(Ordering::SeqCst) >= MAX_LIVE_CHECKS {
                break;
            }
            self.pending.remove(&uri);
            self.start(&uri, now);
        }
        Ok(())
    }

    fn start(&mut self, uri: &Uri, now: Instant) {
        let Some(document) = self.documents.get(uri) else {
            return;
        };
        self.generation += 1;
        let generation = self.generation;
        let job = Job {
            uri: uri.clone(),
            version: document.version,
            path: document.path.clone(),
            text: Arc::clone(&document.text),
            overlay: self.documents.overlay(&self.search_path),
            open: self
                .documents
                .iter()
                .map(|d| (d.path.clone(), (d.uri.clone(), d.version)))
                .collect(),
        };
        let live = Arc::clone(&self.live);
        let sender = self.finished.0.clone();
        let thread_uri = uri.clone();
        live.fetch_add(1, Ordering::SeqCst);
        let spawned = std::thread::Builder::new()
            .name("helixflow-check".to_owned())
            .spawn(move || {
                // A bug in a check must cost that check, not the session.
                let outcome =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check::run(job))).ok();
                live.fetch_sub(1, Ordering::SeqCst);
                let _ = sender.send(Finished {
                    uri: thread_uri,
                    generation,
                    outcome,
                });
            });
        match spawned {
            Ok(_) => {
                self.running.insert(
                    uri.clone(),
                    Running {
                        generation,
                        deadline: now + CHECK_BUDGET,
                    },
                );
            }
            Err(e) => {
                self.live.fetch_sub(1, Ordering::SeqCst);
                say!("helixflow lsp: cannot start a check: {e}");
            }
        }
    }

    fn check_finished(&mut self, done: Finished) -> Result<(), Closed> {
        match self.running.get(&done.uri).map(|r| r.generation) {
            Some(generation) if generation == done.generation => {
                self.running.remove(&done.uri);
            }
            // A newer check of the document is computing; it reads newer text.
            Some(_) => return Ok(()),
            // A check abandoned over budget that finished after all still counts, unless a later
            // one was published meanwhile.
            None if self
                .accepted
                .get(&done.uri)
                .is_some_and(|&g| g > done.generation) =>
            {
                return Ok(());
            }
            None => {}
        }
        let Some(outcome) = done.outcome else {
            say!(
                "helixflow lsp: checking {} failed unexpectedly",
                done.uri.as_str()
            );
            return Ok(());
        };
        let Some(document) = self.documents.get(&outcome.uri) else {
            // Closed meanwhile.
            return Ok(());
        };
        if document.version != outcome.version {
            // A newer version is waiting for its own check.
            return Ok(());
        }
        self.accepted.insert(outcome.uri.clone(), done.generation);
        self.reads.insert(outcome.uri.clone(), outcome.read);
        self.contribute(&outcome.uri, outcome.files)
    }

    /// Replaces what `source`'s check found, and publishes every file whose findings changed.
    fn contribute(&mut self, source: &Uri, files: Vec<FileFindings>) -> Result<(), Closed> {
        let previous = self.targets.remove(source).unwrap_or_default();
        let mut now = HashSet::new();
        for file in files {
            now.insert(file.uri.clone());
            self.findings.entry(file.uri).or_default().insert(
                source.clone(),
                Contribution {
                    version: file.version,
                    findings: file.findings,
                },
            );
        }
        for gone in previous.difference(&now) {
            if let Some(by_source) = self.findings.get_mut(gone) {
                by_source.remove(source);
            }
        }
        let mut touched: Vec<&Uri> = previous.union(&now).collect();
        touched.sort();
        for target in touched {
            self.publish(target)?;
        }
        if !now.is_empty() {
            self.targets.insert(source.clone(), now);
        }
        Ok(())
    }

    /// Publishes the findings of every check in one file, each once.
    fn publish(&mut self, target: &Uri) -> Result<(), Closed> {
        let contributions = self.findings.get(target);
        let mut diagnostics: Vec<lsp_types::Diagnostic> = Vec::new();
        for finding in contributions
            .into_iter()
            .flat_map(BTreeMap::values)
            .flat_map(|c| &c.findings)
        {
            if !diagnostics.contains(&finding.diagnostic) {
                diagnostics.push(finding.diagnostic.clone());
            }
        }
        let open_version = self.documents.get(target).map(|d| d.version);
        let version = open_version.filter(|v| {
            contributions
                .into_iter()
                .flat_map(BTreeMap::values)
                .all(|c| c.version == Some(*v))
        });
        if contributions.is_some_and(BTreeMap::is_empty) {
            self.findings.remove(target);
        }
        let params = PublishDiagnosticsParams {
            uri: target.clone(),
            diagnostics,
            version,
        };
        self.send(Notification::new(
            PublishDiagnostics::METHOD.to_owned(),
            params,
        ))
    }
}

/// A successful response.
fn response(id: RequestId, result: impl Serialize) -> Response {
    match serde_json::to_value(result) {
        Ok(value) => Response {
            id,
            response_result: Ok(value),
        },
        Err(e) => Response {
            id,
            response_result: Err(ResponseError {
                code: ErrorCode::InternalError as i32,
                message: format!("cannot encode the result: {e}"),
                data: None,
            }),
        },
    }
}

/// A notification's parameters; a notification that does not decode is ignored, as the protocol
/// has no way to answer it.
fn decode<P: DeserializeOwned>(notification: Notification) -> Option<P> {
    match serde_json::from_value(notification.params) {
        Ok(params) => Some(params),
        Err(e) => {
            say!(
                "helixflow lsp: ignoring {} with invalid parameters: {e}",
                notification.method
            );
            None
        }
    }
}
