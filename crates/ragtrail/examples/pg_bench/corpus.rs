//! The benchmark's corpora: synthetic policy-shaped text, a BEIR corpus chunked by the
//! project's chunker, and real-text "extra" units (sentences or runs of sentences of other
//! local corpora) that bring a real corpus up to a target row count.

use std::path::Path;

use ragtrail::{DocStatus, internals::Chunk, internals::Document, internals::sha256_hex};

pub type Docs = Vec<(Document, Vec<Chunk>)>;

pub const PER_DOC: usize = 20;
const TOPICS: usize = 2000;
const WORDS_PER_TOPIC: usize = 40;
const VOCABULARY: usize = 20_000;

pub use ragtrail::internals::SplitMix64 as Rng;

/// Pronounceable pseudo-words, distinct by construction.
fn word(i: usize) -> String {
    const C: &[u8] = b"bcdfghjklmnprstvz";
    const V: &[u8] = b"aeiou";
    let mut n = i;
    let mut w = String::new();
    for _ in 0..3 {
        w.push(C[n % C.len()] as char);
        n /= C.len();
        w.push(V[n % V.len()] as char);
        n /= V.len();
    }
    w
}

pub struct Corpus {
    vocabulary: Vec<String>,
    topics: Vec<Vec<usize>>,
    /// Cumulative Zipf weights (s = 1) over the vocabulary.
    zipf: Vec<f64>,
}

