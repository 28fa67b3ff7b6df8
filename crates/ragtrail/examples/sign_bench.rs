//! What signing costs a run and what verifying one costs a third party.
//!
//! Writes RUNS traces of a typical shape (run_started, two search rounds of five hits, an
//! answer) into one trace directory, half unsigned and half signed, and times:
//! - `finish` (run_finished + ledger entry) with and without the signing key: the difference is
//!   the signing cost of a run;
//! - `check_integrity` (chain + ledger, what audit does) and `verify_signed` with the public key
//!   (chain + ledger + the run's two signatures + every signed ledger entry).
//!
//! Prints medians in microseconds. `cargo run -p ragtrail --example sign_bench -- 200`

use std::sync::Arc;
use std::time::Instant;

use ragtrail::AccessContext;
use ragtrail::trace::{
    AnswerEvent, Citation, EventBody, HitRecord, RunStarted, RunStatus, SearchRound, SigningKey,
    TraceWriter, TracedHit, check_integrity, verify_signed,
};

fn body_events(round: u32) -> EventBody {
    let hits = (0..5)
        .map(|i| TracedHit {
            hit: HitRecord {
                chunk_id: format!("c_{round:04}{i:012}"),
                title_path: "差旅报销制度 > 交通费 > 火车票".into(),
                snippet: "高铁票须提供铁路电子客票报销凭证，截图不予报销。".repeat(4),
                source_uri: "finance/travel.md#交通费".into(),
                score: 0.5 / f64::from(i + 1),
                metadata: Default::default(),
            },
            content_hash: "ab".repeat(32),
        })
        .collect();
    EventBody::Search(SearchRound {
        round,
        keywords: vec!["高铁".into(), "报销凭证".into()],
        reason: "content words".into(),
        top_k: 5,
        fusion: "agree:0.5".into(),
        hits,
        ..SearchRound::default()
    })
}

fn write_run(dir: &std::path::Path, signer: Option<Arc<SigningKey>>) -> (f64, std::path::PathBuf) {
    let mut w = TraceWriter::create(dir, uuid::Uuid::now_v7(), None)
        .expect("create")
        .with_signer(signer);
    w.append(EventBody::RunStarted(RunStarted {
        question: "坐高铁出差，报销凭证要怎么弄？".into(),
        options: serde_json::json!({"maxSearchRounds": 3, "topKPerRound": 5}),
        access: AccessContext::default(),
        planner: "offline".into(),
        model: None,
        embedder: Default::default(),
        index_fingerprint: "gen-1:120".into(),
        version: "bench".into(),
        today: "2026-12-01".into(),
        session_id: None,
        turn: None,
        knowledge_base: "kb-bench".into(),
        earlier_turns: Vec::new(),
        caller: None,
    }))
    .expect("append");
    for round in 1..=2 {
        w.append(body_events(round)).expect("append");
    }
    w.append(EventBody::Answer(AnswerEvent {
        text: "须提供铁路电子客票报销凭证。".into(),
        citations: vec![Citation {
            chunk_id: "c_0001000000000000".into(),
            quote: "高铁票须提供铁路电子客票报销凭证".into(),
            ..Citation::default()
        }],
        grounded: true,
        ..AnswerEvent::default()
    }))
    .expect("append");
    let started = Instant::now();
    let finished = w
        .finish(RunStatus::Answered, "answered", 2, 2)
        .expect("finish");
    (started.elapsed().as_secs_f64() * 1e6, finished.path)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir().expect("tempdir");
    let key = Arc::new(SigningKey::generate().expect("key"));
    let public = key.public_key();
    let (mut plain, mut signed, mut paths) = (Vec::new(), Vec::new(), Vec::new());
    // Interleaved, so both see the same ledger length and machine load.
    for _ in 0..runs {
        plain.push(write_run(dir.path(), None).0);
        let (t, p) = write_run(dir.path(), Some(key.clone()));
        signed.push(t);
        paths.push(p);
    }
    let (mut integrity, mut verify) = (Vec::new(), Vec::new());
    for p in &paths {
        let t = Instant::now();
        let (i, _) = check_integrity(p, None).expect("check");
        integrity.push(t.elapsed().as_secs_f64() * 1e6);
        assert_eq!(i.status, "clean");
        let t = Instant::now();
        let r = verify_signed(p, std::slice::from_ref(&public), None, None).expect("verify");
        verify.push(t.elapsed().as_secs_f64() * 1e6);
        assert!(r.ok(), "{r:?}");
    }
    let sig = {
        let msg = ragtrail::trace::entry_message(&"ab".repeat(32));
        let mut xs = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            let s = key.sign(&msg);
            xs.push(t.elapsed().as_secs_f64() * 1e6);
            assert!(public.verifies(&msg, &s));
        }
        median(xs)
    };
    let ver = {
        let msg = ragtrail::trace::entry_message(&"ab".repeat(32));
        let s = key.sign(&msg);
        let mut xs = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            assert!(public.verifies(&msg, &s));
            xs.push(t.elapsed().as_secs_f64() * 1e6);
        }
        median(xs)
    };
    println!("runs {runs} (ledger ends with {} entries)", 2 * runs);
    println!(
        "finish unsigned          median {:>8.1} µs",
        median(plain.clone())
    );
    println!(
        "finish signed            median {:>8.1} µs",
        median(signed.clone())
    );
    println!("one Ed25519 signature    median {sig:>8.1} µs");
    println!("one Ed25519 verification median {ver:>8.1} µs");
    println!(
        "check_integrity (audit)  median {:>8.1} µs",
        median(integrity)
    );
    println!("verify_signed            median {:>8.1} µs", median(verify));
}
