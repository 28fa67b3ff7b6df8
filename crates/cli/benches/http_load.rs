//! Load on `ragtrail serve` over loopback, beside the engine's own `searchDocs` in the same run.
//!
//! ```sh
//! cargo bench -p ragtrail-cli --bench http_load -- [--seconds S] [--knowledge DIR] [--questions FILE]
//!     [--only search|ask] [--baseline PATH]
//! ```
//!
//! Ingests the knowledge folder (default: the bundled `knowledge/`) with the hashing embedder
//! into a scratch data directory, starts the real `ragtrail serve` binary on 127.0.0.1 with the offline planner and
//! one token, and then, for S seconds each (default 5):
//!
//! - in-process `searchDocs` on 1 thread and on every core (the same engine, opened here);
//! - `POST /v1/search` and `POST /v1/ask` at concurrency 1, 8 and 32, each client a thread
//!   with its own keep-alive connection.
//!
//! Queries are the first-turn questions of a question set (default: `eval/golden.jsonl`);
//! `search` sends each question's content words, as the offline planner's first round does.
//! Printed: requests/s, p50 / p99 latency, errors, and the server's resident memory (current
//! and peak, from /proc). Bounded by design: loopback only, at most 32 connections.
//!
//! `--baseline PATH` compares two builds in one run: a second server from the `ragtrail`
//! binary at PATH (a copy of an earlier build) serves the same data directory, and every HTTP
//! row is measured against it and then against this build, one after the other, so both see
//! the same machine load. `--only` keeps the HTTP rows of one endpoint.
//!
//! Under `cargo test --all-targets` (no `--bench` argument) it is a smoke run of 0.2 s a row
//! that fails if any request failed; its timings mean nothing.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ragtrail::AccessContext;
use ragtrail::Engine;
use ragtrail::SearchRequest;
use ragtrail::internals::question_keywords;
use serde_json::{Value, json};

const TOP_K: usize = 5;
const CONCURRENCY: [usize; 3] = [1, 8, 32];

struct Options {
    seconds: f64,
    /// Run by `cargo test`, not `cargo bench`.
    smoke: bool,
    knowledge: PathBuf,
    questions: PathBuf,
    /// An earlier build's `ragtrail` binary to measure beside this one.
    baseline: Option<PathBuf>,
    /// Only the HTTP rows of this endpoint (`search` or `ask`).
    only: Option<String>,
}

fn options() -> Options {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut o = Options {
        seconds: 5.0,
        smoke: true,
        knowledge: root.join("knowledge"),
        questions: root.join("eval/golden.jsonl"),
        baseline: None,
        only: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| fail(&format!("{a} needs a value")))
        };
        match a.as_str() {
            "--seconds" => {
                o.seconds = value()
                    .parse()
                    .ok()
                    .filter(|s: &f64| *s > 0.0 && *s <= 600.0)
                    .unwrap_or_else(|| fail("--seconds takes a number of seconds, at most 600"))
            }
            "--knowledge" => o.knowledge = PathBuf::from(value()),
            "--questions" => o.questions = PathBuf::from(value()),
            "--baseline" => o.baseline = Some(PathBuf::from(value())),
            "--only" => {
                let v = value();
                if v != "search" && v != "ask" {
                    fail("--only takes search or ask");
                }
                o.only = Some(v);
            }
            // `cargo bench` passes --bench to every bench binary; `cargo test` does not.
            "--bench" => o.smoke = false,
            other => fail(&format!("unknown argument {other}")),
        }
    }
    if o.smoke {
        o.seconds = 0.2;
    }
    o
}

fn fail(message: &str) -> ! {
    eprintln!("http_load: {message}");
    std::process::exit(2)
}

/// The first-turn questions of a question set (JSON lines with `question` or `turns`).
fn questions(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| fail(&format!("reading {}: {e}", path.display())));
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|item| {
            item["question"]
                .as_str()
                .or_else(|| item["turns"][0]["question"].as_str())
                .map(str::to_string)
        })
        .collect()
}

