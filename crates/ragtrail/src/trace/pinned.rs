//! The format pinned: the canonical JSON of representative events, every record field set,
//! built from the runtime values the agent hands the trace (through `convert.rs`).
//! Renaming a field of a record (or of anything a record is built from) changes signed,
//! hash-chained traces, so it fails here first; a deliberate format change updates the text
//! below and docs/trace-format.md together.

use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::access::AccessContext;
use crate::search::fusion::FusionWeights;
use crate::search::sufficiency::Sufficiency;
use crate::search::{LegStats, SearchHit};

fn line(seq: u64, body: EventBody) -> String {
    let event = TraceEvent {
        v: TRACE_VERSION,
        run_id: uuid::Uuid::parse_str("01970000-0000-7000-8000-000000000000").unwrap(),
        seq,
        ts: chrono::DateTime::parse_from_rfc3339("2026-11-30T06:25:01.123Z")
            .unwrap()
            .with_timezone(&chrono::Utc),
        prev_hash: ZERO_HASH.to_string(),
        hash: String::new(),
        body,
    };
    let mut value = serde_json::to_value(&event).unwrap();
    let hash = event_hash(&value, None);
    value["hash"] = json!(hash);
    canonical_json(&value)
}

#[test]
fn a_search_event_is_written_as_pinned() {
    let hit = SearchHit {
        chunk_id: "leave.md#annual-leave".to_string(),
        title_path: "Leave / Annual leave".to_string(),
        snippet: "Employees accrue 年假 monthly".to_string(),
        source_uri: "leave.md#annual-leave".to_string(),
        score: 0.8125,
        metadata: BTreeMap::from([("bm25Rank".to_string(), "1".to_string())]),
    };
    let body = EventBody::Search(SearchRound {
        round: 2,
        keywords: vec!["annual leave".to_string()],
        reason: "the accrual rule".to_string(),
        top_k: 5,
        fusion: "confidence".to_string(),
        weights: Some(WeightsRecord::from(&FusionWeights {
            bm25: 0.625,
            lexical_confidence: Some(0.75),
        })),
        filters: SearchFilters {
            tenant: "acme".to_string(),
            roles: vec!["hr".to_string()],
            include_superseded: true,
        },
        legs: BTreeMap::from([
            (
                "bm25".to_string(),
                LegRecord::from(&LegStats {
                    count: 3,
                    latency_ms: 1.5,
                }),
            ),
            (
                "vector".to_string(),
                LegRecord::from(&LegStats {
                    count: 4,
                    latency_ms: 0.25,
                }),
            ),
        ]),
        hits: vec![TracedHit::of(&hit, &"c".repeat(64))],
        sufficiency: SufficiencyRecord::from(&Sufficiency {
            sufficient: false,
            reason: "missing key terms".to_string(),
            coverage: 0.5,
            union_coverage: 0.75,
            missing_terms: vec!["carry-over".to_string()],
        }),
        repeated: true,
        cached: Some(1),
        query: Some("How much annual leave?".to_string()),
        overrode_give_up: Some("nothing to search".to_string()),
    });
    assert_eq!(
        line(2, body),
        r#"{"cached":1,"filters":{"includeSuperseded":true,"roles":["hr"],"tenant":"acme"},"fusion":"confidence","hash":"991bbf80f1c7414a83842dcd47f4a1faea196a199d4de1c13ac78e6314b8d8f8","hits":[{"chunkId":"leave.md#annual-leave","contentHash":"cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc","metadata":{"bm25Rank":"1"},"score":0.8125,"snippet":"Employees accrue 年假 monthly","sourceUri":"leave.md#annual-leave","titlePath":"Leave / Annual leave"}],"keywords":["annual leave"],"legs":{"bm25":{"count":3,"latencyMs":1.5},"vector":{"count":4,"latencyMs":0.25}},"overrodeGiveUp":"nothing to search","prevHash":"0000000000000000000000000000000000000000000000000000000000000000","query":"How much annual leave?","reason":"the accrual rule","repeated":true,"round":2,"runId":"01970000-0000-7000-8000-000000000000","seq":2,"sufficiency":{"coverage":0.5,"missingTerms":["carry-over"],"reason":"missing key terms","sufficient":false,"unionCoverage":0.75},"topK":5,"ts":"2026-11-30T06:25:01.123Z","type":"search","v":1,"weights":{"bm25":0.625,"lexicalConfidence":0.75}}"#
    );
}

