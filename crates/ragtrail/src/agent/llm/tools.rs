//! The tools offered to the model, how their calls become planner actions, and how the engine's
//! observations go back to the model as JSON.
//!
//! - `searchDocs {keywords: string[], reason?: string}` → [`PlannerAction::Search`], with the
//!   run's own number of hits: a `topK` a model sends anyway is read and ignored (Qwen2.5-Coder-1.5B
//!   asked for one hit and answered from it). Keywords are repaired where small models slip:
//!   HTML-escaped quotes (`&#34;年假&#34;`, copied from chat templates that escape earlier calls),
//!   a quoted list inside one keyword, another argument written inside the list, a tool
//!   parameter's name given as a keyword.
//! - `submitAnswer {answer: string, citations: [{chunkId, quote}]}` → [`PlannerAction::Answer`]
//! - `reportNoEvidence {reason: string}` → [`PlannerAction::GiveUp`]: the model's way to say the
//!   knowledge base does not hold the answer. A separate tool, so that an answer that forgot
//!   its citations is refused and can be fixed instead of ending the run.
//! - `proposeFact {key: string, value: string}` → [`PlannerAction::ProposeFact`]: a fact the
//!   asker states about themselves; the run keeps it only when the question holds the value.
//!
//! Unknown tools and arguments that cannot be read become a [`ToolError`], sent back to the
//! model as the call's tool message; nothing here panics on what a model sends.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::agent::planner::{Observation, PlannerAction, ProposedCitation};
use crate::agent::{MAX_KEYWORD_CHARS, MAX_KEYWORDS};
use crate::text::truncate_chars;

pub const SEARCH_DOCS: &str = "searchDocs";
pub const SUBMIT_ANSWER: &str = "submitAnswer";
pub const REPORT_NO_EVIDENCE: &str = "reportNoEvidence";
pub const PROPOSE_FACT: &str = "proposeFact";

/// Longest search reason kept, in characters.
const MAX_REASON_CHARS: usize = 200;

/// The `tools` array of every request.
pub fn definitions() -> Value {
    json!([
        {
            "type": "function",
            "function": {
                "name": SEARCH_DOCS,
                "description": "Search the policy knowledge base with a short list of keywords (terms, not sentences). Returns the best-matching chunks (chunkId, titlePath, snippet, sourceUri, score), whether they look sufficient to answer, and how many searches are left.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "keywords": {
                            "type": "array",
                            "items": {"type": "string", "maxLength": MAX_KEYWORD_CHARS},
                            "minItems": 1,
                            "maxItems": MAX_KEYWORDS,
                            "description": "1 to 8 short search terms, e.g. [\"高铁票\", \"报销凭证\"]. Never tenants, roles or permissions."
                        },
                        "reason": {
                            "type": "string",
                            "description": "One short sentence: what this search looks for (recorded for audit)."
                        }
                    },
                    "required": ["keywords"]
                }
            }
        },
        {
            "type": "function",
            "function": {
                "name": SUBMIT_ANSWER,
                "description": "Give the final answer, using only facts from hits returned by searchDocs in this conversation, each cited with the hit's chunkId and a quote copied verbatim from its snippet.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "answer": {
                            "type": "string",
                            "description": "The answer, with actionable steps, in the language of the question."
                        },
                        "conversational": {
                            "type": "boolean",
                            "description": "true only for a greeting, thanks or a question about this conversation itself, answered without citations and shown as unsourced. Never for anything about policies."
                        },
                        "citations": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "chunkId": {"type": "string", "description": "A chunkId exactly as searchDocs returned it."},
                                    "quote": {"type": "string", "description": "A short phrase copied character for character from that hit's snippet."}
                                },
                                "required": ["chunkId", "quote"]
                            }
                        }
                    },
                    "required": ["answer", "citations"]
                }
            }
        },
        {
            "type": "function",
            "function": {
                "name": REPORT_NO_EVIDENCE,
                "description": "End without an answer because the knowledge base does not hold the evidence. Say what is missing and which keyword sets were tried.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "reason": {"type": "string", "description": "What is missing, and the keyword sets tried."}
                    },
                    "required": ["reason"]
                }
            }
        },
        {
            "type": "function",
            "function": {
                "name": PROPOSE_FACT,
                "description": "Note a fact the asker states about themselves in the question that a policy answer may depend on (their grade or level, the city they are based in, when they started), so it can be remembered if they agree. Only what the question says, in its own words; never a guess, never what a document says. Then go on with the question.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "key": {"type": "string", "description": "The fact's name in a few words, e.g. \"grade\", \"base city\", \"start date\"."},
                        "value": {"type": "string", "description": "The value as the question writes it, e.g. \"B类\", \"成都\", \"2023-07\"."}
                    },
                    "required": ["key", "value"]
                }
            }
        }
    ])
}

