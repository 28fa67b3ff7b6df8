//! `searchDocs` and ingest against the real multilingual-e5-small server of
//! `scripts/embed-server.sh` (see `common::embed_server`): paraphrases and cross-language
//! questions found by the vector leg, query/passage marking, a wrong dimension, batches, and a
//! server that goes away in the middle of an ingest.

use crate::common::{self, embed_server};

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ragtrail::AccessContext;
use ragtrail::Fusion;
use ragtrail::RetryPolicy;
use ragtrail::{
    EmbedConfig, EmbedError, Embedder, EmbedderChoice, HttpEmbedder, HttpEmbedderConfig, Marking,
    embedder_from_config as from_config,
};
use ragtrail::{Engine, EngineError, IngestOptions, IngestProgress};
use ragtrail::{SearchError, SearchHit, SearchRequest};

fn config(settings: &embed_server::Settings) -> HttpEmbedderConfig {
    let mut c = HttpEmbedderConfig::new(settings.base_url.clone(), settings.model.clone());
    c.marking = settings
        .marking
        .parse()
        .expect("the script's marking parses");
    // Small requests: on a loaded 2-core machine 64 chunks can take longer than a request may.
    c.batch_size = 8;
    c
}

fn embedder(settings: &embed_server::Settings) -> Arc<dyn Embedder> {
    Arc::new(HttpEmbedder::connect(config(settings)).expect("connect to the embeddings server"))
}

/// The bundled knowledge/ folder, ingested once with the shared server for the tests that
/// only search it.
fn knowledge_index() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // Under the target's scratch folder, made afresh by each run: a static is never
        // dropped, so a temporary folder would be left behind by every run.
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("e5-knowledge");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch folder for the e5 index");
        let mut engine = Engine::open_with(&dir, embedder(embed_server::shared())).expect("open");
        ingest_bundled_knowledge(&mut engine);
        dir
    })
}

/// Ingests the bundled knowledge/ folder with the engine's embedder.
fn ingest_bundled_knowledge(engine: &mut Engine) {
    engine
        .ingest(
            &common::repo_root().join("knowledge"),
            &IngestOptions::default(),
            &mut |_| {},
        )
        .expect("ingest knowledge/");
}

fn knowledge_engine() -> Engine {
    Engine::open_with(knowledge_index(), embedder(embed_server::shared())).expect("open")
}

/// The id of the chunk of `source` whose titlePath ends with `heading`.
fn chunk_id(engine: &Engine, source: &str, heading: &str) -> String {
    engine
        .store()
        .chunks()
        .expect("chunk records")
        .iter()
        .find(|c| c.source == source && c.title_path.ends_with(heading))
        .unwrap_or_else(|| panic!("no chunk {heading:?} in {source}"))
        .id
        .clone()
}

fn search(engine: &Engine, keywords: &[&str], fusion: Option<Fusion>) -> Vec<SearchHit> {
    let mut req = SearchRequest::new(
        keywords.iter().map(|k| k.to_string()).collect(),
        5,
        AccessContext::default(),
    );
    req.fusion = fusion;
    engine.search_docs(&req).expect("search").hits
}

fn ids(hits: &[SearchHit]) -> Vec<&str> {
    hits.iter().map(|h| h.chunk_id.as_str()).collect()
}

#[test]
fn the_index_records_the_server_model_and_its_marking() {
    let engine = knowledge_engine();
    let info = engine.store().manifest().embedder.clone().expect("vectors");
    assert_eq!(info.kind, "http");
    assert_eq!(info.model, embed_server::shared().model);
    assert_eq!(info.dims, 384);
    assert_eq!(
        info.marking,
        Marking::InputType {
            query: "query".into(),
            passage: "passage".into()
        }
    );
}

#[test]
fn a_chinese_paraphrase_finds_the_paternity_leave_chunk() {
    let engine = knowledge_engine();
    let want = chunk_id(&engine, "hr/parental-leave.md", "陪产假");
    // No word of the question is in the chunk but 休: the vector leg has to carry it.
    let vector = search(&engine, &["老婆生孩子能休几天"], Some(Fusion::VectorOnly));
    assert_eq!(ids(&vector).first(), Some(&want.as_str()), "{vector:#?}");
    let fused = search(&engine, &["老婆生孩子能休几天"], None);
    assert!(
        ids(&fused).contains(&want.as_str()),
        "the default fusion keeps it: {fused:#?}"
    );
}