impl Corpus {
    pub fn new(rng: &mut Rng) -> Self {
        let vocabulary: Vec<String> = (0..VOCABULARY).map(word).collect();
        let topics = (0..TOPICS)
            .map(|_| {
                (0..WORDS_PER_TOPIC)
                    .map(|_| rng.below(VOCABULARY))
                    .collect()
            })
            .collect();
        let mut zipf = Vec::with_capacity(VOCABULARY);
        let mut total = 0.0;
        for r in 1..=VOCABULARY {
            total += 1.0 / r as f64;
            zipf.push(total);
        }
        Self {
            vocabulary,
            topics,
            zipf,
        }
    }
    fn common_word(&self, rng: &mut Rng) -> usize {
        let total = self.zipf.last().copied().unwrap_or(1.0);
        let x = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
        self.zipf.partition_point(|&c| c < x).min(VOCABULARY - 1)
    }
    fn text(&self, rng: &mut Rng, topic: usize, words: usize) -> String {
        (0..words)
            .map(|_| {
                if rng.below(2) == 0 {
                    let t = &self.topics[topic];
                    self.vocabulary[t[rng.below(t.len())]].as_str()
                } else {
                    self.vocabulary[self.common_word(rng)].as_str()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Three words of a random chunk.
pub fn query(docs: &[(Document, Vec<Chunk>)], rng: &mut Rng) -> Vec<String> {
    let (_, chunks) = &docs[rng.below(docs.len())];
    let words: Vec<&str> = chunks[rng.below(chunks.len())].text.split(' ').collect();
    (0..3)
        .map(|_| words[rng.below(words.len())].to_string())
        .collect()
}

pub fn document(corpus: &Corpus, rng: &mut Rng, d: usize) -> (Document, Vec<Chunk>) {
    let topic = rng.below(TOPICS);
    let tenant = tenant_of(d);
    let source = format!("bench/doc{d:06}.md");
    let title = format!("Policy {d}");
    let chunks: Vec<Chunk> = (0..PER_DOC)
        .map(|i| {
            let text = corpus.text(rng, topic, 40);
            one_section_chunk(
                &source,
                &title,
                format!("Section {i}"),
                format!("section-{i}"),
                text,
                tenant,
            )
        })
        .collect();
    let doc = plain_document(&source, &title, tenant, sha256_hex(source.as_bytes()));
    (doc, chunks)
}

#[derive(serde::Deserialize)]
struct BeirDoc {
    #[serde(rename = "_id")]
    id: String,
    #[serde(default)]
    title: String,
    text: String,
}

/// A BEIR corpus as documents (every 20th in the small tenant) and its first queries.
#[allow(clippy::type_complexity)]
pub fn beir(
    dir: &Path,
    queries: usize,
) -> Result<(Vec<(Document, Vec<Chunk>)>, Vec<Vec<String>>), Box<dyn std::error::Error>> {
    let mut docs = Vec::new();
    for (d, line) in std::fs::read_to_string(dir.join("corpus.jsonl"))?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
    {
        let b: BeirDoc = serde_json::from_str(line)?;
        let tenant = tenant_of(d);
        let title = if b.title.is_empty() { &b.id } else { &b.title };
        let doc = plain_document(
            &format!("beir/{}.txt", b.id),
            title,
            tenant,
            sha256_hex(line.as_bytes()),
        );
        let chunks = ragtrail::internals::chunk_document(&doc, &b.text, false, Default::default());
        docs.push((doc, chunks));
    }
    let mut words = Vec::new();
    for line in std::fs::read_to_string(dir.join("queries.jsonl"))?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(queries)
    {
        let q: serde_json::Value = serde_json::from_str(line)?;
        words.push(vec![q["text"].as_str().unwrap_or_default().to_string()]);
    }
    Ok((docs, words))
}

/// Every 20th document belongs to a small tenant (about 5% of the rows).
fn tenant_of(d: usize) -> &'static str {
    if d.is_multiple_of(20) {
        "small"
    } else {
        "default"
    }
}

/// Sentences of `text`: cut after `.`, `!` or `?` followed by white space, and after `。`,
/// `！`, `？`; pieces shorter than `min_chars` join the next one.
fn sentences(text: &str, min_chars: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        current.push(c);
        let end = match c {
            '。' | '！' | '？' => true,
            '.' | '!' | '?' => chars.peek().is_none_or(|n| n.is_whitespace()),
            '\n' => chars.peek() == Some(&'\n'),
            _ => false,
        };
        if end && current.trim().chars().count() >= min_chars {
            out.push(current.trim().to_string());
            current.clear();
        }
    }
    let rest = current.trim();
    match out.last_mut() {
        // A short tail belongs to the sentence before it.
        Some(last) if rest.chars().count() < min_chars && !rest.is_empty() => {
            last.push(' ');
            last.push_str(rest);
        }
        _ if !rest.is_empty() => out.push(rest.to_string()),
        _ => {}
    }
    out
}

/// (title, text) of every record of a BEIR folder, or of every Markdown or text file under a
/// plain folder (front matter and a header block ending `<!-- INFO END -->` removed).
fn texts_of(dir: &Path) -> Result<Vec<(String, String)>, Box<dyn std::error::Error>> {
    let corpus = dir.join("corpus.jsonl");
    if corpus.exists() {
        let mut out = Vec::new();
        for line in std::fs::read_to_string(corpus)?
            .lines()
            .filter(|l| !l.trim().is_empty())
        {
            let b: BeirDoc = serde_json::from_str(line)?;
            let title = if b.title.is_empty() { b.id } else { b.title };
            out.push((title, b.text));
        }
        return Ok(out);
    }
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md" || e == "txt") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let raw = std::fs::read_to_string(&path)?;
        let mut body = raw.as_str();
        if let Some(rest) = body.strip_prefix("---\n")
            && let Some(end) = rest.find("\n---\n")
        {
            body = &rest[end + 5..];
        }
        if let Some(i) = body.find("<!-- INFO END -->") {
            body = &body[i + "<!-- INFO END -->".len()..];
        }
        let title = path
            .strip_prefix(dir)
            .unwrap_or(&path)
            .display()
            .to_string();
        out.push((title, body.to_string()));
    }
    Ok(out)
}

/// Real-text units from `spec` = `DIR` or `DIR:N`: every record or file of DIR becomes a
/// document whose chunks are runs of N sentences (default 1). Document numbers continue from
/// `first_doc` (for the tenant split); at most `budget` chunks are made.
pub fn extra_units(
    spec: &str,
    first_doc: usize,
    budget: usize,
) -> Result<Docs, Box<dyn std::error::Error>> {
    let (dir, window) = match spec.rsplit_once(':') {
        Some((d, n)) if n.parse::<usize>().is_ok() => (d, n.parse::<usize>()?.max(1)),
        _ => (spec, 1),
    };
    let name = Path::new(dir)
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let mut docs = Docs::new();
    let mut made = 0usize;
    for (i, (title, text)) in texts_of(Path::new(dir))?.into_iter().enumerate() {
        if made >= budget {
            break;
        }
        let units: Vec<String> = sentences(&text, 20)
            .chunks(window)
            .map(|s| s.join(" "))
            .take(budget - made)
            .collect();
        if units.is_empty() {
            continue;
        }
        made += units.len();
        let d = first_doc + docs.len();
        let tenant = tenant_of(d);
        let source = format!("extra/{name}-s{window}/{i:06}.txt");
        let chunks = units
            .into_iter()
            .enumerate()
            .map(|(j, unit)| {
                one_section_chunk(
                    &source,
                    &title,
                    format!("Part {j}"),
                    format!("part-{j}"),
                    unit,
                    tenant,
                )
            })
            .collect();
        let doc = plain_document(&source, &title, tenant, sha256_hex(source.as_bytes()));
        docs.push((doc, chunks));
    }
    Ok(docs)
}

/// A chunk that is the whole of one section of a bench document.
fn one_section_chunk(
    source: &str,
    title: &str,
    heading: String,
    anchor: String,
    text: String,
    tenant: &str,
) -> Chunk {
    Chunk {
        id: ragtrail::internals::chunk_id(source, std::slice::from_ref(&heading), 0),
        source: source.to_string(),
        title_path: format!("{title} / {heading}"),
        headings: vec![heading],
        source_uri: format!("{source}#{anchor}"),
        ordinal: 0,
        content_hash: sha256_hex(text.as_bytes()),
        text,
        tenant: tenant.to_string(),
        roles: Vec::new(),
        version: None,
        updated: None,
        status: DocStatus::Active,
    }
}

/// An active document of one tenant, no roles, no version.
fn plain_document(source: &str, title: &str, tenant: &str, content_hash: String) -> Document {
    Document {
        source: source.to_string(),
        title: title.to_string(),
        tenant: tenant.to_string(),
        roles: Vec::new(),
        version: None,
        updated: None,
        status: DocStatus::Active,
        content_hash,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_split_english_and_chinese() {
        assert_eq!(
            sentences(
                "Dr. Smith went home today. It rained a lot there!  Short.",
                10
            ),
            vec![
                "Dr. Smith went home today.",
                "It rained a lot there! Short."
            ]
        );
        assert_eq!(
            sentences("第一句话很长很长。第二句。", 3),
            vec!["第一句话很长很长。", "第二句。"]
        );
    }
}
