//! A stage after hydration is one type and one entry in the list: the searcher runs it on the
//! hydrated hits, and the judgement weighs what it leaves.

use super::stages::{AFTER_HYDRATION, HitStage, StageInput};
use super::{FoundHit, SearchRequest, SearchSettings, Searcher};
use crate::access::AccessContext;
use crate::embed::HashingEmbedder;
use crate::index::Bm25Index;
use crate::knowledge::{ScanOptions, scan};
use crate::store::embedded::StoreManifest;
use crate::store::{ChunkStore, EmbeddedVectorLeg};

/// Keeps only the hits whose titlePath names hotels.
struct HotelsOnly;

impl HitStage for HotelsOnly {
    fn name(&self) -> &'static str {
        "hotels-only"
    }

    fn apply(&self, input: &StageInput<'_>, hits: &mut Vec<FoundHit<'_>>) {
        assert_eq!(input.keywords, ["receipts"]);
        hits.retain(|h| h.hit.title_path.contains("Hotels"));
    }
}

/// Drops every hit.
struct Nothing;

impl HitStage for Nothing {
    fn name(&self) -> &'static str {
        "nothing"
    }

    fn apply(&self, _: &StageInput<'_>, hits: &mut Vec<FoundHit<'_>>) {
        hits.clear();
    }
}

#[test]
fn the_stages_after_hydration_run_on_the_hits_before_the_judgement() {
    assert!(AFTER_HYDRATION.is_empty(), "searchDocs runs no stage yet");
    let dir = tempfile::tempdir().expect("tmp");
    let knowledge = dir.path().join("knowledge");
    std::fs::create_dir_all(&knowledge).expect("mkdir");
    std::fs::write(
        knowledge.join("travel.md"),
        "# Travel\n\n## Hotels\n\nHotel receipts show the nightly rate.\n\n\
         ## Taxis\n\nTaxi receipts show the route and the fare.\n",
    )
    .expect("write");
    // A store and its BM25 index, as the engine keeps them (BM25 alone: no vectors).
    let chunks = scan(&knowledge, &ScanOptions::default())
        .expect("scan")
        .chunks;
    let index = Bm25Index::open_or_create(&dir.path().join("index")).expect("index");
    let mut update = index.update().expect("update");
    for chunk in &chunks {
        update.add_chunk(chunk, false).expect("add");
    }
    update.commit(1).expect("commit");
    let store = ChunkStore::in_memory(StoreManifest::default(), chunks);
    let (embedder, settings) = (HashingEmbedder::default(), SearchSettings::default());
    let access = AccessContext::default();
    let searcher = || {
        let leg = Box::new(EmbeddedVectorLeg::new(&store));
        Searcher::new(&store, &index, &embedder, leg, &settings, &access)
    };
    let req = SearchRequest::new(vec!["receipts".into()], 5, access.clone());
    let titles = |stages: &'static [&'static dyn HitStage]| {
        let found = searcher().with_stages(stages).search(&req).expect("search");
        let titles: Vec<String> = found
            .hits
            .iter()
            .map(|h| h.hit.title_path.clone())
            .collect();
        (titles, found.sufficiency)
    };
    let (all, judged) = titles(AFTER_HYDRATION);
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(all.contains(&"Travel / Taxis".to_string()), "{all:?}");
    assert!(judged.sufficient, "{judged:?}");
    let (hotels, judged) = titles(&[&HotelsOnly]);
    assert_eq!(hotels, ["Travel / Hotels"]);
    assert!(judged.sufficient, "{judged:?}");
    let (none, judged) = titles(&[&HotelsOnly, &Nothing]);
    assert!(none.is_empty());
    assert!(!judged.sufficient);
    assert_eq!(judged.reason, "no hits");
    // The response `searchDocs` returns is the searcher's, without the chunks.
    let found = searcher().search(&req).expect("search");
    assert_eq!(
        found.hits[0].content_hash(),
        found.hits[0].chunk.content_hash
    );
    let response = found.into_response();
    let hits: Vec<&str> = response
        .hits
        .iter()
        .map(|h| h.title_path.as_str())
        .collect();
    assert_eq!(hits, all);
}
