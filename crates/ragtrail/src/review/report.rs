//! Reports rendered for people, one module for every front end: the audit as text (the
//! terminal) and as Markdown (ready to paste into a ticket: `audit --format markdown` and the
//! server's `?format=markdown`), and the replay, re-run and live re-plan as text.
//!
//! Text is terminal-safe ([`plain`]); Markdown also escapes HTML and table pipes, so document
//! text or a question cannot inject markup into a ticket.

use std::fmt::Write as _;

use super::audit::{AuditReport, CitationAudit};
use super::replay::{Found, ReplayReport, RoundVerdict};
use super::rerun::RerunReport;

/// Control characters (ANSI escapes, carriage returns) replaced, so document text cannot drive
/// a terminal or break the Markdown layout.
pub fn plain(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() && c != '\n' {
                '\u{fffd}'
            } else {
                c
            }
        })
        .collect()
}

/// `1 round`, `2 rounds`.
fn count(n: usize, singular: &str, plural: &str) -> String {
    format!("{n} {}", if n == 1 { singular } else { plural })
}

/// A snippet on one line, terminal-safe, cut to a readable length.
fn one_line(s: &str) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut = crate::text::truncate_chars(&flat, 200);
    let more = if cut.len() < flat.len() { "…" } else { "" };
    format!("{}{more}", plain(cut))
}

/// The header lines both audit formats show, in order.
fn header(r: &AuditReport) -> Vec<(&'static str, String)> {
    let or_unknown = |s: &str| {
        if s.is_empty() {
            "(not recorded)".to_string()
        } else {
            s.to_string()
        }
    };
    let mut lines = Vec::new();
    if !r.trace.is_empty() {
        lines.push(("trace", r.trace.clone()));
    }
    lines.push(("question", r.question.clone()));
    lines.push((
        "access",
        format!(
            "tenant {} roles [{}]",
            r.access.tenant,
            r.access.roles.join(", ")
        ),
    ));
    lines.push((
        "knowledge base",
        format!(
            "{} version {}",
            or_unknown(&r.knowledge_base),
            or_unknown(&r.knowledge_version)
        ),
    ));
    lines.push((
        "embedder",
        if r.embedder.kind.is_empty() {
            "(not recorded)".to_string()
        } else {
            r.embedder.describe()
        },
    ));
    lines.push((
        "planner",
        match &r.model {
            Some(m) => format!("{} (model {m})", r.planner),
            None => r.planner.clone(),
        },
    ));
    lines.push(("date", r.today.clone()));
    if let Some(session) = &r.session_id {
        lines.push((
            "conversation",
            format!(
                "session {session}, turn {}, {}",
                r.turn.unwrap_or(0),
                count(r.earlier_turns.len(), "earlier turn", "earlier turns")
            ),
        ));
    }
    if let Some(s) = &r.signature {
        lines.push(("signature", format!("{} ({})", s.state, s.detail)));
    }
    lines.push(("status", decision_text(r)));
    lines
}

/// The run's verdict as one phrase: the status line and the line under the rounds both say it.
fn decision_text(r: &AuditReport) -> String {
    // An answered run's reason is `answered`: no need to say it twice.
    if r.decision.reason.is_empty() || r.decision.reason == r.decision.status {
        r.decision.label.clone()
    } else {
        format!("{} ({})", r.decision.label, r.decision.reason)
    }
}

fn quote_state(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "verified in the chunk",
        Some(false) => "NOT in the chunk",
        None => "cannot be checked",
    }
}

/// Document text as Markdown that renders as that text: control characters replaced, HTML
/// (`<script>`, `<img onerror=…>`) and entities shown, not interpreted, and `|` escaped so a
/// table row keeps its columns. Newlines are kept (see [`md`] for one line).
fn md_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in plain(s).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '|' => out.push_str("\\|"),
            c => out.push(c),
        }
    }
    out
}

/// [`md_text`] on one line: a table cell or a list item.
fn md(s: &str) -> String {
    md_text(s).replace('\n', " ")
}

/// A block quote of document text, each line quoted.
fn md_quote(s: &str) -> String {
    format!("> {}", md_text(s).replace('\n', "\n> "))
}

/// An id as inline code: a trace can carry any text, so it cannot close the code span or split
/// a table row.
fn code(s: &str) -> String {
    format!("`{}`", plain(s).replace('`', "'").replace('|', "\\|"))
}