#[test]
fn an_english_question_finds_a_chinese_chunk() {
    let engine = knowledge_engine();
    let want = chunk_id(&engine, "hr/parental-leave.md", "哺乳时间");
    let question = ["How long is the daily breastfeeding break for a baby under one year?"];
    let vector = search(&engine, &question, Some(Fusion::VectorOnly));
    assert_eq!(ids(&vector).first(), Some(&want.as_str()), "{vector:#?}");
    let fused = search(&engine, &question, None);
    let hit = fused
        .iter()
        .find(|h| h.chunk_id == want)
        .unwrap_or_else(|| panic!("the default fusion keeps it: {fused:#?}"));
    assert!(hit.title_path.contains("哺乳时间"), "{hit:?}");
    assert!(hit.metadata.contains_key("vectorRank"), "{hit:?}");
}

#[test]
fn confidence_fusion_lets_the_vector_leg_lead_where_bm25_only_shares_common_words() {
    let engine = knowledge_engine();
    let want = chunk_id(&engine, "hr/parental-leave.md", "哺乳时间");
    // English keywords over a Chinese chunk: BM25 matches English sections on `under`, `one`,
    // `year`, none far ahead of the next and none covering the question.
    let keywords = [
        "long",
        "daily",
        "under",
        "one",
        "year",
        "baby",
        "break",
        "breastfeeding",
    ];
    let mut req = SearchRequest::new(
        keywords.iter().map(|k| k.to_string()).collect(),
        5,
        AccessContext::default(),
    );
    req.fusion = Some("minmax:0.5".parse().expect("fusion"));
    let fixed = engine.search_docs(&req).expect("search");
    assert!(
        !ids(&fixed.hits).contains(&want.as_str()),
        "fixed equal weights bury it under English hits: {:#?}",
        fixed.hits
    );
    assert_eq!(fixed.weights.map(|w| w.bm25), Some(0.5));
    req.fusion = Some("confidence:1".parse().expect("fusion"));
    let confident = engine.search_docs(&req).expect("search");
    let hit = confident
        .hits
        .iter()
        .find(|h| h.chunk_id == want)
        .unwrap_or_else(|| panic!("confidence fusion brings it: {:#?}", confident.hits));
    assert!(hit.title_path.ends_with("哺乳时间"), "{hit:?}");
    assert_eq!(
        hit.metadata.get("vectorRank").map(String::as_str),
        Some("1")
    );
    assert!(!hit.metadata.contains_key("bm25Rank"), "{hit:?}");
    // The weight it earned is recorded: BM25 had little confidence, so it had little say.
    let weights = confident
        .weights
        .expect("a min-max mode records its weights");
    let c = weights.lexical_confidence.expect("the confidence it read");
    assert!(c < 0.2, "{weights:?}");
    assert!((weights.bm25 - c).abs() < 1e-12, "{weights:?}");
}

#[test]
fn standout_coverage_lets_the_meaning_lead_an_everyday_question() {
    let engine = knowledge_engine();
    let want = chunk_id(&engine, "finance/travel-expense-policy.md", "自驾与租车");
    // 油钱 and 自己的车 are not the policy's words (it says 私车 and 燃油): BM25's best hit,
    // in the sick-leave rules, stands out on a word or two and holds little of the question.
    let question = ["开自己的车去外地出差，油钱怎么报？"];
    let rank = |hits: &[SearchHit]| hits.iter().position(|h| h.chunk_id == want);
    let standout = search(&engine, &question, Some(Fusion::Standout));
    let mut req = SearchRequest::new(vec![question[0].to_string()], 5, AccessContext::default());
    req.fusion = Some(Fusion::StandoutCoverage);
    let covered = engine.search_docs(&req).expect("search");
    assert_eq!(rank(&covered.hits), Some(0), "{:#?}", covered.hits);
    assert!(
        rank(&standout).is_none_or(|r| r > 0),
        "standout alone lets BM25's best hit lead: {standout:#?}"
    );
    // The coverage it read is recorded beside the weight it gave BM25.
    let weights = covered.weights.expect("a min-max mode records its weights");
    let c = weights.lexical_confidence.expect("the coverage it read");
    assert!(c < 0.5, "{weights:?}");
    assert!(weights.bm25 < 0.5, "{weights:?}");
}

