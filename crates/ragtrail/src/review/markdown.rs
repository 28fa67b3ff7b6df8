//! The audit as Markdown, ready to paste into a ticket: one rendering for the command line and
//! the server.

use std::fmt::Write as _;

use super::audit::AuditReport;

/// Control characters (ANSI escapes, carriage returns) replaced, so document text cannot drive
/// a terminal or break the Markdown layout.
fn plain(s: &str) -> String {
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

fn quote_state(v: Option<bool>) -> &'static str {
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
    let _ = writeln!(out, "- **Question:** {}", md(&r.question));
    let _ = writeln!(out, "- **Status:** {} ({})", r.status, r.reason);
    let _ = writeln!(out, "- **Planner / date:** {} / {}", r.planner, r.today);
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
    if !r.rounds.is_empty() {
        let _ = writeln!(
            out,
            "\n### Rounds\n\n| round | keywords | hits | cited | sufficient |\n|---|---|---|---|---|"
        );
        for round in &r.rounds {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                round.round,
                md(&round.keywords.join(", ")),
                round.hits,
                round.cited,
                round.sufficient
            );
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