/// The audit as Markdown, for a ticket.
pub fn audit_markdown(r: &AuditReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## Audit of run {}\n", code(&r.run_id));
    for (name, value) in header(r) {
        let mut name = name.to_string();
        if let Some(first) = name.get_mut(..1) {
            first.make_ascii_uppercase();
        }
        let _ = writeln!(out, "- **{name}:** {}", md(&value));
    }
    for t in &r.earlier_turns {
        let _ = writeln!(
            out,
            "  - turn {}: {} → {}",
            t.turn,
            md(&t.question),
            md(&one_line(&t.answer))
        );
    }
    for line in memory_lines(r) {
        let _ = writeln!(out, "- {}", md(&line));
    }
    let _ = writeln!(out, "- **Integrity:** {}", r.integrity.status);
    for p in &r.integrity.problems {
        let _ = writeln!(out, "  - {}", md(p));
    }
    if let Some(a) = &r.answer {
        let _ = writeln!(out, "\n### Answer\n\n{}", md_quote(a));
    }
    if !r.citations.is_empty() {
        let _ = writeln!(
            out,
            "\n### Evidence\n\n| # | chunk | titlePath | source | quote | surfaced (round: rank) | store |\n|---|---|---|---|---|---|---|"
        );
        for (i, c) in r.citations.iter().enumerate() {
            let surfaced: Vec<String> = c
                .surfaced
                .iter()
                .map(|s| format!("{}: {}", s.round, s.rank))
                .collect();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | “{}” ({}) | {} | {} |",
                i + 1,
                code(&c.chunk_id),
                md(&c.title_path),
                md(&c.source_uri),
                md(&c.quote),
                quote_state(c.quote_verified),
                surfaced.join(", "),
                c.store_state
            );
        }
    }
    let checked: Vec<_> = r
        .citations
        .iter()
        .enumerate()
        .filter(|(_, c)| c.seen.version != "not checked")
        .collect();
    if !checked.is_empty() {
        let _ = writeln!(out, "\n### Text the run was shown");
        for (i, c) in checked {
            let version = match (&c.seen.text, c.seen.version) {
                (Some(text), _) => format!("\n{}", md_quote(text)),
                (None, "pruned") => format!(
                    " pruned on {} (`ingest --keep-versions`)",
                    c.seen.pruned_at.as_deref().unwrap_or("-")
                ),
                _ => " not kept (indexed before this knowledge base kept versions)".to_string(),
            };
            let _ = writeln!(out, "\n[{}] {}:{version}\n", i + 1, code(&c.chunk_id));
            let _ = writeln!(out, "Today: **{}**", c.seen.today);
            if let Some(diff) = &c.seen.diff {
                // A fence the text cannot close.
                let _ = writeln!(
                    out,
                    "\n~~~~text\n{}\n~~~~",
                    plain(diff).replace("~~~~", "~ ~ ~ ~")
                );
            }
        }
    }
    if !r.rounds.is_empty() {
        let _ = writeln!(
            out,
            "\n### Rounds\n\n| round | keywords | hits | cited | keywords covered |\n|---|---|---|---|---|"
        );
        for round in &r.rounds {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {:.0}% |",
                round.round,
                md(&round.keywords.join(", ")),
                round.hits,
                if round.cited { "yes" } else { "no" },
                round.keyword_coverage * 100.0
            );
        }
        let _ = writeln!(out, "\n**Decision:** {}", md(&decision_text(r)));
        if !r.decision.sufficient {
            let _ = writeln!(
                out,
                "\n### Hits shown to the planner\n\n| round | # | titlePath | chunk | score | snippet |\n|---|---|---|---|---|---|"
            );
            for round in &r.rounds {
                for h in &round.hit_list {
                    let _ = writeln!(
                        out,
                        "| {} | {} | {} | {} | {:.4} | {} |",
                        round.round,
                        h.rank,
                        md(&h.title_path),
                        code(&h.chunk_id),
                        h.score,
                        md(&one_line(&h.snippet))
                    );
                }
            }
        }
    }
    if !r.findings.is_empty() || !r.notes.is_empty() {
        let _ = writeln!(out, "\n### Findings");
        for f in &r.findings {
            let _ = writeln!(out, "- **finding:** {}", md(f));
        }
        for n in &r.notes {
            let _ = writeln!(out, "- note: {}", md(n));
        }
    }
    out
}

