//! The tools offered to the model, and how their calls become planner actions (what goes back
//! to the model is written in [`super::messages`]).
//!
//! - `searchDocs {keywords: string[], reason?: string}` → [`PlannerAction::Search`], with the
//!   run's own number of hits: a `topK` a model sends anyway is read and ignored (Qwen2.5-Coder-1.5B
//!   asked for one hit and answered from it). Keywords are repaired where small models slip:
//!   HTML-escaped quotes (`&#34;年假&#34;`, copied from chat templates that escape earlier calls),
//!   a quoted list inside one keyword, another argument written inside the list, a tool
//!   parameter's name given as a keyword.
//! - `submitAnswer {answer: string, citations: [1, 3]}` → [`PlannerAction::Answer`]: passages
//!   cited by the numbers the tool messages showed them under (also `[{passage, quote?}]`,
//!   strings of numbers, and the earlier `{chunkId, quote}`), mapped back to chunk ids and quotes
//!   the loop checks verbatim; a number never shown is a [`ToolError::UnknownPassage`].
//! - `reportNoEvidence {reason: string}` → [`PlannerAction::GiveUp`]: the model's way to say the
//!   knowledge base does not hold the answer. A separate tool, so that an answer that forgot
//!   its citations is refused and can be fixed instead of ending the run.
//! - `proposeFact {key: string, value: string}` → [`PlannerAction::ProposeFact`]: a fact the
//!   asker states about themselves; the run keeps it only when the question holds the value.
//!
//! Unknown tools, arguments that cannot be read and unknown passage numbers become a
//! [`ToolError`], sent back to the model as the call's tool message in the question's language
//! with an example of the call; nothing here panics on what a model sends.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::agent::citations::MAX_QUOTE_CHARS;
use crate::agent::passages::{self, Passage};
use crate::agent::planner::{PlannerAction, ProposedCitation};
use crate::agent::{MAX_KEYWORD_CHARS, MAX_KEYWORDS};
use crate::text::{Lang, truncate_chars};

pub const SEARCH_DOCS: &str = "searchDocs";
pub const SUBMIT_ANSWER: &str = "submitAnswer";
pub const REPORT_NO_EVIDENCE: &str = "reportNoEvidence";
pub const PROPOSE_FACT: &str = "proposeFact";

/// Every tool the model is offered.
pub const TOOL_NAMES: [&str; 4] = [SEARCH_DOCS, SUBMIT_ANSWER, REPORT_NO_EVIDENCE, PROPOSE_FACT];

/// Whether `text` names one of the model's tools (in any case, `functions.` prefixed or not):
/// a search for a tool's name is the model echoing the loop, never the asker's subject.
pub fn names_a_tool(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    TOOL_NAMES
        .iter()
        .any(|tool| text.contains(&tool.to_ascii_lowercase()))
}

/// The tool a reply names with nothing after it, `functions.searchDocs:` (the chat format's
/// call prefix written as text, with no call): Qwen2.5-Coder-1.5B's reply after tool results.
pub fn bare_call_prefix(text: &str) -> Option<&'static str> {
    let mut named = None;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let name = line.strip_prefix("functions.").unwrap_or(line);
        let name = name.trim_end_matches([':', ' ']);
        named = Some(*TOOL_NAMES.iter().find(|tool| **tool == name)?);
    }
    named
}

/// Longest search reason kept, in characters.
const MAX_REASON_CHARS: usize = 200;