/// Why a tool call was not carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    #[error(
        "there is no tool named {0:?}; use searchDocs, submitAnswer, reportNoEvidence or proposeFact"
    )]
    UnknownTool(String),
    #[error("the arguments of {tool} cannot be used: {message}")]
    Malformed { tool: &'static str, message: String },
}

impl ToolError {
    /// The tool message sent back for this call.
    pub fn to_json(&self) -> Value {
        let code = match self {
            ToolError::UnknownTool(_) => "unknown_tool",
            ToolError::Malformed { .. } => "malformed_arguments",
        };
        json!({"error": code, "message": self.to_string()})
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SearchArgs {
    keywords: KeywordList,
    #[serde(default, alias = "top_k")]
    top_k: Option<u32>,
    #[serde(default)]
    reason: Option<String>,
}

/// Keywords as a list, or as one string of comma-separated terms (some models send that).
#[derive(Deserialize)]
#[serde(untagged)]
enum KeywordList {
    List(Vec<String>),
    Text(String),
}

#[derive(Deserialize)]
struct AnswerArgs {
    answer: String,
    #[serde(default)]
    citations: Vec<CitationArgs>,
    /// Declared small talk (greeting, thanks, a question about the conversation itself).
    #[serde(default)]
    conversational: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CitationArgs {
    #[serde(alias = "chunk_id", alias = "id")]
    chunk_id: String,
    #[serde(default)]
    quote: String,
}

#[derive(Deserialize)]
struct NoEvidenceArgs {
    #[serde(default)]
    reason: String,
}

#[derive(Deserialize)]
struct FactArgs {
    key: String,
    value: String,
}

fn args<T: serde::de::DeserializeOwned>(tool: &'static str, text: &str) -> Result<T, ToolError> {
    let text = if text.trim().is_empty() { "{}" } else { text };
    serde_json::from_str(text).or_else(|e| {
        // What small models get wrong around a right object is repaired here; anything else
        // goes back to the model as an error, and it is asked again.
        repaired(text)
            .and_then(|r| serde_json::from_str(&r).ok())
            .ok_or_else(|| ToolError::Malformed {
                tool,
                message: format!("{e}; send a JSON object matching the tool's parameters"),
            })
    })
}

/// The arguments without the slips small models make around a JSON object: a code fence or
/// words before or after it, a comma before a closing bracket. `None` when there is no object.
fn repaired(text: &str) -> Option<String> {
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    if end <= start {
        return None;
    }
    let object = &text[start..=end];
    let mut out = String::with_capacity(object.len());
    let mut in_string = false;
    let mut escaped = false;
    let chars: Vec<char> = object.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if in_string {
            out.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        // A comma whose next non-space character closes an object or a list.
        if c == ','
            && chars[i + 1..]
                .iter()
                .find(|n| !n.is_whitespace())
                .is_some_and(|n| matches!(n, '}' | ']'))
        {
            continue;
        }
        out.push(c);
    }
    Some(out)
}

/// Names of `searchDocs`' parameters, which a small model sometimes lists as keywords.
const PARAMETER_NAMES: [&str; 4] = ["keywords", "topk", "top_k", "reason"];

/// Keywords with the slips of small models undone: HTML entities decoded, a keyword holding a
/// quoted list (`"年假", "休假"`) split into its terms, quotes and brackets around a term
/// removed, parameter names dropped, duplicates dropped.
fn repaired_keywords(keywords: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for raw in keywords {
        let k = decode_entities(raw);
        // A comma splits only a keyword that held quotes: "annual leave, carry over" written
        // as one term by the model is split by the caller's list parsing, not here.
        let quoted = k.contains('"');
        let parts: Vec<&str> = if quoted {
            k.split([',', '，']).collect()
        } else {
            vec![k.as_str()]
        };
        for part in parts {
            let mut term = part.trim();
            if quoted {
                term = term
                    .trim_matches(|c: char| matches!(c, '"' | '\'' | '[' | ']' | '“' | '”'))
                    .trim();
                // Another argument written inside the list (`reason": "What is…`): its key.
                if term.contains("\":")
                    && let Some(i) = term.find('"')
                {
                    term = term[..i].trim();
                }
            }
            if term.is_empty()
                || PARAMETER_NAMES.contains(&term.to_ascii_lowercase().as_str())
                || out.iter().any(|o| o == term)
            {
                continue;
            }
            out.push(term.to_string());
        }
    }
    out
}

/// `text` with the HTML entities a template's escaping leaves (`&#34;`, `&quot;`, `&#39;`,
/// `&amp;`, `&lt;`, `&gt;`) decoded; a cut-off entity at the end (`&#3`) is dropped.
fn decode_entities(text: &str) -> String {
    let mut out = text
        .replace("&#34;", "\"")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    if let Some(i) = out.rfind("&#")
        && out[i + 2..].chars().all(|c| c.is_ascii_digit())
    {
        out.truncate(i);
    }
    out
}

/// Turns a tool call into an action. `fallback_reason` (the reply's text, if any) is the
/// search's reason when the call gives none.
pub fn parse_call(
    name: &str,
    arguments: &str,
    fallback_reason: Option<&str>,
) -> Result<PlannerAction, ToolError> {
    match name {
        SEARCH_DOCS => {
            let a: SearchArgs = args(SEARCH_DOCS, arguments)?;
            let keywords = match a.keywords {
                KeywordList::List(k) => k,
                KeywordList::Text(t) => t
                    .split([',', '，', '、', ';', '；'])
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect(),
            };
            let reason = a
                .reason
                .as_deref()
                .or(fallback_reason)
                .map(|r| truncate_chars(r.trim(), MAX_REASON_CHARS).to_string())
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| "chosen by the model".to_string());
            // Access comes from the operator; anything else the model sends (a tenant, a role, a
            // scope) is ignored, and the attempt is recorded with the search's reason.
            let extra: Vec<String> = serde_json::from_str::<Value>(arguments)
                .ok()
                .and_then(|v| {
                    v.as_object().map(|o| {
                        o.keys()
                            .filter(|k| {
                                !matches!(k.as_str(), "keywords" | "topK" | "top_k" | "reason")
                            })
                            .cloned()
                            .collect()
                    })
                })
                .unwrap_or_default();
            let reason = if extra.is_empty() {
                reason
            } else {
                format!("{reason} [ignored arguments: {}]", extra.join(", "))
            };
            // Validated later; a list that repairs to nothing is left for validation to refuse.
            let repaired = repaired_keywords(&keywords);
            let keywords = if repaired.is_empty() {
                keywords
            } else {
                repaired
            };
            // The model's topK is not used: asking for fewer hits than the run's never helps
            // an answer (the check that it is a number stays, so a broken call is re-asked).
            let _ = a.top_k;
            Ok(PlannerAction::Search {
                keywords,
                reason,
                top_k: None,
                query: None,
                lexical: false,
            })
        }
        SUBMIT_ANSWER => {
            let a: AnswerArgs = args(SUBMIT_ANSWER, arguments)?;
            // Only a reply with no citations can be conversational; with citations it is an
            // ordinary answer and is checked as one.
            if a.conversational && a.citations.is_empty() {
                return Ok(PlannerAction::Reply {
                    text: a.answer.trim().to_string(),
                });
            }
            Ok(PlannerAction::Answer {
                text: a.answer.trim().to_string(),
                citations: a
                    .citations
                    .into_iter()
                    .map(|c| ProposedCitation {
                        chunk_id: c.chunk_id.trim().to_string(),
                        quote: c.quote,
                    })
                    .collect(),
            })
        }
        REPORT_NO_EVIDENCE => {
            let a: NoEvidenceArgs = args(REPORT_NO_EVIDENCE, arguments)?;
            let detail = truncate_chars(a.reason.trim(), MAX_REASON_CHARS);
            Ok(PlannerAction::GiveUp {
                reason: if detail.is_empty() {
                    "no_relevant_hits".to_string()
                } else {
                    format!("no_relevant_hits: {detail}")
                },
            })
        }
        PROPOSE_FACT => {
            let a: FactArgs = args(PROPOSE_FACT, arguments)?;
            Ok(PlannerAction::ProposeFact {
                key: a.key.trim().to_string(),
                value: a.value.trim().to_string(),
            })
        }
        other => Err(ToolError::UnknownTool(
            truncate_chars(other, 60).to_string(),
        )),
    }
}

/// The tool message for an observation. `searches_left` is the number of searches the run still
/// allows.
pub fn observation_json(obs: &Observation, searches_left: u32) -> Value {
    match obs {
        Observation::Hits {
            round,
            keywords,
            hits,
            sufficiency,
        } => {
            let mut v = json!({
                "round": round,
                "keywords": keywords,
                "searchesLeft": searches_left,
                "sufficiency": {
                    "sufficient": sufficiency.sufficient,
                    "reason": sufficiency.reason,
                    "missingTerms": sufficiency.missing_terms,
                },
                "hits": hits.iter().map(|h| json!({
                    "chunkId": h.chunk_id,
                    "titlePath": h.title_path,
                    "snippet": h.snippet,
                    "sourceUri": h.source_uri,
                    "score": h.score,
                })).collect::<Vec<_>>(),
            });
            if hits.is_empty() {
                v["note"] = json!(
                    "No hits. Try other terms: synonyms, the documents' own wording, or the other language."
                );
            }
            v
        }
        Observation::Repeated {
            keywords,
            first_round,
        } => json!({
            "error": "repeated_keywords",
            "message": format!(
                "This keyword set was already searched in round {first_round}; it was not searched again. Use different keywords, or answer from the hits you have."
            ),
            "keywords": keywords,
            "searchesLeft": searches_left,
        }),
        Observation::Rejected { message } => json!({
            "error": "rejected",
            "message": message,
            "searchesLeft": searches_left,
        }),
        Observation::FactProposed {
            key,
            value,
            kept,
            message,
        } => json!({
            "fact": {"key": key, "value": value},
            "kept": kept,
            "message": message,
            "searchesLeft": searches_left,
        }),
        Observation::CitationsRefused { refused } => json!({
            "error": "citations_refused",
            "message": "The answer was refused. Cite only chunkIds that searchDocs returned in this conversation, each with a quote copied verbatim from that hit's snippet, then call submitAnswer again; or call reportNoEvidence.",
            "refused": refused.iter().map(|r| json!({
                "chunkId": r.chunk_id,
                "quote": r.quote,
                "reason": r.reason,
            })).collect::<Vec<_>>(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arguments wrapped in a fence or words, or with a trailing comma, are read; a reply
    /// with no object at all is still refused (and the model is asked again).
    #[test]
    fn slips_around_the_arguments_are_repaired() {
        let search = |k: &[&str]| PlannerAction::Search {
            keywords: k.iter().map(|s| s.to_string()).collect(),
            reason: "chosen by the model".into(),
            top_k: None,
            query: None,
            lexical: false,
        };
        for raw in [
            "```json\n{\"keywords\": [\"annual leave\", \"carry over\"]}\n```",
            "Here are the keywords: {\"keywords\": [\"annual leave\", \"carry over\",],}",
        ] {
            assert_eq!(
                parse_call(SEARCH_DOCS, raw, None),
                Ok(search(&["annual leave", "carry over"])),
                "{raw}"
            );
        }
        // A comma inside a string is the model's text, not a slip.
        assert_eq!(
            parse_call(SEARCH_DOCS, "{\"keywords\": [\"a,]\"],}", None),
            Ok(search(&["a,]"]))
        );
        assert!(matches!(
            parse_call(SEARCH_DOCS, "annual leave, carry over", None),
            Err(ToolError::Malformed { .. })
        ));
    }

    #[test]
    fn tool_calls_become_actions() {
        assert_eq!(
            parse_call(
                SEARCH_DOCS,
                r#"{"keywords":["高铁票","凭证"],"topK":3,"reason":"find the rule"}"#,
                None
            ),
            Ok(PlannerAction::Search {
                keywords: vec!["高铁票".into(), "凭证".into()],
                reason: "find the rule".into(),
                top_k: None,
                query: None,
                lexical: false,
            })
        );
        assert_eq!(
            parse_call(
                SEARCH_DOCS,
                r#"{"keywords":"高铁票, 凭证"}"#,
                Some("thinking")
            ),
            Ok(PlannerAction::Search {
                keywords: vec!["高铁票".into(), "凭证".into()],
                reason: "thinking".into(),
                top_k: None,
                query: None,
                lexical: false,
            })
        );
        assert_eq!(
            parse_call(
                SUBMIT_ANSWER,
                r#"{"answer":" A ","citations":[{"chunkId":"c_1","quote":"q"}]}"#,
                None
            ),
            Ok(PlannerAction::Answer {
                text: "A".into(),
                citations: vec![ProposedCitation {
                    chunk_id: "c_1".into(),
                    quote: "q".into()
                }],
            })
        );
        assert_eq!(
            parse_call(REPORT_NO_EVIDENCE, r#"{"reason":"nothing on pets"}"#, None),
            Ok(PlannerAction::GiveUp {
                reason: "no_relevant_hits: nothing on pets".into()
            })
        );
        assert_eq!(
            parse_call(
                PROPOSE_FACT,
                r#"{"key":" base city ","value":"成都 "}"#,
                None
            ),
            Ok(PlannerAction::ProposeFact {
                key: "base city".into(),
                value: "成都".into()
            })
        );
    }

    /// Qwen2.5-Coder-1.5B behind llama-cpp-python's `chatml-function-calling`: its second
    /// search copied its first call as the template had shown it, HTML-escaped, and listed a
    /// parameter's name as a keyword.
    #[test]
    fn escaped_quoted_and_parameter_name_keywords_are_repaired() {
        let keywords = |raw: &str| match parse_call(SEARCH_DOCS, raw, None) {
            Ok(PlannerAction::Search { keywords, .. }) => keywords,
            other => panic!("{raw}: {other:?}"),
        };
        assert_eq!(
            keywords(
                r#"{"keywords":["&#34;年假&#34;, &#34;休假&#34;, &#34;带薪假期&#34;","topK"]}"#
            ),
            ["年假", "休假", "带薪假期"]
        );
        assert_eq!(
            keywords(r#"{"keywords":["&#34;年假&#34;, &#34;休假&#3","topK"]}"#),
            ["年假", "休假"]
        );
        assert_eq!(
            keywords(r#"{"keywords":["年假","休假","带薪假期","topK"]}"#),
            ["年假", "休假", "带薪假期"]
        );
        assert_eq!(
            keywords(r#"{"keywords":["R&amp;D", "\"expense report\""]}"#),
            ["R&D", "expense report"]
        );
        // Its next search wrote the reason inside the keyword list.
        assert_eq!(
            keywords(r#"{"keywords":["年假","带薪假","3","reason\": \"What is"]}"#),
            ["年假", "带薪假", "3"]
        );
        // A keyword list of parameter names only is left as it was, for validation to judge.
        assert_eq!(keywords(r#"{"keywords":["topK"]}"#), ["topK"]);
    }

    #[test]
    fn bad_calls_become_errors_for_the_model() {
        for (name, args) in [
            (SEARCH_DOCS, "{\"keywords\": [\"a\""),
            (SEARCH_DOCS, "{}"),
            (SEARCH_DOCS, r#"{"keywords":[1,2]}"#),
            (SEARCH_DOCS, r#"{"keywords":["a"],"topK":-1}"#),
            (SUBMIT_ANSWER, r#"{"citations":[]}"#),
            (SUBMIT_ANSWER, "[]"),
            (PROPOSE_FACT, r#"{"key":"grade"}"#),
        ] {
            let e = parse_call(name, args, None).expect_err(args);
            assert!(matches!(e, ToolError::Malformed { .. }), "{e}");
            assert_eq!(e.to_json()["error"], "malformed_arguments");
        }
        let e = parse_call("deleteIndex", "{}", None).expect_err("unknown");
        assert_eq!(e.to_json()["error"], "unknown_tool");
        assert!(e.to_string().contains("searchDocs"));
    }

    #[test]
    fn the_tools_are_functions_with_object_parameters() {
        let tools = definitions();
        let names: Vec<&str> = tools
            .as_array()
            .expect("array")
            .iter()
            .map(|t| {
                assert_eq!(t["type"], "function");
                assert_eq!(t["function"]["parameters"]["type"], "object");
                t["function"]["name"].as_str().expect("name")
            })
            .collect();
        assert_eq!(
            names,
            [SEARCH_DOCS, SUBMIT_ANSWER, REPORT_NO_EVIDENCE, PROPOSE_FACT]
        );
    }
}