/// The asker's remembered facts as the run used them: each used fact with its value, where it
/// came from and when, then the keys searched, stated by the question, or not bearing on it.
fn memory_lines(r: &AuditReport) -> Vec<String> {
    let Some(m) = &r.memory else {
        return Vec::new();
    };
    let mut lines = vec!["remembered facts:".to_string()];
    // A model is given every fact; which it relied on is its own reading, not recorded.
    let used = if r.planner == "llm" {
        "given to the model"
    } else {
        "used"
    };
    for f in &m.used {
        let source = match f.source.strip_prefix("run:") {
            Some(run) => format!("said in run {run}"),
            None => "set by the asker".to_string(),
        };
        lines.push(format!(
            "  {used}: {} = {} ({source}, {})",
            plain(&f.key),
            plain(&f.value),
            plain(&f.set_at)
        ));
    }
    if m.used.is_empty() {
        lines.push(format!("  {used}: none"));
    }
    let keys = |label: &str, keys: &[String]| {
        (!keys.is_empty()).then(|| format!("  {label}: {}", plain(&keys.join(", "))))
    };
    let searched: Vec<String> = m.searched.iter().map(|f| f.key.clone()).collect();
    lines.extend(keys("searched with", &searched));
    lines.extend(keys("stated in the question instead", &m.stated));
    lines.extend(keys("not bearing on the question", &m.unused));
    lines
}

/// The audit for people.
pub fn audit_text(r: &AuditReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "audit of run {}", r.run_id);
    for (name, value) in header(r) {
        let _ = writeln!(out, "{name}: {}", plain(&value));
    }
    for t in &r.earlier_turns {
        let _ = writeln!(
            out,
            "  turn {}: {}\n    answered: {}",
            t.turn,
            one_line(&t.question),
            one_line(&t.answer)
        );
    }
    for line in memory_lines(r) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "integrity: {}", r.integrity.status);
    for p in &r.integrity.problems {
        let _ = writeln!(out, "  {p}");
    }
    if let Some(a) = &r.answer {
        let _ = writeln!(out, "answer:\n  {}", plain(a).replace('\n', "\n  "));
    }
    for (i, c) in r.citations.iter().enumerate() {
        let _ = writeln!(out, "[{}] {}  {}", i + 1, c.chunk_id, plain(&c.title_path));
        let _ = writeln!(out, "    source: {}", plain(&c.source_uri));
        let _ = writeln!(
            out,
            "    quote: “{}” ({})",
            plain(&c.quote),
            quote_state(c.quote_verified)
        );
        for s in &c.surfaced {
            let _ = writeln!(
                out,
                "    surfaced in round {} [{}] at rank {}, score {:.4} (bm25 rank {}, vector rank {})",
                s.round,
                plain(&s.keywords.join(", ")),
                s.rank,
                s.score,
                s.bm25_rank.as_deref().unwrap_or("-"),
                s.vector_rank.as_deref().unwrap_or("-")
            );
        }
        seen_text_lines(&mut out, c);
    }
    // Without a grounded answer the hits are the evidence there is: list them.
    let list_hits = !r.decision.sufficient;
    for round in &r.rounds {
        let _ = writeln!(
            out,
            "round {} [{}]: {}, keywords covered {:.0}%{}",
            round.round,
            plain(&round.keywords.join(", ")),
            count(round.hits, "hit", "hits"),
            round.keyword_coverage * 100.0,
            if round.cited { ", cited" } else { "" }
        );
        if list_hits {
            for h in &round.hit_list {
                let _ = writeln!(
                    out,
                    "    #{:<2} {:.4}  {}  ({})\n        {}",
                    h.rank,
                    h.score,
                    plain(&h.title_path),
                    h.chunk_id,
                    one_line(&h.snippet)
                );
            }
        }
    }
    let _ = writeln!(out, "decision: {}", decision_text(r));
    for f in &r.findings {
        let _ = writeln!(out, "finding: {f}");
    }
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    let _ = writeln!(
        out,
        "result: {}",
        match r.exit_code() {
            0 => "clean",
            1 => "findings",
            _ if r.signature.as_ref().is_some_and(|s| s.state == "invalid") => {
                "integrity failure (invalid signature)"
            }
            _ => "integrity failure",
        }
    );
    out
}

