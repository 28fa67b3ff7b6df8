//! The audit rendered for people: the header both formats show, and the Markdown ready to paste
//! into a ticket. One rendering for the command line and the server.

use std::fmt::Write as _;

use super::audit::AuditReport;

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
pub fn one_line(s: &str) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut = crate::text::truncate_chars(&flat, 200);
    let more = if cut.len() < flat.len() { "…" } else { "" };
    format!("{}{more}", plain(cut))
}

/// The header lines both audit formats show, in order.
pub fn header(r: &AuditReport) -> Vec<(&'static str, String)> {
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
pub fn decision_text(r: &AuditReport) -> String {
    // An answered run's reason is `answered`: no need to say it twice.
    if r.decision.reason.is_empty() || r.decision.reason == r.decision.status {
        r.decision.label.clone()
    } else {
        format!("{} ({})", r.decision.label, r.decision.reason)
    }
}

pub fn quote_state(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "verified in the chunk",
        Some(false) => "NOT in the chunk",
        None => "cannot be checked",
    }
}

fn md(s: &str) -> String {
    plain(s).replace('|', "\\|").replace('\n', " ")
}

/// The audit as Markdown, for a ticket.
pub fn audit_markdown(r: &AuditReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## Audit of run `{}`\n", r.run_id);
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
    let _ = writeln!(out, "- **Integrity:** {}", r.integrity.status);
    for p in &r.integrity.problems {
        let _ = writeln!(out, "  - {}", md(p));
    }
    if let Some(a) = &r.answer {
        let _ = writeln!(out, "\n### Answer\n\n> {}", plain(a).replace('\n', "\n> "));
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
                "| {} | `{}` | {} | {} | “{}” ({}) | {} | {} |",
                i + 1,
                c.chunk_id,
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
                (Some(text), _) => format!("\n> {}", plain(text).replace('\n', "\n> ")),
                (None, "pruned") => format!(
                    " pruned on {} (`ingest --keep-versions`)",
                    c.seen.pruned_at.as_deref().unwrap_or("-")
                ),
                _ => " not kept (indexed before this knowledge base kept versions)".to_string(),
            };
            let _ = writeln!(out, "\n[{}] `{}`:{version}\n", i + 1, c.chunk_id);
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
                        "| {} | {} | {} | `{}` | {:.4} | {} |",
                        round.round,
                        h.rank,
                        md(&h.title_path),
                        h.chunk_id,
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
