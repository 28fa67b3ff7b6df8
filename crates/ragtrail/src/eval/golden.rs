//! The golden question set (`eval/golden.jsonl`): questions as people ask them, with the
//! sections that hold the evidence and the facts a correct answer contains. See `eval/README.md`.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// One question, or a conversation of several turns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GoldenItem {
    pub id: String,
    pub lang: String,
    pub answerable: bool,
    #[serde(default = "one")]
    pub min_searches: u32,
    #[serde(default)]
    pub tags: Vec<String>,
    pub turns: Vec<GoldenTurn>,
}

fn one() -> u32 {
    1
}

/// One question of an item and what answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GoldenTurn {
    pub question: String,
    /// titlePaths of every section the answer needs.
    #[serde(default)]
    pub expected: Vec<String>,
    /// Strings the answer must contain, each verbatim in an expected section.
    #[serde(default)]
    pub facts: Vec<String>,
    /// Strings the answer should contain that no section states verbatim (arithmetic etc.).
    #[serde(default)]
    pub computed_facts: Vec<String>,
}

impl GoldenItem {
    pub fn has_tag(&self, tag: &str) -> bool {
        self.tags.iter().any(|t| t == tag)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    #[error("cannot read golden set {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}:{line}: not a golden item: {message}")]
    Parse {
        path: String,
        line: usize,
        message: String,
    },
}

/// Reads a golden set: one JSON object per line, blank lines ignored.
pub fn load(path: &Path) -> Result<Vec<GoldenItem>, GoldenError> {
    let display = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| GoldenError::Io {
        path: display.clone(),
        source,
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| GoldenError::Parse {
                path: display.clone(),
                line: i + 1,
                message: e.to_string(),
            })
        })
        .collect()
}