/// The `tools` array of every request.
pub fn definitions() -> Value {
    json!([
        {
            "type": "function",
            "function": {
                "name": SEARCH_DOCS,
                "description": "Search the policy knowledge base with a short list of keywords (terms, not sentences). Returns numbered passages (each hit's title and its sentences most about the question), whether they look enough to answer, and how many searches are left.",
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
                "description": "Give the final answer, using only facts from the numbered passages searchDocs showed in this conversation, each cited by its passage number.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "answer": {
                            "type": "string",
                            "description": "The answer, with actionable steps, in the language of the question; write the passage numbers in it, e.g. \"15 days [1]\"."
                        },
                        "conversational": {
                            "type": "boolean",
                            "description": "true only for a greeting, thanks or a question about this conversation itself, answered without citations and shown as unsourced. Never for anything about policies."
                        },
                        "citations": {
                            "type": "array",
                            "description": "The numbers of the passages the answer comes from, e.g. [1, 3].",
                            "items": {
                                "anyOf": [
                                    {"type": "integer", "description": "A passage number as shown, e.g. 1."},
                                    {
                                        "type": "object",
                                        "properties": {
                                            "passage": {"type": "integer", "description": "A passage number as shown."},
                                            "quote": {"type": "string", "description": "Optional: a sentence copied character for character from that passage."}
                                        },
                                        "required": ["passage"]
                                    }
                                ]
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
    /// An answer citing passage numbers that were not shown.
    #[error("the answer cites passages {numbers:?}, but {shown} were shown")]
    UnknownPassage { numbers: Vec<usize>, shown: usize },
}

impl ToolError {
    /// The tool message sent back for this call, in the question's language: what was wrong
    /// and what to send instead.
    pub fn to_message(&self, lang: Lang) -> String {
        match (self, lang) {
            (ToolError::UnknownTool(name), Lang::En) => format!(
                "Error: there is no tool named \"{name}\"; use searchDocs, submitAnswer, \
                 reportNoEvidence or proposeFact."
            ),
            (ToolError::UnknownTool(name), Lang::Zh) => format!(
                "错误：没有名为 \"{name}\" 的工具；请用 searchDocs、submitAnswer、reportNoEvidence 或 proposeFact。"
            ),
            (ToolError::Malformed { tool, message }, Lang::En) => format!(
                "Error: the arguments of {tool} cannot be used ({message}). Call it again with a \
                 JSON object like {}.",
                example(tool, lang)
            ),
            (ToolError::Malformed { tool, message }, Lang::Zh) => format!(
                "错误：{tool} 的参数无法使用（{message}）。请用这样的 JSON 对象重新调用：{}。",
                example(tool, lang)
            ),
            (ToolError::UnknownPassage { shown: 0, .. }, Lang::En) => {
                "The answer was refused: no passages have been shown yet. Search with searchDocs \
                 first, then cite the numbers of the passages it shows."
                    .to_string()
            }
            (ToolError::UnknownPassage { shown: 0, .. }, Lang::Zh) => {
                "回答被拒绝：还没有显示过任何段落。请先用 searchDocs 检索，再按显示的段落编号引用。"
                    .to_string()
            }
            (ToolError::UnknownPassage { numbers, shown }, Lang::En) => format!(
                "The answer was refused: {} not shown; the passages shown are 1 to {shown}. Cite \
                 their numbers, e.g. \"citations\": [1], and call submitAnswer again; or search \
                 again, or call reportNoEvidence.",
                match numbers.as_slice() {
                    [n] => format!("passage {n} was"),
                    more => format!("passages {} were", join_numbers(more)),
                }
            ),
            (ToolError::UnknownPassage { numbers, shown }, Lang::Zh) => format!(
                "回答被拒绝：没有显示过编号为 {} 的段落；显示过的段落是 1 到 {shown}。请引用这些编号，\
                 例如 \"citations\": [1]，再调用 submitAnswer；或者重新检索，或调用 reportNoEvidence。",
                join_numbers(numbers)
            ),
        }
    }
}

fn join_numbers(numbers: &[usize]) -> String {
    numbers
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A call of `tool` as it should be written.
fn example(tool: &str, lang: Lang) -> &'static str {
    match (tool, lang) {
        (SEARCH_DOCS, Lang::En) => r#"{"keywords": ["annual leave", "carry over"]}"#,
        (SEARCH_DOCS, Lang::Zh) => r#"{"keywords": ["年假", "结转"]}"#,
        (SUBMIT_ANSWER, Lang::En) => {
            r#"{"answer": "Unused days carry over to March [1].", "citations": [1]}"#
        }
        (SUBMIT_ANSWER, Lang::Zh) => {
            r#"{"answer": "未休年假可结转至次年三月[1]。", "citations": [1]}"#
        }
        (REPORT_NO_EVIDENCE, Lang::En) => {
            r#"{"reason": "no passage covers pets; tried [pets], [animals]"}"#
        }
        (REPORT_NO_EVIDENCE, Lang::Zh) => r#"{"reason": "没有段落提到宠物；试过 [宠物]、[动物]"}"#,
        (_, Lang::En) => r#"{"key": "grade", "value": "B"}"#,
        (_, Lang::Zh) => r#"{"key": "职级", "value": "B类"}"#,
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
    /// Read by [`citation_refs`]: numbers, `{passage, quote?}`, `{chunkId, quote}`, a string of
    /// numbers, or one of these alone.
    #[serde(default)]
    citations: Value,
    /// Declared small talk (greeting, thanks, a question about the conversation itself).
    #[serde(default)]
    conversational: bool,
}

/// One citation as the model wrote it.
#[derive(Debug, Clone, PartialEq)]
enum CitationRef {
    /// A passage number as shown, with a quote of it when the model chose one.
    Passage {
        number: usize,
        quote: Option<String>,
    },
    /// A chunk id (the form before passages were numbered), with its quote.
    Chunk { chunk_id: String, quote: String },
}

/// The passage numbers in a string such as `"1"`, `"[1, 3]"`, `"#2"`, `"passage 2"`, `"段落2"`;
/// `None` when it holds anything else.
fn numbers_in(text: &str) -> Option<Vec<usize>> {
    let cleaned = text
        .to_lowercase()
        .replace("passages", " ")
        .replace("passage", " ")
        .replace(['段', '落', '第', '#', '[', ']', '【', '】', '(', ')'], " ");
    let numbers: Option<Vec<usize>> = cleaned
        .split([',', '，', '、', ' ', ';'])
        .filter(|p| !p.trim().is_empty())
        .map(|p| p.trim().parse::<usize>().ok())
        .collect();
    numbers.filter(|n| !n.is_empty())
}

/// A JSON number that is a whole number (`1`, `1.0`).
fn whole(v: &Value) -> Option<usize> {
    v.as_u64()
        .or_else(|| {
            v.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                .map(|f| f as u64)
        })
        .and_then(|n| usize::try_from(n).ok())
}

/// The citations of a `submitAnswer` call, in any of the forms models write them.
fn citation_refs(v: &Value) -> Result<Vec<CitationRef>, String> {
    let passage = |number: usize, quote: Option<String>| CitationRef::Passage { number, quote };
    match v {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => {
            let mut out = Vec::new();
            for item in items {
                out.extend(citation_refs(item)?);
            }
            Ok(out)
        }
        Value::Number(_) => whole(v)
            .map(|n| vec![passage(n, None)])
            .ok_or_else(|| format!("citation {v} is not a passage number")),
        Value::String(s) => Ok(match numbers_in(s) {
            Some(numbers) => numbers.into_iter().map(|n| passage(n, None)).collect(),
            None if s.trim().is_empty() => Vec::new(),
            None => vec![CitationRef::Chunk {
                chunk_id: s.trim().to_string(),
                quote: String::new(),
            }],
        }),
        Value::Object(o) => {
            let field = |names: &[&str]| names.iter().find_map(|n| o.get(*n));
            let quote = field(&["quote", "text"])
                .and_then(Value::as_str)
                .map(str::to_string);
            let number = field(&["passage", "number", "n", "passageNumber", "passage_number"])
                .or_else(|| o.get("id").filter(|id| id.is_number()));
            if let Some(n) = number {
                let n = whole(n)
                    .or_else(|| {
                        n.as_str()
                            .and_then(numbers_in)
                            .and_then(|v| v.first().copied())
                    })
                    .ok_or_else(|| format!("citation {v} has no passage number"))?;
                return Ok(vec![passage(n, quote)]);
            }
            match field(&["chunkId", "chunk_id", "id"]).and_then(Value::as_str) {
                Some(id) => Ok(vec![CitationRef::Chunk {
                    chunk_id: id.trim().to_string(),
                    quote: quote.unwrap_or_default(),
                }]),
                None => Err(format!("citation {v} has no passage number")),
            }
        }
        Value::Bool(_) => Err(format!("citation {v} is not a passage number")),
    }
}

/// The citations as the loop checks them: each passage number becomes its chunk and a quote —
/// the model's own when it gave one (checked verbatim by the loop like any quote), else the
/// shown sentence of the passage that shares the most words with the answer (shown sentences
/// are verbatim pieces of the chunk). A chunk id without a quote is quoted the same way when
/// its passage was shown. Numbers that name no shown passage are refused all together.
/// Returns the citations and the passage number of each (0 for a chunk never shown).
fn resolve(
    answer: &str,
    refs: Vec<CitationRef>,
    shown: &[Passage],
) -> Result<(Vec<ProposedCitation>, Vec<usize>), ToolError> {
    let mut unknown: Vec<usize> = (refs.iter())
        .filter_map(|r| match r {
            CitationRef::Passage { number, .. } if *number == 0 || *number > shown.len() => {
                Some(*number)
            }
            _ => None,
        })
        .collect();
    unknown.dedup();
    if !unknown.is_empty() {
        return Err(ToolError::UnknownPassage {
            numbers: unknown,
            shown: shown.len(),
        });
    }
    let bare = passages::strip_markers(answer);
    let quote_of = |p: &Passage| {
        let sentence = passages::supporting_sentence(p, &bare)
            .map(|(s, _)| s)
            .or(p.sentences.first().map(String::as_str))
            .unwrap_or_default();
        truncate_chars(sentence, MAX_QUOTE_CHARS).to_string()
    };
    let mut out: Vec<(ProposedCitation, usize)> = Vec::new();
    for r in refs {
        let (cited, number) = match r {
            CitationRef::Passage { number, quote } => {
                let p = &shown[number - 1];
                let quote = quote
                    .filter(|q| !q.trim().is_empty())
                    .unwrap_or_else(|| quote_of(p));
                let cited = ProposedCitation {
                    chunk_id: p.chunk_id.clone(),
                    quote,
                };
                (cited, number)
            }
            CitationRef::Chunk { chunk_id, quote } => {
                let at = shown.iter().position(|p| p.chunk_id == chunk_id);
                let quote = match at {
                    Some(i) if quote.trim().is_empty() => quote_of(&shown[i]),
                    _ => quote,
                };
                (
                    ProposedCitation { chunk_id, quote },
                    at.map_or(0, |i| i + 1),
                )
            }
        };
        if !out.iter().any(|(c, _)| *c == cited) {
            out.push((cited, number));
        }
    }
    Ok(out.into_iter().unzip())
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
                message: e.to_string(),
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
/// removed, parameter and tool names dropped, duplicates dropped.
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
                || names_a_tool(term)
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
/// search's reason when the call gives none; `shown` are the passages shown so far, numbered
/// from 1, which an answer cites by number.
pub fn parse_call(
    name: &str,
    arguments: &str,
    fallback_reason: Option<&str>,
    shown: &[Passage],
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
            let refs = citation_refs(&a.citations).map_err(|message| ToolError::Malformed {
                tool: SUBMIT_ANSWER,
                message,
            })?;
            // Only a reply with no citations can be conversational; with citations it is an
            // ordinary answer and is checked as one.
            if a.conversational && refs.is_empty() {
                return Ok(PlannerAction::Reply {
                    text: a.answer.trim().to_string(),
                });
            }
            answer_citing(a.answer.trim(), refs, shown)
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

/// An answer with its citations resolved ([`resolve`]) and the passage numbers in its text
/// renumbered to its citation list (`[3]` becomes `[1]` when passage 3 is cited first). With no
/// citations, the passages its text cites in brackets (`[1]`) are its citations, when they were
/// all shown: small models write them there and leave the list empty.
fn answer_citing(
    text: &str,
    mut refs: Vec<CitationRef>,
    shown: &[Passage],
) -> Result<PlannerAction, ToolError> {
    if refs.is_empty() {
        refs = markers_in(text)
            .into_iter()
            .filter(|n| (1..=shown.len()).contains(n))
            .map(|number| CitationRef::Passage {
                number,
                quote: None,
            })
            .collect();
    }
    let (citations, numbers) = resolve(text, refs, shown)?;
    Ok(PlannerAction::Answer {
        text: passages::renumber_markers(text, &numbers),
        citations,
    })
}

/// A reply in plain text as an answer: it cites the shown passages its brackets name, if any.
pub fn text_answer(text: &str, shown: &[Passage]) -> PlannerAction {
    answer_citing(text, Vec::new(), shown).unwrap_or_else(|_| PlannerAction::Answer {
        text: text.to_string(),
        citations: Vec::new(),
    })
}

/// The passage numbers a text cites in brackets, each once, in order.
fn markers_in(text: &str) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    passages::map_markers(text, |numbers, _| {
        for n in numbers {
            if !out.contains(n) {
                out.push(*n);
            }
        }
        String::new()
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(
        name: &str,
        arguments: &str,
        reason: Option<&str>,
    ) -> Result<PlannerAction, ToolError> {
        parse_call(name, arguments, reason, &[])
    }

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
                parse(SEARCH_DOCS, raw, None),
                Ok(search(&["annual leave", "carry over"])),
                "{raw}"
            );
        }
        // A comma inside a string is the model's text, not a slip.
        assert_eq!(
            parse(SEARCH_DOCS, "{\"keywords\": [\"a,]\"],}", None),
            Ok(search(&["a,]"]))
        );
        assert!(matches!(
            parse(SEARCH_DOCS, "annual leave, carry over", None),
            Err(ToolError::Malformed { .. })
        ));
    }

    #[test]
    fn tool_calls_become_actions() {
        assert_eq!(
            parse(
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
            parse(
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
            parse(
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
            parse(REPORT_NO_EVIDENCE, r#"{"reason":"nothing on pets"}"#, None),
            Ok(PlannerAction::GiveUp {
                reason: "no_relevant_hits: nothing on pets".into()
            })
        );
        assert_eq!(
            parse(
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
        let keywords = |raw: &str| match parse(SEARCH_DOCS, raw, None) {
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

    /// Qwen2.5-Coder-1.5B, after being told its reply was empty, searched the notice's words
    /// and the tool's name; and after tool results it wrote the call's prefix as its reply.
    #[test]
    fn tool_names_are_never_keywords_and_a_bare_call_prefix_is_recognised() {
        let keywords = |raw: &str| match parse(SEARCH_DOCS, raw, None) {
            Ok(PlannerAction::Search { keywords, .. }) => keywords,
            other => panic!("{raw}: {other:?}"),
        };
        assert_eq!(
            keywords(r#"{"keywords":["病假","searchDocs","functions.submitAnswer"]}"#),
            ["病假"]
        );
        assert_eq!(
            keywords(r#"{"keywords":["SearchDocs","sick leave"]}"#),
            ["sick leave"]
        );
        // Nothing left: kept for the planner, which searches the question's words instead.
        assert_eq!(keywords(r#"{"keywords":["searchDocs"]}"#), ["searchDocs"]);

        assert_eq!(bare_call_prefix("functions.searchDocs:"), Some(SEARCH_DOCS));
        assert_eq!(
            bare_call_prefix("functions.searchDocs:\nfunctions.submitAnswer:"),
            Some(SUBMIT_ANSWER)
        );
        assert_eq!(
            bare_call_prefix(" reportNoEvidence "),
            Some(REPORT_NO_EVIDENCE)
        );
        // Anything more is a reply of its own (an answer attempt), not a bare prefix.
        assert_eq!(
            bare_call_prefix(r#"functions.searchDocs: {"keywords": ["x"]}"#),
            None
        );
        assert_eq!(bare_call_prefix("Use searchDocs: it finds the rule."), None);
        assert_eq!(bare_call_prefix(""), None);
        assert_eq!(bare_call_prefix("functions.dropTables:"), None);
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
            let e = parse(name, args, None).expect_err(args);
            assert!(matches!(e, ToolError::Malformed { .. }), "{e}");
            assert!(
                e.to_message(Lang::En)
                    .contains("Call it again with a JSON object like")
            );
        }
        let e = parse("deleteIndex", "{}", None).expect_err("unknown");
        assert!(matches!(e, ToolError::UnknownTool(_)));
        assert!(
            e.to_message(Lang::Zh)
                .contains("没有名为 \"deleteIndex\" 的工具")
        );
        assert!(e.to_string().contains("searchDocs"));
    }

    fn shown() -> Vec<Passage> {
        let passage = |id: &str, sentences: &[&str]| Passage {
            chunk_id: id.into(),
            title_path: "Handbook / Leave".into(),
            sentences: sentences.iter().map(|s| s.to_string()).collect(),
        };
        vec![
            passage(
                "c_a",
                &[
                    "Employees get 15 days of annual leave.",
                    "Unused days carry over until March.",
                ],
            ),
            passage("c_b", &["Sick leave needs a doctor's note."]),
        ]
    }

    fn answer(arguments: &str) -> Result<PlannerAction, ToolError> {
        parse_call(SUBMIT_ANSWER, arguments, None, &shown())
    }

    fn cited(action: Result<PlannerAction, ToolError>) -> (String, Vec<(String, String)>) {
        match action {
            Ok(PlannerAction::Answer { text, citations }) => (
                text,
                citations
                    .into_iter()
                    .map(|c| (c.chunk_id, c.quote))
                    .collect(),
            ),
            other => panic!("{other:?}"),
        }
    }

    /// Every form models write citations in becomes the shown passage's chunk and a verbatim
    /// sentence of it: the one that shares the most words with the answer.
    #[test]
    fn citations_by_number_become_chunks_and_shown_sentences() {
        let carry = (
            "c_a".to_string(),
            "Unused days carry over until March.".to_string(),
        );
        let sick = (
            "c_b".to_string(),
            "Sick leave needs a doctor's note.".to_string(),
        );
        for args in [
            r#"{"answer":"Unused days carry over [1].","citations":[1]}"#,
            r#"{"answer":"Unused days carry over [1].","citations":[{"passage":1}]}"#,
            r#"{"answer":"Unused days carry over [1].","citations":["[1]"]}"#,
            r#"{"answer":"Unused days carry over [1].","citations":"1"}"#,
            r#"{"answer":"Unused days carry over [1].","citations":[{"passage":"1"}, 1]}"#,
            // The list forgotten, the number written in the answer.
            r#"{"answer":"Unused days carry over [1].","citations":[]}"#,
            // The old form, without a quote, of a chunk that was shown.
            r#"{"answer":"Unused days carry over [1].","citations":[{"chunkId":"c_a"}]}"#,
        ] {
            assert_eq!(
                cited(answer(args)),
                (
                    "Unused days carry over [1].".to_string(),
                    vec![carry.clone()]
                ),
                "{args}"
            );
        }
        // The model's own quote is kept (the loop checks it), the markers follow the list.
        let (text, citations) = cited(answer(
            r#"{"answer":"A note [2]; 15 days [1].","citations":[2,{"passage":1,"quote":"15 days of annual leave"}]}"#,
        ));
        assert_eq!(text, "A note [1]; 15 days [2].");
        assert_eq!(
            citations,
            [sick, ("c_a".into(), "15 days of annual leave".into())]
        );
        // The old form with its quote is passed on as it was.
        let (_, citations) = cited(answer(
            r#"{"answer":"x","citations":[{"chunkId":"c_9","quote":"q"}]}"#,
        ));
        assert_eq!(citations, [("c_9".to_string(), "q".to_string())]);
    }

    #[test]
    fn a_number_that_names_no_passage_is_refused_with_the_numbers_shown() {
        let e = answer(r#"{"answer":"x [3]","citations":[1, 3, 0]}"#).expect_err("unknown");
        assert_eq!(
            e,
            ToolError::UnknownPassage {
                numbers: vec![3, 0],
                shown: 2
            }
        );
        let en = e.to_message(Lang::En);
        assert!(
            en.contains("passages 3, 0 were not shown; the passages shown are 1 to 2"),
            "{en}"
        );
        assert!(en.contains("\"citations\": [1]"), "{en}");
        let zh = ToolError::UnknownPassage {
            numbers: vec![7],
            shown: 2,
        }
        .to_message(Lang::Zh);
        assert!(
            zh.contains("没有显示过编号为 7 的段落；显示过的段落是 1 到 2"),
            "{zh}"
        );
        let none = parse(SUBMIT_ANSWER, r#"{"answer":"x","citations":[1]}"#, None)
            .expect_err("none shown");
        assert!(
            none.to_message(Lang::En)
                .contains("no passages have been shown yet")
        );
        assert!(matches!(
            answer(r#"{"answer":"x","citations":[true]}"#),
            Err(ToolError::Malformed { .. })
        ));
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