/// The text a citation's chunk held when the run saw it, and today's against it.
fn seen_text_lines(out: &mut String, c: &CitationAudit) {
    let (seen, store_state) = (&c.seen, c.store_state);
    let indent = |t: &str| plain(t).replace('\n', "\n        ");
    match (seen.version, &seen.text) {
        ("not checked", _) => {
            let _ = writeln!(out, "    in the store now: {store_state}");
            return;
        }
        ("kept", Some(text)) => {
            let _ = writeln!(
                out,
                "    text the run was shown ({}@{}, indexed {}):\n        {}",
                c.chunk_id,
                crate::text::truncate_chars(c.recorded_hash.as_deref().unwrap_or("-"), 16),
                seen.first_indexed.as_deref().unwrap_or("-"),
                indent(text)
            );
        }
        ("pruned", _) => {
            let _ = writeln!(
                out,
                "    text the run was shown: pruned on {} (ingest --keep-versions); only the quote and the recorded snippet remain",
                seen.pruned_at.as_deref().unwrap_or("-")
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "    text the run was shown: not kept (indexed before this knowledge base kept versions)"
            );
        }
    }
    match seen.today {
        "changed" => {
            let _ = writeln!(out, "    in the store now: changed");
            match (&seen.diff, &seen.current_text) {
                (Some(diff), _) => {
                    let _ = writeln!(out, "    word diff, then → now:\n        {}", indent(diff));
                }
                (None, Some(now)) => {
                    let _ = writeln!(out, "    now:\n        {}", indent(now));
                }
                _ => {}
            }
        }
        "deleted" => {
            let _ = writeln!(
                out,
                "    in the store now: deleted (no longer in the knowledge base)"
            );
        }
        other => {
            let _ = writeln!(out, "    in the store now: {other}");
        }
    }
}

