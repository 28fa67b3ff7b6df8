//! Evidence time travel, through the binary as a user runs it: the text a run was shown is kept
//! after its document is edited or removed (embedded store and PostgreSQL), `audit` quotes it
//! and says whether today's chunk still says it, `show ID@HASH` prints it, and another tenant
//! cannot tell it exists.

use std::process::Output;

use crate::common::cli::{ragtrail_in_workspace, text};
use crate::common::pg::TestDb;
use crate::common::*;
use serde_json::Value;

const QUESTION: &str = "高铁票报销需要什么凭证？";
const OLD_SENTENCE: &str = "高铁票须提供铁路电子客票报销凭证，截图不予报销。";
const NEW_SENTENCE: &str = "高铁票须提供纸质车票报销凭证，截图不予报销。";

/// A knowledge folder with the travel policy, run by the binary against the embedded store or
/// a database.
struct Kb {
    ws: Workspace,
    env: Vec<(&'static str, String)>,
}

impl Kb {
    fn new(database_url: Option<&str>) -> Self {
        let ws = Workspace::new();
        ws.write("finance/travel.md", TRAVEL);
        ws.write("hr/leave.md", LEAVE_EN);
        let env = database_url
            .map(|u| vec![("DATABASE_URL", u.to_string())])
            .unwrap_or_default();
        Self { ws, env }
    }

    fn run(&self, args: &[&str]) -> Output {
        let env: Vec<(&str, &str)> = self.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        ragtrail_in_workspace(self.ws.dir.path(), args, &env)
    }