#[test]
fn the_vector_leg_embeds_the_question_when_one_is_given() {
    let engine = knowledge_engine();
    let want = chunk_id(&engine, "hr/parental-leave.md", "陪产假");
    // Keywords that say nothing of the topic, and the question in words beside them: a
    // semantic embedder reads the question, so the paternity-leave section comes first.
    let mut req = SearchRequest::new(vec!["密码".into()], 5, AccessContext::default());
    req.fusion = Some(Fusion::VectorOnly);
    let keywords_only = engine.search_docs(&req).expect("search").hits;
    assert_ne!(
        ids(&keywords_only).first(),
        Some(&want.as_str()),
        "{keywords_only:#?}"
    );
    req.query = Some("老婆生孩子，我能休几天陪产假？".into());
    let with_question = engine.search_docs(&req).expect("search").hits;
    assert_eq!(
        ids(&with_question).first(),
        Some(&want.as_str()),
        "{with_question:#?}"
    );
}

#[test]
fn queries_and_passages_are_embedded_differently() {
    let e = embedder(embed_server::shared());
    let text = "陪产假10天";
    let q = e.embed_query(&[text]).expect("query").remove(0);
    let p = e.embed(&[text]).expect("passage").remove(0);
    let cos: f32 = q.iter().zip(&p).map(|(a, b)| a * b).sum();
    assert!(cos < 0.999, "the input_type reached the server: cos {cos}");
    assert!(cos > 0.8, "still the same text: cos {cos}");
}

#[test]
fn a_wrong_declared_dimension_is_an_error_naming_both() {
    let mut c = config(embed_server::shared());
    c.dims = Some(768);
    let e = HttpEmbedder::connect(c).expect("a declared dimension sends nothing");
    match e.embed(&["年假"]) {
        Err(EmbedError::Dimensions {
            expected, found, ..
        }) => assert_eq!((expected, found), (768, 384)),
        other => panic!("expected a dimension error, got {other:?}"),
    }
}

#[test]
fn batches_keep_input_order_and_long_texts_are_cut() {
    let mut c = config(embed_server::shared());
    c.batch_size = 4;
    c.concurrency = 2;
    c.max_input_chars = 40;
    let e = HttpEmbedder::connect(c).expect("connect");
    let texts: Vec<String> = (0..11)
        .map(|i| format!("第{i}条：出差住宿标准 {}", "长".repeat(i * 8)))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let together = e.embed(&refs).expect("batched");
    assert_eq!(together.len(), texts.len());
    for i in [0, 5, 10] {
        let alone = e.embed(&[refs[i]]).expect("alone").remove(0);
        let cos: f32 = alone.iter().zip(&together[i]).map(|(a, b)| a * b).sum();
        assert!(cos > 0.999, "text {i} came back in its place: cos {cos}");
    }
    // Texts 4..=10 are longer than 40 characters: 7 cut in the batch, then 5 and 10 alone.
    assert_eq!(e.truncated_inputs(), 7 + 2);
}

