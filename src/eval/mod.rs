//! Evaluation: the golden question set format (and, later, retrieval and agent metrics).

pub mod agent;
pub mod golden;