    /// Runs and expects `code`; returns (stdout, stderr).
    fn expect(&self, args: &[&str], code: i32) -> (String, String) {
        let out = self.run(args);
        let (stdout, stderr) = text(&out);
        assert_eq!(
            out.status.code(),
            Some(code),
            "ragtrail {args:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
        (stdout, stderr)
    }

    fn ingest(&self, extra: &[&str]) -> String {
        let mut args = vec!["ingest"];
        args.extend_from_slice(extra);
        self.expect(&args, 0).0
    }
}

/// Asks the question; returns (cited chunk id, the content hash the run was shown, trace path).
fn asked(kb: &Kb) -> (String, String, String) {
    kb.ingest(&[]);
    let (stdout, _) = kb.expect(&["ask", "--planner", "offline", "--json", QUESTION], 0);
    let outcome: Value = serde_json::from_str(&stdout).expect("ask --json");
    let citation = &outcome["citations"][0];
    assert_eq!(
        citation["titlePath"], "差旅报销制度 / 交通费 / 火车票",
        "{outcome:#}"
    );
    assert_eq!(citation["quote"], OLD_SENTENCE, "{outcome:#}");
    let id = citation["chunkId"].as_str().expect("chunk id").to_string();
    let trace = outcome["trace"].as_str().expect("trace").to_string();
    let (json, _) = kb.expect(&["audit", &trace, "--json"], 0);
    let audit: Value = serde_json::from_str(&json).expect("audit json");
    let seen = &audit["citations"][0]["seen"];
    assert_eq!(seen["version"], "kept", "{audit:#}");
    assert_eq!(seen["today"], "same", "{audit:#}");
    assert_eq!(seen["text"], OLD_SENTENCE, "{audit:#}");
    let hash = audit["citations"][0]["recordedHash"]
        .as_str()
        .expect("recorded hash")
        .to_string();
    assert_eq!(
        hash,
        ragtrail::internals::sha256_hex(OLD_SENTENCE.as_bytes())
    );
    (id, hash, trace)
}

/// The whole story on one backend: edit, audit, show, delete, audit, another tenant, prune.
fn time_travel(kb: &Kb) {
    let (id, hash, trace) = asked(kb);
    let old_ref = format!("{id}@{}", &hash[..12]);

    // The cited paragraph is edited and re-ingested.
    kb.ws.write(
        "finance/travel.md",
        &TRAVEL.replace(OLD_SENTENCE, NEW_SENTENCE),
    );
    assert!(kb.ingest(&[]).contains("1 changed"));
    let (audit, _) = kb.expect(&["audit", &trace], 1);
    assert!(
        audit.contains(&format!("text the run was shown ({id}@{}", &hash[..16])),
        "{audit}"
    );
    assert!(
        audit.contains(&format!("\n        {OLD_SENTENCE}\n")),
        "the exact old text: {audit}"
    );
    assert!(audit.contains("in the store now: changed"), "{audit}");
    assert!(
        audit.contains("高铁票须提供[-铁路电子客-]{+纸质车+}票报销凭证，截图不予报销。"),
        "a word diff: {audit}"
    );
    assert!(
        audit.contains("(verified in the chunk)"),
        "the quote is checked against the text the run saw: {audit}"
    );

    // show: the old text by its hash, today's text by the id alone.
    let (shown, _) = kb.expect(&["show", &old_ref], 0);
    assert!(
        shown.starts_with(&format!("chunk {id}@{hash}  (a past text")),
        "{shown}"
    );
    assert!(shown.contains(&format!("\n{OLD_SENTENCE}\n")), "{shown}");
    let (json, _) = kb.expect(&["show", &old_ref, "--json"], 0);
    let v: Value = serde_json::from_str(&json).expect("show json");
    assert_eq!(v["text"], OLD_SENTENCE);
    assert_eq!(v["state"], "past");
    assert_eq!(v["titlePath"], "差旅报销制度 / 交通费 / 火车票");
    assert_eq!(v["versions"].as_array().map(Vec::len), Some(2), "{v:#}");
    let (today, _) = kb.expect(&["show", &id], 0);
    assert!(today.contains("(today's text)"), "{today}");
    assert!(today.contains(&format!("\n{NEW_SENTENCE}\n")), "{today}");

    // The document is removed and the folder re-ingested: the text the run saw is still there.
    kb.ws.remove("finance/travel.md");
    assert!(kb.ingest(&[]).contains("1 removed"));
    let (audit, _) = kb.expect(&["audit", &trace], 1);
    assert!(
        audit.contains(&format!("\n        {OLD_SENTENCE}\n")),
        "still the exact old text: {audit}"
    );
    assert!(audit.contains("in the store now: deleted"), "{audit}");
    assert!(audit.contains("was deleted since the run"), "{audit}");
    let (json, _) = kb.expect(&["audit", &trace, "--json"], 1);
    let a: Value = serde_json::from_str(&json).expect("audit json");
    assert_eq!(a["citations"][0]["seen"]["today"], "deleted");
    assert_eq!(a["citations"][0]["seen"]["text"], OLD_SENTENCE);
    let (markdown, _) = kb.expect(&["audit", &trace, "--format", "markdown"], 1);
    assert!(
        markdown.contains(&format!("> {OLD_SENTENCE}")),
        "{markdown}"
    );
    assert!(markdown.contains("Today: **deleted**"), "{markdown}");
    let (shown, _) = kb.expect(&["show", &old_ref], 0);
    assert!(shown.contains(&format!("\n{OLD_SENTENCE}\n")), "{shown}");
    assert!(shown.contains("no longer in the knowledge base"), "{shown}");

    // Another tenant: not visible, worded exactly as an id that never existed.
    let (_, hidden) = kb.expect(&["--tenant", "globex", "show", &old_ref], 1);
    let never = "c_0123456789abcdef";
    let (_, unknown) = kb.expect(&["--tenant", "globex", "show", never], 1);
    assert!(!hidden.contains(OLD_SENTENCE), "{hidden}");
    assert_eq!(hidden.replace(&id, never), unknown);
    assert!(unknown.contains("no chunk c_0123456789abcdef"), "{unknown}");
    let (_, no_such) = kb.expect(&["show", &format!("{id}@00000000")], 1);
    assert!(no_such.contains("has no version 00000000"), "{no_such}");
    let (_, bad) = kb.expect(&["show", "c_12"], 3);
    assert!(bad.contains("is not a chunk id"), "{bad}");

    // Pruning keeps no past text: the audit says so and still runs.
    let pruned = kb.ingest(&["--keep-versions", "0"]);
    assert!(pruned.contains("pruned (--keep-versions)"), "{pruned}");
    let (audit, _) = kb.expect(&["audit", &trace], 1);
    assert!(
        audit.contains("text the run was shown: pruned on "),
        "{audit}"
    );
    assert!(audit.contains("in the store now: deleted"), "{audit}");
    let (_, gone) = kb.expect(&["show", &old_ref], 1);
    assert!(gone.contains("was pruned on"), "{gone}");
    // Today's texts are never pruned.
    let (leave, _) = kb.expect(&["search", "annual", "leave", "--json"], 0);
    let hits: Value = serde_json::from_str(&leave).expect("hits");
    let leave_id = hits[0]["chunkId"].as_str().expect("leave chunk");
    let (shown, _) = kb.expect(&["show", leave_id], 0);
    assert!(shown.contains("(today's text)"), "{shown}");
}

#[test]
fn the_text_a_run_saw_outlives_edits_and_removal_in_the_embedded_store() {
    let kb = Kb::new(None);
    time_travel(&kb);
    // One line per distinct text: the edit added one, re-ingesting unchanged files none.
    let versions =
        std::fs::read_to_string(kb.ws.data().join("store/versions.jsonl")).expect("versions file");
    let chunks_then = versions
        .lines()
        .filter(|l| l.contains("\"source\":\"hr/leave.md\""))
        .count();
    kb.ingest(&["--rebuild"]);
    let again =
        std::fs::read_to_string(kb.ws.data().join("store/versions.jsonl")).expect("versions file");
    assert_eq!(
        again
            .lines()
            .filter(|l| l.contains("\"source\":\"hr/leave.md\""))
            .count(),
        chunks_then,
        "unchanged text is stored once"
    );
}

#[test]
fn the_text_a_run_saw_outlives_edits_and_removal_in_postgres() {
    let db = TestDb::new();
    let kb = Kb::new(Some(&db.url));
    time_travel(&kb);
}
