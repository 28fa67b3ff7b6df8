//! Runtime values into trace records: the one trace module that knows `search`, so a change
//! there is a change here, made on purpose, and never a silent change of the format.

use super::TracedHit;
use super::records::{FactRecord, HitRecord, LegRecord, SufficiencyRecord, WeightsRecord};
use crate::memory::{Fact, FactSource};
use crate::search::fusion::FusionWeights;
use crate::search::sufficiency::Sufficiency;
use crate::search::{LegStats, SearchHit};

impl From<&SearchHit> for HitRecord {
    fn from(hit: &SearchHit) -> Self {
        Self {
            chunk_id: hit.chunk_id.clone(),
            title_path: hit.title_path.clone(),
            snippet: hit.snippet.clone(),
            source_uri: hit.source_uri.clone(),
            score: hit.score,
            metadata: hit.metadata.clone(),
        }
    }
}

impl TracedHit {
    /// A returned hit and the content hash of its chunk when it was returned.
    pub fn of(hit: &SearchHit, content_hash: &str) -> Self {
        Self {
            hit: hit.into(),
            content_hash: content_hash.to_string(),
        }
    }
}

impl From<&LegStats> for LegRecord {
    fn from(leg: &LegStats) -> Self {
        Self {
            count: leg.count,
            latency_ms: leg.latency_ms,
        }
    }
}

impl From<&Sufficiency> for SufficiencyRecord {
    fn from(s: &Sufficiency) -> Self {
        Self {
            sufficient: s.sufficient,
            reason: s.reason.clone(),
            coverage: s.coverage,
            union_coverage: s.union_coverage,
            missing_terms: s.missing_terms.clone(),
        }
    }
}

impl From<&FusionWeights> for WeightsRecord {
    fn from(w: &FusionWeights) -> Self {
        Self {
            bm25: w.bm25,
            lexical_confidence: w.lexical_confidence,
        }
    }
}

impl From<&Fact> for FactRecord {
    fn from(fact: &Fact) -> Self {
        Self {
            key: fact.key.clone(),
            value: fact.value.clone(),
            source: match &fact.source {
                FactSource::Asker => "asker".to_string(),
                FactSource::Said { run_id } => format!("run:{run_id}"),
            },
            set_at: fact.set_at.clone(),
        }
    }
}

impl From<&FactRecord> for Fact {
    /// A recorded fact as the memory holds one, for a run planned again from its trace.
    fn from(record: &FactRecord) -> Self {
        Self {
            key: record.key.clone(),
            value: record.value.clone(),
            source: match record.source.strip_prefix("run:") {
                Some(run_id) => FactSource::Said {
                    run_id: run_id.to_string(),
                },
                None => FactSource::Asker,
            },
            set_at: record.set_at.clone(),
        }
    }
}