fn ragtrail(binary: &Path, data: &Path, knowledge: &Path, traces: &Path) -> Command {
    let mut cmd = Command::new(binary);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("RAGTRAIL_") {
            cmd.env_remove(&key);
        }
    }
    cmd.env_remove("DATABASE_URL");
    // Load on the server, not the embedder: the hashing embedder, which the in-process
    // engine opened here uses too (a model would dominate every row).
    cmd.env("RAGTRAIL_EMBEDDER", "hashing");
    cmd.arg("--data-dir")
        .arg(data)
        .arg("--knowledge")
        .arg(knowledge)
        .arg("--trace-dir")
        .arg(traces);
    cmd
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| fail(&format!("running ragtrail: {e}")));
    if !out.status.success() {
        fail(&format!(
            "ragtrail failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The server process, killed when dropped.
struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server(mut cmd: Command) -> Server {
    use std::io::{BufRead, BufReader};
    cmd.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--planner",
        "offline",
        "--today",
        "2026-11-30",
    ]);
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| fail(&format!("starting ragtrail serve: {e}")));
    let stdout = child.stdout.take().unwrap_or_else(|| fail("no stdout"));
    let mut lines = BufReader::new(stdout).lines();
    let base = loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(addr) = line.strip_prefix("listening on ") {
                    break addr.trim().to_string();
                }
            }
            _ => fail("ragtrail serve exited before listening"),
        }
    };
    Server { child, base }
}

/// Current and peak resident memory of a process, in MiB (Linux /proc).
fn rss_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Latencies of one measurement, and its failures.
struct Sample {
    latencies: Vec<Duration>,
    errors: usize,
    wall: Duration,
}

impl Sample {
    fn per_second(&self) -> f64 {
        self.latencies.len() as f64 / self.wall.as_secs_f64()
    }

    fn percentile_ms(&self, p: f64) -> f64 {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        if sorted.is_empty() {
            return f64::NAN;
        }
        let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted[i].as_secs_f64() * 1000.0
    }
}

/// Runs `work(client, i)` on `threads` threads for `seconds`, timed from when every thread has
/// made its client; `work` returns whether the call succeeded.
fn drive<C>(
    threads: usize,
    seconds: f64,
    make: impl Fn() -> C + Sync,
    work: impl Fn(&C, usize) -> bool + Sync,
) -> Sample {
    let ready = std::sync::Barrier::new(threads + 1);
    let (per_thread, wall): (Vec<(Vec<Duration>, usize)>, Duration) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (make, work, ready) = (&make, &work, &ready);
                s.spawn(move || {
                    let client = make();
                    ready.wait();
                    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
                    let (mut latencies, mut errors) = (Vec::new(), 0);
                    let mut i = t * 7919;
                    while Instant::now() < deadline {
                        let began = Instant::now();
                        if work(&client, i) {
                            latencies.push(began.elapsed());
                        } else {
                            errors += 1;
                        }
                        i += 1;
                    }
                    (latencies, errors)
                })
            })
            .collect();
        ready.wait();
        let start = Instant::now();
        let results = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect();
        (results, start.elapsed())
    });
    let mut sample = Sample {
        latencies: Vec::new(),
        errors: 0,
        wall,
    };
    for (l, e) in per_thread {
        sample.latencies.extend(l);
        sample.errors += e;
    }
    sample
}

fn row(what: &str, concurrency: usize, s: &Sample, rss: Option<(f64, f64)>, base: f64) -> usize {
    let rss = rss.map_or("–".to_string(), |(now, peak)| {
        format!("{now:.0} / {peak:.0}")
    });
    println!(
        "| {what} | {concurrency} | {:.0} | {:.2} | {:.2} | {} | {rss} | {:.2} |",
        s.per_second(),
        s.percentile_ms(0.5),
        s.percentile_ms(0.99),
        s.errors,
        s.per_second() / base,
    );
    s.errors
}

