//! Helpers shared by the integration tests: small knowledge folders written to temp dirs, the
//! scripted chat server, the PostgreSQL test database.

pub mod chat_server;
pub mod cli;
pub mod embed_server;
pub mod http;
pub mod pg;
pub mod server;

use std::path::{Path, PathBuf};

use ragtrail::AccessContext;
use ragtrail::trace::RunStatus;
use ragtrail::{AgentOutcome, AgentRagOptions, Planner, RunSettings, TraceSettings};
use ragtrail::{Engine, IngestOptions, IngestSummary};
use ragtrail::{SearchHit, SearchRequest};

pub struct Workspace {
    pub dir: tempfile::TempDir,
}

impl Workspace {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }
    pub fn knowledge(&self) -> PathBuf {
        self.dir.path().join("knowledge")
    }
    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }
    pub fn write(&self, rel: &str, text: &str) {
        let p = self.knowledge().join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
    pub fn remove(&self, rel: &str) {
        std::fs::remove_file(self.knowledge().join(rel)).expect("remove");
    }
    /// Default agent options and access, the fixed date 2026-11-30, traces under `traces/`.
    pub fn run_settings(&self) -> RunSettings {
        let mut s = RunSettings::new(
            AgentRagOptions::default(),
            AccessContext::default(),
            "2026-11-30",
        );
        s.trace = Some(TraceSettings {
            dir: self.dir.path().join("traces"),
            key: None,
            signer: None,
            caller: None,
        });
        s
    }
    /// Runs the agent on `question` with [`run_settings`](Self::run_settings), no progress
    /// callback; panics if the run fails.
    pub fn ask(&self, engine: &Engine, planner: &mut dyn Planner, question: &str) -> AgentOutcome {
        ragtrail::run_agent(engine, planner, question, &self.run_settings(), &mut |_| {})
            .expect("run")
    }
    pub fn engine(&self) -> Engine {
        Engine::open(&self.data()).expect("open engine")
    }
    pub fn ingest(&self, engine: &mut Engine) -> IngestSummary {
        engine
            .ingest(&self.knowledge(), &IngestOptions::default(), &mut |_| {})
            .expect("ingest")
    }
}

pub fn search(engine: &Engine, keywords: &[&str], k: usize) -> Vec<SearchHit> {
    search_as(engine, keywords, k, AccessContext::default())
}

pub fn search_as(
    engine: &Engine,
    keywords: &[&str],
    k: usize,
    access: AccessContext,
) -> Vec<SearchHit> {
    let req = SearchRequest::new(keywords.iter().map(|s| s.to_string()).collect(), k, access);
    engine.search_docs(&req).expect("search").hits
}

/// The workspace root: the sample `knowledge/` and `eval/` live there.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file below `dir`, at any depth, in no particular order (none when `dir` is missing).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// `crates/cli/tests`: fixtures and snapshots.
pub fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

pub const TRAVEL: &str = "---\ntitle: 差旅报销制度\ntenant: default\nroles: []\nversion: \"2026-03\"\nupdated: 2026-03-01\nstatus: active\n---\n\n## 交通费\n\n### 火车票\n\n高铁票须提供铁路电子客票报销凭证，截图不予报销。\n\n### 飞机票\n\n机票须提供电子行程单。\n\n## 住宿费\n\n住宿发票抬头须为公司全称，并注明纳税人识别号。\n\n| 城市 | 标准 |\n| --- | --- |\n| 一线城市 | 600元 |\n| 其他城市 | 400元 |\n";

/// Another tenant's policy (globex), with a figure of its own: 45 euros.
pub const GLOBEX: &str = "---\ntitle: Globex Expenses\ntenant: globex\n---\n\n## Meal allowance\n\nGlobex staff may claim a meal allowance of 45 euros per travel day.\n";

pub const LEAVE_EN: &str = "---\ntitle: Leave Policy\ntenant: default\nversion: \"2026\"\n---\n\n## Annual leave\n\nEmployees earn 10 days of annual leave per year of service, up to 20 days.\n\n## Sick leave\n\nA doctor's note is required for sick leave longer than two days.\n";

/// What the user is told by a run that gave up for want of evidence (`no_relevant_hits`, from
/// either planner); panics, showing the answer, if the run ended any other way.
pub fn no_evidence_message(outcome: AgentOutcome) -> String {
    assert_eq!(
        outcome.status,
        RunStatus::InsufficientEvidence,
        "{:?}",
        outcome.answer
    );
    assert!(
        outcome.reason.starts_with("no_relevant_hits"),
        "{}",
        outcome.reason
    );
    outcome.message.expect("message")
}

/// A trace file's lines, to edit one and write them back (tamper tests).
pub fn trace_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .expect("read")
        .lines()
        .map(String::from)
        .collect()
}

/// Writes `lines` back, one per line.
pub fn write_trace_lines(path: &Path, lines: &[String]) {
    std::fs::write(
        path,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .expect("write");
}

/// The hashing embedder, counting the texts it is asked to embed (an ingest's new vectors).
pub struct CountingHashing {
    inner: ragtrail::HashingEmbedder,
    pub texts: std::sync::atomic::AtomicUsize,
}

impl CountingHashing {
    pub fn new() -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self {
            inner: ragtrail::HashingEmbedder::default(),
            texts: Default::default(),
        })
    }

    /// Texts embedded so far.
    pub fn count(&self) -> usize {
        self.texts.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl ragtrail::Embedder for CountingHashing {
    fn info(&self) -> ragtrail::EmbedderInfo {
        self.inner.info()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ragtrail::EmbedError> {
        self.texts
            .fetch_add(texts.len(), std::sync::atomic::Ordering::Relaxed);
        Ok(self.inner.embed_batch(texts))
    }
    fn is_costly(&self) -> bool {
        false
    }
}

/// A policy of two sections, and the same policy with the second one's heading renamed (its
/// text unchanged).
pub const TWO_SECTIONS: &str = "# Leave rules\n\n## Annual leave\n\nEmployees get 15 days of annual leave a year.\n\n## Sick leave\n\nSick leave of more than two days needs a doctor's note.\n";
pub const TWO_SECTIONS_RENAMED: &str = "# Leave rules\n\n## Annual leave\n\nEmployees get 15 days of annual leave a year.\n\n## Illness\n\nSick leave of more than two days needs a doctor's note.\n";
