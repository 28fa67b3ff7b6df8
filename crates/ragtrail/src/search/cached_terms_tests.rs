//! The store's cached chunk terms give `searchDocs` the same coverage and snippets as analysing
//! each hit's text per call.

use std::borrow::Cow;
use std::collections::HashSet;
use std::path::Path;

use crate::knowledge::{ScanOptions, scan};
use crate::search::snippet::{snippet, snippet_by};
use crate::search::sufficiency::{covered, covered_by, key_terms};
use crate::store::ChunkTerms;
use crate::text;

/// The cached terms give the same coverage and snippets as analysing the text per call,
/// on every chunk of the bundled knowledge and with keywords drawn from other chunks.
#[test]
fn cached_terms_match_per_call_analysis_on_the_bundled_knowledge() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../knowledge");
    let report = scan(&root, &ScanOptions::default()).expect("bundled knowledge");
    assert!(report.chunks.len() > 100);
    let n = report.chunks.len();
    for (i, chunk) in report.chunks.iter().enumerate() {
        let cached = ChunkTerms::new(chunk);
        let all: HashSet<String> = text::terms(&chunk.title_path)
            .into_iter()
            .chain(text::terms(&chunk.text))
            .map(|t| t.text)
            .collect();
        assert!(all.iter().all(|t| cached.contains(t)));
        assert_eq!(cached.term_count(), all.len());
        let lowercase = format!("{}\n{}", chunk.title_path, chunk.text).to_lowercase();
        assert_eq!(cached.lowercase(), lowercase);
        // Keywords: this chunk's title, plus words of two other chunks (mostly misses).
        let other = &report.chunks[(i * 7 + 3) % n];
        let keywords: Vec<String> = [&chunk.title_path, &other.title_path, &other.text]
            .iter()
            .flat_map(|s| {
                text::terms(s)
                    .into_iter()
                    .take(3)
                    .map(|t| s[t.start..t.end].to_string())
            })
            .collect();
        let keys = key_terms(&keywords, &|_| 1, 10);
        assert_eq!(
            covered_by(&keys, |t| cached.contains(t), cached.lowercase()),
            covered(&keys, &all, &lowercase)
        );
        let wanted: HashSet<String> = keys.iter().flat_map(|k| k.parts.clone()).collect();
        // Looked up once, as a search does: each wanted term's place among the chunk's terms.
        let wanted_list: Vec<&str> = wanted.iter().map(String::as_str).collect();
        let found: Vec<_> = wanted_list.iter().map(|w| cached.find(w)).collect();
        for max in [40, 120, 240] {
            // With the text and its sentences measured once for the chunk, and per call.
            for measured in [true, false] {
                let len = measured.then(|| cached.one_line_len());
                assert_eq!(
                    snippet_by(&chunk.text, max, len, || {
                        let sentences = cached.sentences(&chunk.text);
                        (
                            Cow::Borrowed(sentences.spans()),
                            sentences.match_counts_found(&wanted_list, &found),
                            measured.then(|| sentences.pieces()),
                        )
                    }),
                    snippet(&chunk.text, &wanted, max),
                    "chunk {i}, {max} chars, measured {measured}"
                );
            }
        }
    }
}
