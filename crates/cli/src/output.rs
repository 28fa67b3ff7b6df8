//! Formatting for people: tables, summaries, terminal-safe text.

use ragtrail::engine::IngestSummary;
use ragtrail::search::SearchHit;

/// Replaces control characters (ANSI escapes, carriage returns) so document text cannot drive
/// the terminal.
pub fn terminal_safe(s: &str) -> String {
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

pub fn ingest_summary_line(s: &IngestSummary) -> String {
    format!(
        "ingest: {} added, {} changed, {} removed, {} unchanged; {} chunks in the index{}",
        s.added.len(),
        s.changed.len(),
        s.removed.len(),
        s.unchanged,
        s.chunks,
        if s.skipped.is_empty() {
            String::new()
        } else {
            format!("; {} files skipped", s.skipped.len())
        }
    )
}

/// A readable list of hits: rank, score, titlePath, sourceUri, then the snippet.
pub fn hits_table(hits: &[SearchHit]) -> String {
    let mut out = String::new();
    for (i, hit) in hits.iter().enumerate() {
        out.push_str(&format!(
            "{:>2}. [{:.4}] {}\n    {}  ({})\n    {}\n",
            i + 1,
            hit.score,
            terminal_safe(&hit.title_path),
            terminal_safe(&hit.source_uri),
            hit.chunk_id,
            terminal_safe(&hit.snippet)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_neutralised() {
        assert_eq!(terminal_safe("a\u{1b}[31mb\rc"), "a\u{fffd}[31mb\u{fffd}c");
    }
}
