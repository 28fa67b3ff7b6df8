//! Evaluation: the golden question set format, ranking metrics, retrieval quality on BEIR-format
//! sets, agent quality on a golden set, and multi-round recall on multi-hop sets.

pub mod agent;
pub mod golden;
pub mod metrics;
pub mod multihop;
pub mod retrieval;