#[test]
fn a_run_start_is_written_as_pinned() {
    let body = EventBody::RunStarted(RunStarted {
        question: "How much annual leave?".to_string(),
        options: json!({"maxSearchRounds": 3}),
        access: AccessContext {
            tenant: "acme".to_string(),
            roles: vec!["hr".to_string()],
        },
        planner: "llm".to_string(),
        model: Some("small-chat".to_string()),
        embedder: EmbedderInfo {
            kind: "hashing".to_string(),
            model: "char-ngram-fnv1a-v1".to_string(),
            dims: 384,
            ..Default::default()
        },
        index_fingerprint: "gen-3".to_string(),
        knowledge_base: "kb-1".to_string(),
        version: "0.1.0".to_string(),
        today: "2026-11-30".to_string(),
        session_id: Some("s-1".to_string()),
        turn: Some(2),
        caller: Some("alice".to_string()),
        earlier_turns: vec![EarlierTurn {
            turn: 1,
            question: "Hi".to_string(),
            answer: "Hello".to_string(),
            trace: Some("t.jsonl".to_string()),
        }],
    });
    assert_eq!(
        line(0, body),
        r#"{"access":{"roles":["hr"],"tenant":"acme"},"caller":"alice","earlierTurns":[{"answer":"Hello","question":"Hi","trace":"t.jsonl","turn":1}],"embedder":{"dims":384,"kind":"hashing","model":"char-ngram-fnv1a-v1"},"hash":"153b7c2bc42f78eedf2796ba569c5194dd70f52fbae2407f19ad84e79357db1b","indexFingerprint":"gen-3","knowledgeBase":"kb-1","model":"small-chat","options":{"maxSearchRounds":3},"planner":"llm","prevHash":"0000000000000000000000000000000000000000000000000000000000000000","question":"How much annual leave?","runId":"01970000-0000-7000-8000-000000000000","seq":0,"sessionId":"s-1","today":"2026-11-30","ts":"2026-11-30T06:25:01.123Z","turn":2,"type":"run_started","v":1,"version":"0.1.0"}"#
    );
}

#[test]
fn a_memory_read_is_written_as_pinned() {
    use crate::memory::{Fact, FactSource};
    let city = Fact {
        key: "base city".to_string(),
        value: "成都".to_string(),
        source: FactSource::Asker,
        set_at: "2026-11-30T06:20:00Z".to_string(),
    };
    let grade = Fact {
        key: "grade".to_string(),
        value: "B类".to_string(),
        source: FactSource::Said {
            run_id: "01970000-0000-7000-8000-000000000001".to_string(),
        },
        set_at: "2026-11-29T06:20:00Z".to_string(),
    };
    let body = EventBody::MemoryRead(MemoryRead {
        used: vec![FactRecord::from(&city)],
        searched: vec![FactRecord::from(&city), FactRecord::from(&grade)],
        stated: vec!["start date".to_string()],
        unused: vec!["grade".to_string()],
    });
    assert_eq!(
        line(3, body),
        r#"{"hash":"f243e99c08a04f5070d0554935fef52ac71fac0ba609733cffa4115ca1c5c396","prevHash":"0000000000000000000000000000000000000000000000000000000000000000","runId":"01970000-0000-7000-8000-000000000000","searched":[{"key":"base city","setAt":"2026-11-30T06:20:00Z","source":"asker","value":"成都"},{"key":"grade","setAt":"2026-11-29T06:20:00Z","source":"run:01970000-0000-7000-8000-000000000001","value":"B类"}],"seq":3,"stated":["start date"],"ts":"2026-11-30T06:25:01.123Z","type":"memory_read","unused":["grade"],"used":[{"key":"base city","setAt":"2026-11-30T06:20:00Z","source":"asker","value":"成都"}],"v":1}"#
    );
    // A recorded fact reads back as the memory held it.
    assert_eq!(Fact::from(&FactRecord::from(&grade)), grade);
}