fn main() {
    let o = options();
    let questions = questions(&o.questions);
    if questions.is_empty() {
        fail(&format!("no questions in {}", o.questions.display()));
    }
    let scratch = tempfile::tempdir().unwrap_or_else(|e| fail(&format!("scratch dir: {e}")));
    let (data, traces) = (scratch.path().join("data"), scratch.path().join("traces"));
    let cli = || {
        ragtrail(
            Path::new(env!("CARGO_BIN_EXE_ragtrail")),
            &data,
            &o.knowledge,
            &traces,
        )
    };
    run_ok(cli().arg("ingest"));
    let token = run_ok(cli().args(["tokens", "add", "bench", "--tenant", "default"]))
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_string();

    let engine = Engine::open(&data).unwrap_or_else(|e| fail(&format!("opening the engine: {e}")));
    let access = AccessContext::new("default", Vec::<String>::new());
    let counts = engine
        .index()
        .scoped_counts(&access, false)
        .unwrap_or_else(|e| fail(&format!("counting terms: {e}")));
    let keyword_sets: Vec<Vec<String>> = questions
        .iter()
        .filter_map(|q| question_keywords(q, &|t| counts.doc_freq(t)))
        .collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "{} questions ({} keyword sets), {} s per row, {cores} cores, knowledge {}",
        questions.len(),
        keyword_sets.len(),
        o.seconds,
        o.knowledge.display()
    );
    println!();
    println!(
        "| what | concurrency | requests/s | p50 ms | p99 ms | errors | server RSS MiB (now / peak) | ÷ in-process, 1 thread |"
    );
    println!("|---|---|---|---|---|---|---|---|");

    let search_in_process = |_: &(), i: usize| {
        let keywords = keyword_sets[i % keyword_sets.len()].clone();
        engine
            .search_docs(&SearchRequest::new(keywords, TOP_K, access.clone()))
            .is_ok()
    };
    let one = drive(1, o.seconds, || (), search_in_process);
    let base = one.per_second();
    let mut errors = row("searchDocs in process", 1, &one, None, base);
    let all = drive(cores, o.seconds, || (), search_in_process);
    errors += row("searchDocs in process", cores, &all, None, base);
    drop(counts);

    // (label, server): the baseline build first, when there is one, then this one.
    let mut servers = Vec::new();
    if let Some(baseline) = &o.baseline {
        let traces = scratch.path().join("traces-baseline");
        let cmd = ragtrail(baseline, &data, &o.knowledge, &traces);
        servers.push((" [baseline]", start_server(cmd)));
    }
    let label = if o.baseline.is_some() {
        " [this build]"
    } else {
        ""
    };
    servers.push((label, start_server(cli())));
    for (label, server) in &servers {
        // For a profiler to attach to (`perf record -p PID`).
        eprintln!("server{label}: pid {}", server.child.id());
    }
    ragtrail::use_ring_for_tls();
    let client = || {
        reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap_or_else(|e| fail(&format!("http client: {e}")))
    };
    let post = |client: &reqwest::blocking::Client, base: &str, path: &str, body: Value| {
        client
            .post(format!("{base}{path}"))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .and_then(|r| r.error_for_status())
            .and_then(|r| r.bytes())
            .is_ok()
    };
    // Warm up: the first requests open connections and fill the servers' caches.
    let warm = client();
    for (_, server) in &servers {
        for i in 0..8 {
            let keywords = &keyword_sets[i % keyword_sets.len()];
            post(
                &warm,
                &server.base,
                "/v1/search",
                json!({ "keywords": keywords, "topK": TOP_K }),
            );
            post(
                &warm,
                &server.base,
                "/v1/ask",
                json!({ "question": questions[i % questions.len()] }),
            );
        }
    }
    let wanted = |what: &str| o.only.as_deref().is_none_or(|only| only == what);
    if wanted("search") {
        for c in CONCURRENCY {
            for (label, server) in &servers {
                let s = drive(c, o.seconds, client, |client, i| {
                    let keywords = &keyword_sets[i % keyword_sets.len()];
                    post(
                        client,
                        &server.base,
                        "/v1/search",
                        json!({ "keywords": keywords, "topK": TOP_K }),
                    )
                });
                let rss = rss_mib(server.child.id());
                errors += row(&format!("POST /v1/search{label}"), c, &s, Some(rss), base);
            }
        }
    }
    if wanted("ask") {
        for c in CONCURRENCY {
            for (label, server) in &servers {
                let s = drive(c, o.seconds, client, |client, i| {
                    let question = &questions[i % questions.len()];
                    post(
                        client,
                        &server.base,
                        "/v1/ask",
                        json!({ "question": question }),
                    )
                });
                let rss = rss_mib(server.child.id());
                errors += row(
                    &format!("POST /v1/ask (offline){label}"),
                    c,
                    &s,
                    Some(rss),
                    base,
                );
            }
        }
    }
    if o.smoke && errors > 0 {
        fail(&format!("{errors} requests failed"));
    }
}