#[test]
fn changing_the_marking_needs_a_rebuild_with_a_message_that_says_so() {
    let ws = common::Workspace::new();
    ws.write("a.md", "# 年假\n\n员工每年享受带薪年假5天。\n");
    let settings = embed_server::shared();
    let mut engine = Engine::open_with(&ws.data(), embedder(settings)).expect("open");
    ws.ingest(&mut engine);
    drop(engine);
    let mut unmarked = config(settings);
    unmarked.marking = Marking::None;
    let plain: Arc<dyn Embedder> = Arc::new(HttpEmbedder::connect(unmarked).expect("connect"));
    let mut engine = Engine::open_with(&ws.data(), plain).expect("open");
    let err = engine
        .search_docs(&SearchRequest::new(
            vec!["年假".into()],
            3,
            AccessContext::default(),
        ))
        .expect_err("the marking differs");
    assert!(
        matches!(
            err,
            EngineError::Search(SearchError::EmbedderMismatch { .. })
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("marking input-type query/passage"), "{text}");
    assert!(text.contains("ingest --rebuild"), "{text}");
    let again = engine.ingest(&ws.knowledge(), &IngestOptions::default(), &mut |_| {});
    assert!(again.is_err(), "a plain ingest refuses too");
    engine
        .ingest(
            &ws.knowledge(),
            &IngestOptions {
                rebuild: true,
                ..IngestOptions::default()
            },
            &mut |_| {},
        )
        .expect("rebuild");
    let info = engine.store().manifest().embedder.clone().expect("vectors");
    assert_eq!(info.marking, Marking::None);
}

#[test]
fn the_configuration_builds_a_marked_endpoint_embedder() {
    let s = embed_server::shared();
    let e = from_config(&EmbedConfig {
        choice: EmbedderChoice::Auto,
        base_url: Some(s.base_url.clone()),
        model: Some(s.model.clone()),
        marking: Some(s.marking.parse().expect("marking")),
        ..EmbedConfig::default()
    })
    .expect("endpoint embedder");
    let info = e.info();
    assert_eq!((info.kind.as_str(), info.dims), ("http", 384));
    assert_eq!(info.marking.to_string(), "input-type query/passage");
}

#[test]
fn a_server_that_goes_away_mid_ingest_leaves_the_previous_index_and_the_next_ingest_resumes() {
    let server = embed_server::OwnServer::start();
    let ws = common::Workspace::new();
    ws.write(
        "hr/leave.md",
        "# 陪产假\n\n男员工的配偶生育的，享受陪产假10天。\n",
    );
    let mut c = config(&server.settings);
    // Two chunks per request and one request at a time: many batches, so the server can go
    // between two of them; retries kept short.
    c.batch_size = 2;
    c.concurrency = 1;
    c.policy = RetryPolicy {
        max_retries: 1,
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(40),
        connect_timeout: Duration::from_secs(2),
        ..RetryPolicy::default()
    };
    let e: Arc<dyn Embedder> = Arc::new(HttpEmbedder::connect(c).expect("connect"));
    let mut engine = Engine::open_with(&ws.data(), e.clone()).expect("open");
    ws.ingest(&mut engine);
    let before = engine.store().generation();
    let leave = chunk_id(&engine, "hr/leave.md", "陪产假");

    for i in 0..12 {
        ws.write(
            &format!("finance/rule-{i}.md"),
            &format!(
                "# 差旅规则{i}\n\n第{i}条：出差住宿费凭酒店增值税发票报销，每晚不超过{}元。\n",
                300 + i
            ),
        );
    }
    let mut stopped = false;
    let err = engine
        .ingest(&ws.knowledge(), &IngestOptions::default(), &mut |p| {
            if let IngestProgress::Embedded { done } = p
                && done > 0
                && !stopped
            {
                server.stop();
                stopped = true;
            }
        })
        .expect_err("the server went away");
    assert!(stopped, "the ingest got as far as the first batch");
    let text = err.to_string();
    assert!(
        text.contains(&format!("127.0.0.1:{}", server.port)),
        "the error names the endpoint: {text}"
    );
    // Nothing of the failed ingest is visible: same generation, the old chunk still found,
    // and the next generation's folder, whose vectors were being written, is gone.
    assert_eq!(engine.store().generation(), before);
    let next_folder = engine.store().dir().join(format!("gen-{}", before + 1));
    assert!(!next_folder.exists(), "{} is left", next_folder.display());
    assert_eq!(engine.store().documents().len(), 1);
    // BM25 alone: the vector leg needs the server to embed the query.
    let hits = search(&engine, &["陪产假"], Some(Fusion::Bm25Only));
    assert_eq!(ids(&hits), [leave.as_str()]);
    drop(engine);
    let reopened = Engine::open_with(&ws.data(), e.clone()).expect("reopen");
    assert_eq!(reopened.store().generation(), before);
    drop(reopened);

    // The first batch was embedded before the server went: it is kept, not asked for again.
    assert!(
        ws.data().join("embed-journal.bin").exists(),
        "the embedded batch is on disk"
    );
    server.restart();
    let mut engine = Engine::open_with(&ws.data(), e.clone()).expect("open again");
    let mut kept = None;
    let mut asked = None;
    let summary = engine
        .ingest(
            &ws.knowledge(),
            &IngestOptions::default(),
            &mut |p| match p {
                IngestProgress::Resumed { kept: k } => kept = Some(k),
                IngestProgress::Embedding { total } => asked = Some(total),
                _ => {}
            },
        )
        .expect("the next ingest completes");
    assert_eq!((kept, asked), (Some(2), Some(10)));
    assert!(
        !ws.data().join("embed-journal.bin").exists(),
        "the journal is gone once its vectors are committed"
    );
    // A kept vector is the one the server gives for its chunk's text.
    let store = engine.store();
    let (row, chunk) = store
        .chunks()
        .expect("chunk records")
        .iter()
        .enumerate()
        .find(|(_, c)| c.source == "finance/rule-0.md")
        .expect("rule-0 is ingested");
    let direct = e
        .embed(&[format!("{}\n{}", chunk.title_path, chunk.text).as_str()])
        .expect("embed");
    let cosine: f32 = store
        .vectors()
        .row(row)
        .iter()
        .zip(&direct[0])
        .map(|(a, b)| a * b)
        .sum();
    assert!(cosine > 0.999, "kept vector matches the server's: {cosine}");
    assert_eq!(summary.added.len(), 12);
    assert_eq!(engine.store().documents().len(), 13);
    let want = chunk_id(&engine, "finance/rule-7.md", "差旅规则7");
    let hits = search(&engine, &["每晚不超过307元"], None);
    assert_eq!(ids(&hits).first(), Some(&want.as_str()), "{hits:#?}");
}

/// Runs the offline planner over `engine` without a trace.
fn ask_offline(engine: &Engine, question: &str) -> ragtrail::AgentOutcome {
    let mut planner = ragtrail::OfflinePlanner::new();
    ragtrail::run_agent(
        engine,
        &mut planner,
        question,
        &ragtrail::RunSettings::new(
            ragtrail::AgentRagOptions::default(),
            AccessContext::default(),
            "2026-11-30",
        ),
        &mut |_| {},
    )
    .expect("run")
}

#[test]
fn a_passage_whose_meaning_stands_out_is_given_as_evidence_when_the_words_do_not_cover_it() {
    // "laptop", "stolen", "flat": the policy says "device", "lost or stolen", "home".
    let question = "I work from home in Singapore and my work laptop was just stolen from my flat. How quickly do I need to report it, and do I need to go to the police?";
    let engine = knowledge_engine();
    let outcome = ask_offline(&engine, question);
    assert_eq!(
        outcome.status,
        ragtrail::trace::RunStatus::Evidence,
        "{}",
        outcome.reason
    );
    let cited: Vec<&str> = outcome
        .answer
        .as_ref()
        .expect("evidence carries its citations")
        .citations
        .iter()
        .map(|c| c.title_path.as_str())
        .collect();
    assert!(
        cited.iter().any(|t| t.starts_with(
            "Information Security Policy for Overseas Offices / Lost or Stolen Devices"
        )),
        "{cited:?}"
    );

    // The same knowledge with the hashing embedder: "flat" is in no passage, a word of the
    // asker's circumstance, not the subject; the passages the other words cover are evidence
    // there too (issue 38 item 2: everyday words never refuse by themselves).
    let ws = common::Workspace::new();
    let mut hashing = Engine::open(&ws.data()).expect("open");
    ingest_bundled_knowledge(&mut hashing);
    let outcome = ask_offline(&hashing, question);
    assert_eq!(
        outcome.status,
        ragtrail::trace::RunStatus::Evidence,
        "{}",
        outcome.reason
    );
    assert!(
        outcome
            .answer
            .as_ref()
            .expect("evidence carries its citations")
            .citations
            .iter()
            .any(|c| c.title_path.starts_with(
                "Information Security Policy for Overseas Offices / Lost or Stolen Devices"
            )),
        "{:?}",
        outcome.answer
    );
}

#[test]
fn the_agent_searches_led_by_meaning_find_a_section_in_other_words() {
    // 老婆 and 孩子 are nowhere in the knowledge base: the default `standout` (BM25's best hits
    // do not stand out, the model's does), `standout-coverage` (what embed-server.sh prints)
    // and `coverage:1` alike bring 陪产假.
    let question = "老婆下个月生孩子，我能请几天假？";
    let mut engine = knowledge_engine();
    assert_eq!(engine.settings.agent_fusion, engine.settings.fusion);
    let want = chunk_id(&engine, "hr/parental-leave.md", "陪产假");
    let seen = |outcome: &ragtrail::AgentOutcome| {
        outcome
            .rounds
            .iter()
            .any(|r| r.hits.iter().any(|h| h.chunk_id == want))
    };
    let by_default = ask_offline(&engine, question);
    assert!(seen(&by_default), "{:#?}", by_default.rounds);
    // The offline planner now also searches 老婆 and 孩子 as the documents' 配偶 and 生育
    // (issue 38 item 2), so even fixed equal weights find it.
    for led_by_meaning in ["minmax:0.5", "standout-coverage", "coverage:1"] {
        engine.settings.agent_fusion = led_by_meaning.parse().expect("fusion");
        let led = ask_offline(&engine, question);
        assert!(seen(&led), "{led_by_meaning}: {:#?}", led.rounds);
    }
}

#[test]
fn a_question_the_knowledge_base_does_not_answer_stays_refused_with_the_semantic_leg() {
    // Marriage leave: no section grants it, though the leave sections are near in meaning.
    let outcome = ask_offline(&knowledge_engine(), "结婚能休几天婚假？");
    assert_eq!(
        outcome.status,
        ragtrail::trace::RunStatus::InsufficientEvidence,
        "{}",
        outcome.reason
    );
}