/// `replay --rerun` for people: each round's keywords and hits, recorded beside re-run.
pub fn rerun_text(r: &RerunReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nre-run of the planner ({}) on today's index:",
        planner_name(&r.planner, &r.trace)
    );
    for n in &r.notes {
        let _ = writeln!(out, "  note: {n}");
    }
    let keywords = |k: &Option<Vec<String>>| match k {
        Some(k) => format!("[{}]", plain(&k.join(", "))),
        None => "(no such round)".to_string(),
    };
    for round in &r.rounds {
        if round.keywords_same {
            let _ = write!(
                out,
                "  round {}: keywords same {}",
                round.round,
                keywords(&round.recorded_keywords)
            );
        } else {
            let _ = write!(
                out,
                "  round {}: keywords recorded {} | re-run {}",
                round.round,
                keywords(&round.recorded_keywords),
                keywords(&round.rerun_keywords)
            );
        }
        if round.hits_same {
            let _ = writeln!(out, "; hits same ({})", round.rerun_hits.len());
        } else {
            let _ = writeln!(
                out,
                "; hits differ ({} then, {} now)",
                round.recorded_hits.len(),
                round.rerun_hits.len()
            );
        }
        for (hits, what) in [(&round.lost, "lost"), (&round.gained, "gained")] {
            for h in hits {
                let _ = writeln!(
                    out,
                    "    {what:<7} #{} {}  ({})",
                    h.rank,
                    plain(&h.title_path),
                    h.chunk_id
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "  status: recorded {} | re-run {}",
        r.recorded_status, r.rerun_status
    );
    if r.answer_same {
        let _ = writeln!(
            out,
            "  answer: same, citing [{}]",
            r.rerun_citations.join(", ")
        );
    } else {
        for (side, answer, cited) in [
            ("recorded", &r.recorded_answer, &r.recorded_citations),
            ("re-run", &r.rerun_answer, &r.rerun_citations),
        ] {
            let _ = writeln!(
                out,
                "  {side} answer (citing [{}]):\n    {}",
                cited.join(", "),
                plain(answer.as_deref().unwrap_or("(none)")).replace('\n', "\n    ")
            );
        }
    }
    let _ = writeln!(
        out,
        "  re-run: {}",
        if r.same {
            "the planner planned and answered the same"
        } else {
            "differs from the recorded run"
        }
    );
    out
}

fn planner_name(kind: &str, trace: &Option<String>) -> String {
    match trace {
        Some(path) => format!("{kind} planner, trace {path}"),
        None => format!("{kind} planner"),
    }
}

/// The replay for people: each round's verdict and drift, the citations, the result.
pub fn replay_text(r: &ReplayReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "replay of run {}: {}", r.run_id, plain(&r.question));
    let _ = writeln!(
        out,
        "recorded on {} for tenant {} roles [{}]",
        r.today,
        r.access.tenant,
        r.access.roles.join(", ")
    );
    if r.recorded_knowledge_base != r.current_knowledge_base
        && !r.recorded_knowledge_base.is_empty()
    {
        let _ = writeln!(
            out,
            "compared against another knowledge base: recorded {}, now {}",
            r.recorded_knowledge_base, r.current_knowledge_base
        );
    }
    if let Some(cf) = &r.counterfactual {
        let mut what = Vec::new();
        if let Some(f) = &cf.fusion {
            what.push(format!("fusion {f}"));
        }
        if let Some(k) = cf.top_k {
            what.push(format!("topK {k}"));
        }
        let _ = writeln!(
            out,
            "what if: the recorded keywords searched again with {} (instead of what the run used)",
            what.join(", ")
        );
    }
    for round in &r.rounds {
        let verdict = match round.verdict {
            RoundVerdict::Identical => "identical",
            RoundVerdict::Reordered => "reordered",
            RoundVerdict::Differs => "differs",
        };
        let _ = writeln!(
            out,
            "round {} [{}]: {verdict} ({} then, {} now)",
            round.round,
            plain(&round.keywords.join(", ")),
            count(round.recorded.len(), "hit", "hits"),
            round.current.len()
        );
        if let Some(e) = &round.error {
            let _ = writeln!(out, "    error: {e}");
        }
        for d in &round.drift {
            let _ = writeln!(
                out,
                "    {:<8} {}  ({})",
                d.state,
                plain(&d.title_path),
                d.chunk_id
            );
            let _ = writeln!(out, "        was: {}", one_line(&d.recorded_text));
            match &d.current_text {
                Some(now) => {
                    let _ = writeln!(out, "        now: {}", one_line(now));
                }
                None => {
                    let _ = writeln!(out, "        now: (no longer in the knowledge base)");
                }
            }
        }
        // A lost hit shows the text the run saw, a gained one the text there is now.
        for (hits, what, when) in [
            (&round.missing, "missing", "was"),
            (&round.new, "new", "now"),
        ] {
            for h in hits {
                let _ = writeln!(
                    out,
                    "    {what:<8} #{} {}  ({})\n        {when}: {}",
                    h.rank,
                    plain(&h.title_path),
                    h.chunk_id,
                    one_line(&h.text)
                );
            }
        }
        for m in &round.moved {
            let _ = writeln!(
                out,
                "    moved    #{} → #{} {}  ({})",
                m.from,
                m.to,
                plain(&m.title_path),
                m.chunk_id
            );
        }
    }
    let found = |f: &Option<Found>| match f {
        Some(f) => format!("round {} #{}", f.round, f.rank),
        None => "not found".to_string(),
    };
    for (i, c) in r.citations.iter().enumerate() {
        let _ = writeln!(
            out,
            "citation [{}] {}  ({}): recorded {}, now {}",
            i + 1,
            plain(&c.title_path),
            c.chunk_id,
            found(&c.recorded),
            found(&c.now)
        );
    }
    for d in &r.cited_drift {
        let _ = writeln!(
            out,
            "cited chunk {}: {}  ({})",
            d.state,
            plain(&d.title_path),
            d.chunk_id
        );
    }
    let _ = writeln!(
        out,
        "{}",
        if r.reproduced {
            "result: reproduced"
        } else {
            "result: differs from the recorded run"
        }
    );
    out
}

/// `replay --live` for people: the recorded run's keywords, status and answer beside the
/// re-run's, round by round.
pub fn live_text(r: &RerunReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nlive re-plan ({}):",
        planner_name(&r.planner, &r.trace)
    );
    let joined = |k: &Option<Vec<String>>| k.as_ref().map(|k| k.join(", ")).unwrap_or_default();
    for round in &r.rounds {
        let _ = writeln!(
            out,
            "  round {}: recorded [{}] | live [{}]",
            round.round,
            joined(&round.recorded_keywords),
            joined(&round.rerun_keywords)
        );
    }
    let _ = writeln!(
        out,
        "  status: recorded {} | live {}",
        r.recorded_run_status
            .map(|s| s.label())
            .unwrap_or("incomplete"),
        r.rerun_run_status.label()
    );
    for (side, answer) in [("recorded", &r.recorded_answer), ("live", &r.rerun_answer)] {
        let _ = writeln!(
            out,
            "  {side} answer:\n    {}",
            plain(answer.as_deref().unwrap_or("(none)")).replace('\n', "\n    ")
        );
    }
    out
}

/// `replay --live --json`'s `live` field: planner, trace, rounds (`round`, `recorded`, `live`
/// keywords), recordedStatus (null: incomplete), liveStatus, recordedAnswer, liveAnswer.
pub fn live_json(r: &RerunReport) -> serde_json::Value {
    let rounds: Vec<serde_json::Value> = r
        .rounds
        .iter()
        .map(|round| {
            serde_json::json!({
                "round": round.round,
                "recorded": round.recorded_keywords,
                "live": round.rerun_keywords,
            })
        })
        .collect();
    serde_json::json!({
        "planner": r.planner,
        "trace": r.trace,
        "rounds": rounds,
        "recordedStatus": r.recorded_run_status,
        "liveStatus": r.rerun_run_status,
        "recordedAnswer": r.recorded_answer,
        "liveAnswer": r.rerun_answer,
    })
}
