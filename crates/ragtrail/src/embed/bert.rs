//! The BERT encoder's forward pass on CPU, for sentence embeddings.
//!
//! Weights are read from safetensors (any float type, [`super::safetensors`]) and kept as plain
//! `f32` rows; matrix products go to the `gemm` crate (candle's CPU kernel). The same pass runs a model
//! with 4-bit weights (the packed multilingual-e5-small of [`super::e5`]): its projections are
//! Q4_0 products read in place from the mapped file ([`super::q4`]; activations quantized to 8
//! bits per block of 32, as ggml does), its word embeddings are dequantized row by row as tokens
//! look them up. Written out rather than
//! run through a generic BERT (candle's) because embedding is the slow part of an ingest and a
//! forward pass for sentence vectors can skip most of the generic work:
//!
//! * **No padding at all.** The sequences of a batch are packed one after another: every
//!   position-wise step (projections, feed-forward, layer norms: nearly all of the FLOPs) runs on
//!   real tokens only, and attention runs per sequence at its own length, so no mask is needed.
//! * **No allocation per step.** Buffers live in a [`Scratch`] reused across batches
//!   (allocating and freeing tens of MB per operation made the kernel zero pages for a tenth of
//!   the run).
//! * **Fused steps.** Biases and residuals are written into the output before the product
//!   accumulates onto them; the attention scale is folded into the query weights; GELU (exact,
//!   erf-based) and softmax use branch-free `exp`/`erf` approximations accurate to about 1e-7.
//! * **Threads by batch.** A caller with several batches runs them on separate threads, each
//!   with single-threaded products (no synchronisation inside a batch); a single batch splits
//!   its products across threads instead.

use std::sync::Arc;

use gemm::Parallelism;
use serde::Deserialize;

use super::q4::Q4Matrix;
use super::safetensors::SafeTensors;
use ragtrail_q4::Q8;

/// The parts of `config.json` the forward pass needs.
#[derive(Debug, Clone, Deserialize)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub position_embedding_type: Option<String>,
    /// `bert` (or absent), or a RoBERTa-family encoder (`xlm-roberta`, `roberta`): the same
    /// layers, positions counted from `pad_token_id + 1` (see [`BertConfig::position_offset`]).
    #[serde(default)]
    pub model_type: Option<String>,
    #[serde(default)]
    pub pad_token_id: Option<usize>,
}

/// The `model_type`s whose encoder this forward pass runs.
pub const MODEL_TYPES: &[&str] = &["bert", "xlm-roberta", "roberta"];

impl BertConfig {
    /// The first row of the position table a sequence uses: 0 for BERT; for RoBERTa-family
    /// models `pad_token_id + 1` (their position ids start after the padding id, so the first
    /// rows of the table are never used).
    pub fn position_offset(&self) -> usize {
        match self.model_type.as_deref() {
            Some("xlm-roberta" | "roberta") => self.pad_token_id.unwrap_or(1) + 1,
            _ => 0,
        }
    }

    /// Tokens per sequence at most (special tokens included).
    pub fn usable_positions(&self) -> usize {
        self.max_position_embeddings
            .saturating_sub(self.position_offset())
    }
}

fn default_act() -> String {
    "gelu".into()
}
fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}

/// A projection's weights, `out × in`, row-major (the checkpoint's layout).
pub(super) enum Weights {
    F32(Vec<f32>),
    /// Q4_0 blocks (ggml's layout: 18 bytes per 32 weights), in place in a mapped file.
    Q4(Q4Matrix),
}

impl Weights {
    /// `rows × cols` weights from owned Q4_0 blocks.
    #[cfg(test)]
    pub(super) fn q4(blocks: &[u8], rows: usize, cols: usize) -> Result<Self, String> {
        Q4Matrix::owned(blocks.to_vec(), rows, cols).map(Weights::Q4)
    }
}

pub(super) struct Linear {
    pub(super) w: Weights,
    pub(super) b: Vec<f32>,
    pub(super) input: usize,
    pub(super) output: usize,
}

pub(super) struct Norm {
    pub(super) gamma: Vec<f32>,
    pub(super) beta: Vec<f32>,
}

pub(super) struct Layer {
    /// Query, key and value stacked (`3H × H`).
    pub(super) qkv: Linear,
    /// Applied to the query columns after the product: 1 when the query rows were pre-scaled
    /// by 1/√d (f32 weights), 1/√d for 4-bit weights (which cannot be rescaled exactly).
    pub(super) query_scale: f32,
    pub(super) attn_out: Linear,
    pub(super) attn_norm: Norm,
    pub(super) up: Linear,
    pub(super) down: Linear,
    pub(super) out_norm: Norm,
}

/// The word-embedding table.
pub(super) enum WordTable {
    /// `vocab × hidden`, row-major.
    F32(Vec<f32>),
    /// Q4_0 rows (hidden / 32 blocks each) in place in a mapped model file, from byte `start`.
    Q4 {
        file: Arc<super::e5_file::E5File>,
        start: usize,
    },
}

/// A loaded BERT encoder.
pub struct Bert {
    pub(super) hidden: usize,
    pub(super) heads: usize,
    pub(super) head_dim: usize,
    pub(super) eps: f32,
    pub(super) vocab: usize,
    pub(super) max_positions: usize,
    pub(super) word: WordTable,
    pub(super) position: Vec<f32>,
    /// Token type 0's embedding (sentence embeddings use a single segment).
    pub(super) token_type: Vec<f32>,
    pub(super) emb_norm: Norm,
    pub(super) layers: Vec<Layer>,
}

struct Tensors<'a> {
    file: SafeTensors<'a>,
    prefix: String,
}

impl Tensors<'_> {
    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        let full = format!("{}{name}", self.prefix);
        let dims = self
            .file
            .shape(&full)
            .ok_or_else(|| format!("model.safetensors has no tensor {full}"))?;
        if dims != shape {
            return Err(format!(
                "tensor {full} has shape {dims:?}, config.json implies {shape:?}"
            ));
        }
        self.file
            .to_f32(&full)
            .map_err(|e| format!("model.safetensors: {e}"))
    }

    /// LayerNorm parameters are `weight`/`bias` in current checkpoints, `gamma`/`beta` in old ones.
    fn norm(&self, name: &str, h: usize) -> Result<Norm, String> {
        let has = |s: &str| self.file.contains(&format!("{}{name}.{s}", self.prefix));
        let (g, b) = if !has("weight") && has("gamma") {
            ("gamma", "beta")
        } else {
            ("weight", "bias")
        };
        Ok(Norm {
            gamma: self.get(&format!("{name}.{g}"), &[h])?,
            beta: self.get(&format!("{name}.{b}"), &[h])?,
        })
    }

    fn linear(&self, name: &str, output: usize, input: usize) -> Result<Linear, String> {
        Ok(Linear {
            w: Weights::F32(self.get(&format!("{name}.weight"), &[output, input])?),
            b: self.get(&format!("{name}.bias"), &[output])?,
            input,
            output,
        })
    }
}

impl Bert {
    /// Builds the encoder from a safetensors file's bytes (any float type; converted to f32).
    pub fn load(config: &BertConfig, safetensors: &[u8]) -> Result<Self, String> {
        if config.hidden_act != "gelu" {
            return Err(format!(
                "hidden_act {:?} is not supported (only \"gelu\", as BERT uses)",
                config.hidden_act
            ));
        }
        if let Some(p) = &config.position_embedding_type
            && p != "absolute"
        {
            return Err(format!(
                "position_embedding_type {p:?} is not supported (only \"absolute\")"
            ));
        }
        let h = config.hidden_size;
        let heads = config.num_attention_heads;
        if heads == 0 || !h.is_multiple_of(heads) {
            return Err(format!(
                "hidden_size {h} is not a multiple of num_attention_heads {heads}"
            ));
        }
        let positions = config.usable_positions();
        if positions < 2 {
            return Err(format!(
                "max_position_embeddings {} leaves no room for a sequence",
                config.max_position_embeddings
            ));
        }
        let file = SafeTensors::parse(safetensors)
            .map_err(|e| format!("model.safetensors cannot be read: {e}"))?;
        let prefix = ["", "bert.", "roberta.", "model."]
            .into_iter()
            .find(|p| file.contains(&format!("{p}embeddings.word_embeddings.weight")))
            .ok_or("model.safetensors has no embeddings.word_embeddings.weight: not a BERT model")?
            .to_string();
        let t = Tensors { file, prefix };
        let head_dim = h / heads;
        let scale = 1.0 / (head_dim as f32).sqrt();
        let i = config.intermediate_size;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for l in 0..config.num_hidden_layers {
            let p = format!("encoder.layer.{l}.");
            let q = t.linear(&format!("{p}attention.self.query"), h, h)?;
            let k = t.linear(&format!("{p}attention.self.key"), h, h)?;
            let v = t.linear(&format!("{p}attention.self.value"), h, h)?;
            let (Weights::F32(qw), Weights::F32(kw), Weights::F32(vw)) = (&q.w, &k.w, &v.w) else {
                return Err("safetensors weights are read as f32".into());
            };
            let mut w = Vec::with_capacity(3 * h * h);
            w.extend(qw.iter().map(|x| x * scale));
            w.extend_from_slice(kw);
            w.extend_from_slice(vw);
            let mut b = Vec::with_capacity(3 * h);
            b.extend(q.b.iter().map(|x| x * scale));
            b.extend_from_slice(&k.b);
            b.extend_from_slice(&v.b);
            layers.push(Layer {
                qkv: Linear {
                    w: Weights::F32(w),
                    b,
                    input: h,
                    output: 3 * h,
                },
                query_scale: 1.0,
                attn_out: t.linear(&format!("{p}attention.output.dense"), h, h)?,
                attn_norm: t.norm(&format!("{p}attention.output.LayerNorm"), h)?,
                up: t.linear(&format!("{p}intermediate.dense"), i, h)?,
                down: t.linear(&format!("{p}output.dense"), h, i)?,
                out_norm: t.norm(&format!("{p}output.LayerNorm"), h)?,
            });
        }
        if config.type_vocab_size == 0 {
            return Err("type_vocab_size is 0: the encoder needs token type 0's embedding".into());
        }
        let token_types = t.get(
            "embeddings.token_type_embeddings.weight",
            &[config.type_vocab_size, h],
        )?;
        let mut position = t.get(
            "embeddings.position_embeddings.weight",
            &[config.max_position_embeddings, h],
        )?;
        // Rows before the offset are never used: position p of a sequence reads row offset + p.
        position.drain(..config.position_offset() * h);
        Ok(Self {
            hidden: h,
            heads,
            head_dim,
            eps: config.layer_norm_eps as f32,
            vocab: config.vocab_size,
            max_positions: positions,
            word: WordTable::F32(
                t.get("embeddings.word_embeddings.weight", &[config.vocab_size, h])?,
            ),
            position,
            token_type: token_types[..h].to_vec(),
            emb_norm: t.norm("embeddings.LayerNorm", h)?,
            layers,
        })
    }

    pub fn hidden_size(&self) -> usize {
        self.hidden
    }

    /// Runs `seqs` (token ids, special tokens included) through the encoder and returns the
    /// packed token vectors (`Σ len × hidden`, sequence after sequence, borrowed from `scratch`)
    /// and each sequence's starting row. `threads > 1` splits the matrix products across that
    /// many threads.
    pub fn forward<'s>(
        &self,
        seqs: &[&[u32]],
        threads: usize,
        scratch: &'s mut Scratch,
    ) -> Result<(&'s [f32], Vec<usize>), String> {
        for seq in seqs {
            if seq.is_empty() || seq.len() > self.max_positions {
                return Err(format!(
                    "a sequence of {} tokens (1 to {} allowed)",
                    seq.len(),
                    self.max_positions
                ));
            }
            if let Some(id) = seq.iter().find(|&&id| id as usize >= self.vocab) {
                return Err(format!(
                    "token id {id} is outside the vocabulary of {}",
                    self.vocab
                ));
            }
        }
        let par = if threads > 1 {
            Parallelism::Rayon(threads)
        } else {
            Parallelism::None
        };
        let offsets = self.run(seqs, par, scratch)?;
        Ok((&scratch.x, offsets))
    }

    fn run(
        &self,
        seqs: &[&[u32]],
        par: Parallelism,
        s: &mut Scratch,
    ) -> Result<Vec<usize>, String> {
        let h = self.hidden;
        let mut offsets = Vec::with_capacity(seqs.len());
        let mut total = 0;
        for seq in seqs {
            offsets.push(total);
            total += seq.len();
        }
        let inter = self.layers.first().map_or(0, |l| l.up.output);
        let longest = seqs.iter().map(|q| q.len()).max().unwrap_or(0);
        s.ensure(total, h, inter, longest);

        // Embeddings: word + position + token type 0, then LayerNorm.
        let mut row = 0;
        for seq in seqs {
            for (pos, &id) in seq.iter().enumerate() {
                let out = &mut s.x[row * h..(row + 1) * h];
                let id = id as usize;
                match &self.word {
                    WordTable::F32(word) => out.copy_from_slice(&word[id * h..(id + 1) * h]),
                    WordTable::Q4 { file, start } => {
                        let row_bytes = h / 32 * 18;
                        let at = start + id * row_bytes;
                        dequantize_q4(&file.bytes()[at..at + row_bytes], out);
                    }
                }
                let p = &self.position[pos * h..(pos + 1) * h];
                for j in 0..h {
                    out[j] += p[j] + self.token_type[j];
                }
                row += 1;
            }
        }
        layer_norm(&mut s.x[..total * h], h, &self.emb_norm, self.eps);

        for layer in &self.layers {
            // Q, K, V for every token.
            linear_into(
                &mut s.qkv[..total * 3 * h],
                None,
                &s.x[..total * h],
                total,
                &layer.qkv,
                par,
                &mut s.q8,
            )?;
            if layer.query_scale != 1.0 {
                for row in s.qkv[..total * 3 * h].chunks_exact_mut(3 * h) {
                    row[..h].iter_mut().for_each(|v| *v *= layer.query_scale);
                }
            }
            // Attention, per sequence and head, at the sequence's own length.
            let stride = 3 * h;
            let d = self.head_dim;
            for (seq, &o) in seqs.iter().zip(&offsets) {
                let n = seq.len();
                for head in 0..self.heads {
                    let scores = &mut s.scores[..n * n];
                    // scores = Q_h · K_hᵀ (the 1/√d is in Q's weights).
                    matmul(
                        n,
                        n,
                        d,
                        Out {
                            data: scores,
                            rs: n,
                            accumulate: false,
                        },
                        In {
                            data: &s.qkv,
                            offset: o * stride + head * d,
                            rs: stride,
                            cs: 1,
                        },
                        In {
                            data: &s.qkv,
                            offset: o * stride + h + head * d,
                            rs: 1,
                            cs: stride,
                        },
                        Parallelism::None,
                    );
                    for r in scores.chunks_exact_mut(n) {
                        softmax(r);
                    }
                    // context_h = P · V_h, written into its head's columns.
                    matmul(
                        n,
                        d,
                        n,
                        Out {
                            data: &mut s.ctx[o * h + head * d..],
                            rs: h,
                            accumulate: false,
                        },
                        In {
                            data: scores,
                            offset: 0,
                            rs: n,
                            cs: 1,
                        },
                        In {
                            data: &s.qkv,
                            offset: o * stride + 2 * h + head * d,
                            rs: stride,
                            cs: 1,
                        },
                        Parallelism::None,
                    );
                }
            }
            // Output projection + residual, LayerNorm.
            linear_into(
                &mut s.tmp[..total * h],
                Some(&s.x[..total * h]),
                &s.ctx[..total * h],
                total,
                &layer.attn_out,
                par,
                &mut s.q8,
            )?;
            layer_norm(&mut s.tmp[..total * h], h, &layer.attn_norm, self.eps);
            std::mem::swap(&mut s.x, &mut s.tmp);
            // Feed-forward: up, GELU, down + residual, LayerNorm.
            let i = layer.up.output;
            linear_into(
                &mut s.inter[..total * i],
                None,
                &s.x[..total * h],
                total,
                &layer.up,
                par,
                &mut s.q8,
            )?;
            gelu(&mut s.inter[..total * i]);
            linear_into(
                &mut s.tmp[..total * h],
                Some(&s.x[..total * h]),
                &s.inter[..total * i],
                total,
                &layer.down,
                par,
                &mut s.q8,
            )?;
            layer_norm(&mut s.tmp[..total * h], h, &layer.out_norm, self.eps);
            std::mem::swap(&mut s.x, &mut s.tmp);
        }
        s.x.truncate(total * h);
        Ok(offsets)
    }
}

/// Working buffers of a forward pass, grown as needed and reused (one per concurrent batch).
#[derive(Default)]
pub struct Scratch {
    x: Vec<f32>,
    tmp: Vec<f32>,
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    inter: Vec<f32>,
    scores: Vec<f32>,
    /// A 4-bit product's 8-bit activations.
    q8: Q8,
}

impl Scratch {
    fn ensure(&mut self, tokens: usize, h: usize, inter: usize, longest: usize) {
        let grow = |v: &mut Vec<f32>, n: usize| {
            if v.len() < n {
                v.resize(n, 0.0);
            }
        };
        grow(&mut self.x, tokens * h);
        grow(&mut self.tmp, tokens * h);
        grow(&mut self.qkv, tokens * 3 * h);
        grow(&mut self.ctx, tokens * h);
        grow(&mut self.inter, tokens * inter);
        grow(&mut self.scores, longest * longest);
    }
}

/// A read-only matrix view: element (r, c) is `data[offset + r·rs + c·cs]`.
struct In<'a> {
    data: &'a [f32],
    offset: usize,
    rs: usize,
    cs: usize,
}

/// A row-major output: element (r, c) is `data[r·rs + c]`; `accumulate` adds to what is there.
struct Out<'a> {
    data: &'a mut [f32],
    rs: usize,
    accumulate: bool,
}

/// `out (m×n) (+)= a (m×k) · b (k×n)`, bounds-checked, then handed to `gemm`.
fn matmul(m: usize, n: usize, k: usize, out: Out, a: In, b: In, par: Parallelism) {
    if m == 0 || n == 0 || k == 0 {
        return;
    }
    let last = |v: &In, rows: usize, cols: usize| v.offset + (rows - 1) * v.rs + (cols - 1) * v.cs;
    assert!(last(&a, m, k) < a.data.len(), "matmul: lhs out of bounds");
    assert!(last(&b, k, n) < b.data.len(), "matmul: rhs out of bounds");
    assert!(
        (m - 1) * out.rs + n <= out.data.len() && n <= out.rs,
        "matmul: output out of bounds"
    );
    // SAFETY: every element gemm reads or writes lies within the slices (checked above, with
    // the strides given); the output is borrowed mutably, so it overlaps neither input.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.data.as_mut_ptr(),
            1,
            out.rs as isize,
            out.accumulate,
            a.data.as_ptr().add(a.offset),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr().add(b.offset),
            b.cs as isize,
            b.rs as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            par,
        );
    }
}

/// Dequantizes one row of Q4_0 blocks into `out` (32 values per 18-byte block).
pub(super) fn dequantize_q4(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in blocks.chunks_exact(18).zip(out.chunks_exact_mut(32)) {
        let d = half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
        for (j, &q) in b[2..18].iter().enumerate() {
            o[j] = ((q & 0x0F) as i32 - 8) as f32 * d;
            o[j + 16] = ((q >> 4) as i32 - 8) as f32 * d;
        }
    }
}

/// `out = x · Wᵀ + bias (+ residual)` for `rows` rows.
fn linear_into(
    out: &mut [f32],
    residual: Option<&[f32]>,
    x: &[f32],
    rows: usize,
    l: &Linear,
    par: Parallelism,
    q8: &mut Q8,
) -> Result<(), String> {
    let w = match &l.w {
        Weights::F32(w) => w,
        Weights::Q4(q) => {
            let threads = match par {
                Parallelism::Rayon(0) => rayon::current_num_threads(),
                Parallelism::Rayon(n) => n,
                _ => 1,
            };
            q.product(x, rows, out, threads, q8);
            for (r, row) in out.chunks_exact_mut(l.output).take(rows).enumerate() {
                for (o, b) in row.iter_mut().zip(&l.b) {
                    *o += b;
                }
                if let Some(res) = residual {
                    for (o, v) in row.iter_mut().zip(&res[r * l.output..(r + 1) * l.output]) {
                        *o += v;
                    }
                }
            }
            return Ok(());
        }
    };
    for (r, row) in out.chunks_exact_mut(l.output).take(rows).enumerate() {
        row.copy_from_slice(&l.b);
        if let Some(res) = residual {
            for (o, v) in row.iter_mut().zip(&res[r * l.output..(r + 1) * l.output]) {
                *o += v;
            }
        }
    }
    matmul(
        rows,
        l.output,
        l.input,
        Out {
            data: out,
            rs: l.output,
            accumulate: true,
        },
        In {
            data: x,
            offset: 0,
            rs: l.input,
            cs: 1,
        },
        // Wᵀ: element (k, n) is W[n][k].
        In {
            data: w,
            offset: 0,
            rs: 1,
            cs: l.input,
        },
        par,
    );
    Ok(())
}

/// Sum with eight independent accumulators, so it vectorises (a single running sum cannot be
/// reordered by the compiler).
fn sum(v: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let chunks = v.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for j in 0..8 {
            acc[j] += c[j];
        }
    }
    acc.iter().sum::<f32>() + rest.iter().sum::<f32>()
}

fn layer_norm(x: &mut [f32], h: usize, norm: &Norm, eps: f32) {
    for row in x.chunks_exact_mut(h) {
        let mean = sum(row) / h as f32;
        for v in row.iter_mut() {
            *v -= mean;
        }
        let mut sq = [0.0f32; 8];
        let chunks = row.chunks_exact(8);
        let rest: f32 = chunks.remainder().iter().map(|v| v * v).sum();
        for c in chunks {
            for j in 0..8 {
                sq[j] += c[j] * c[j];
            }
        }
        let var = (sq.iter().sum::<f32>() + rest) / h as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, g), b) in row.iter_mut().zip(&norm.gamma).zip(&norm.beta) {
            *v = *v * inv * g + b;
        }
    }
}

fn softmax(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for v in row.iter_mut() {
        *v = exp(*v - max);
    }
    let inv = 1.0 / sum(row);
    for v in row.iter_mut() {
        *v *= inv;
    }
}

/// Exact (erf-based) GELU, as BERT's `"gelu"`: `x · Φ(x)`.
fn gelu(x: &mut [f32]) {
    for v in x.iter_mut() {
        *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// `eˣ`, branch-free so loops over it vectorise: Cody–Waite range reduction and Cephes'
/// polynomial (relative error about 1e-7 over the float range; underflows to about 1e-38).
#[inline(always)]
fn exp(x: f32) -> f32 {
    const ROUND: f32 = 12_582_912.0; // 1.5 · 2²³: adding it rounds to an integer.
    let x = x.clamp(-87.0, 88.0);
    let n = (x * std::f32::consts::LOG2_E + ROUND) - ROUND;
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let z = r * r;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5;
    let y = p * z + r + 1.0;
    y * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// erf by Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7), branch-free.
#[inline(always)]
fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = ((((1.061_405_4 * t - 1.453_152_1) * t + 1.421_413_8) * t - 0.284_496_72) * t
        + 0.254_829_6)
        * t;
    let y = 1.0 - poly * exp(-a * a);
    y.copysign(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_and_erf_are_accurate() {
        let mut worst_exp = 0.0f64;
        let mut x = -80.0f32;
        while x < 80.0 {
            let rel = ((exp(x) as f64 - (x as f64).exp()) / (x as f64).exp()).abs();
            worst_exp = worst_exp.max(rel);
            x += 0.0137;
        }
        assert!(worst_exp < 5e-7, "exp relative error {worst_exp}");
        assert!(exp(-1000.0) < 1e-37);
        // erf against values from tables.
        for (x, want) in [
            (0.0f32, 0.0f64),
            (0.1, 0.112_462_916),
            (0.5, 0.520_499_878),
            (1.0, 0.842_700_793),
            (2.0, 0.995_322_265),
            (3.5, 0.999_999_257),
            (-1.0, -0.842_700_793),
        ] {
            assert!((erf(x) as f64 - want).abs() < 3e-7, "erf({x}) = {}", erf(x));
        }
    }

    #[test]
    fn softmax_and_layer_norm() {
        let mut r = vec![1.0f32, 2.0, 3.0];
        softmax(&mut r);
        let e: Vec<f64> = [1.0f64, 2.0, 3.0].iter().map(|v| v.exp()).collect();
        let s: f64 = e.iter().sum();
        for (got, want) in r.iter().zip(e.iter().map(|v| v / s)) {
            assert!((*got as f64 - want).abs() < 1e-6);
        }
        let norm = Norm {
            gamma: vec![1.0; 10],
            beta: vec![0.5; 10],
        };
        let mut x: Vec<f32> = (0..10).map(|i| i as f32).collect();
        layer_norm(&mut x, 10, &norm, 0.0);
        let mean: f32 = x.iter().sum::<f32>() / 10.0;
        let var: f32 = x.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / 10.0;
        assert!((mean - 0.5).abs() < 1e-5 && (var - 1.0).abs() < 1e-4);
    }

    /// Q4_0 blocks of `rows × cols` pseudo-random weights, and the weights they stand for.
    fn q4_blocks(rows: usize, cols: usize) -> (Vec<u8>, Vec<f32>) {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut bytes = Vec::new();
        for _ in 0..rows * cols / 32 {
            let scale = half::f16::from_f32(0.01 + (next() % 100) as f32 / 1000.0);
            bytes.extend_from_slice(&scale.to_bits().to_le_bytes());
            bytes.extend((0..16).map(|_| next() as u8));
        }
        let mut dense = vec![0.0f32; rows * cols];
        for (b, o) in bytes
            .chunks_exact(cols / 32 * 18)
            .zip(dense.chunks_exact_mut(cols))
        {
            dequantize_q4(b, o);
        }
        (bytes, dense)
    }

    #[test]
    fn q4_blocks_dequantize_as_ggml_lays_them_out() {
        // Scale 0.5; byte j holds weight j (low nibble) and weight j + 16 (high nibble).
        let mut block = half::f16::from_f32(0.5).to_bits().to_le_bytes().to_vec();
        block.extend((0..16u8).map(|j| (15 - j) << 4 | j));
        let mut out = [0.0f32; 32];
        dequantize_q4(&block, &mut out);
        assert_eq!(out[0], -4.0); // (0 - 8) · 0.5
        assert_eq!(out[15], 3.5); // (15 - 8) · 0.5
        assert_eq!(out[16], 3.5); // high nibble of byte 0 is 15
        assert_eq!(out[31], -4.0);
    }

    #[test]
    fn q4_products_agree_with_the_dequantized_weights() {
        let (rows, cols, tokens) = (64, 96, 3);
        let (bytes, dense) = q4_blocks(rows, cols);
        let bias: Vec<f32> = (0..rows).map(|i| i as f32 / 100.0).collect();
        let x: Vec<f32> = (0..tokens * cols)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        let q = Linear {
            w: Weights::q4(&bytes, rows, cols).expect("q4 weights"),
            b: bias.clone(),
            input: cols,
            output: rows,
        };
        let f = Linear {
            w: Weights::F32(dense),
            b: bias,
            input: cols,
            output: rows,
        };
        let residual: Vec<f32> = (0..tokens * rows).map(|i| i as f32 / 7.0).collect();
        let mut got = vec![0.0f32; tokens * rows];
        let mut want = vec![0.0f32; tokens * rows];
        let mut q8 = Q8::default();
        linear_into(
            &mut got,
            Some(&residual),
            &x,
            tokens,
            &q,
            Parallelism::None,
            &mut q8,
        )
        .expect("q4");
        linear_into(
            &mut want,
            Some(&residual),
            &x,
            tokens,
            &f,
            Parallelism::None,
            &mut q8,
        )
        .expect("f32");
        // The 4-bit product quantizes activations to 8 bits per block: close, not equal.
        let err = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        let scale = want.iter().map(|v| v.abs()).fold(0.0f32, f32::max);
        assert!(
            err < scale * 0.01,
            "largest difference {err} on values up to {scale}"
        );
        assert!(
            got.iter().zip(&want).any(|(a, b)| a != b),
            "activations were not quantized?"
        );
    }

    /// Safetensors bytes of `f32` tensors.
    fn safetensors(tensors: &[(String, Vec<usize>, Vec<f32>)]) -> Vec<u8> {
        let shapes: Vec<(String, Vec<usize>)> = tensors
            .iter()
            .map(|(n, s, _)| (n.clone(), s.clone()))
            .collect();
        let mut out = super::super::e5_folder::safetensors_header(&shapes);
        for (_, _, v) in tensors {
            out.extend(v.iter().flat_map(|x| x.to_le_bytes()));
        }
        out
    }

    #[test]
    fn an_xlm_roberta_encoder_reads_its_positions_after_the_padding_id() {
        // One tiny encoder written twice: as BERT (positions from row 0, two token types) and
        // as XLM-R (two unused rows first, `pad_token_id` 1; one token type). Same outputs.
        let (h, inter, vocab, positions) = (32usize, 64usize, 10usize, 8usize);
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut values = |n: usize| -> Vec<f32> {
            (0..n)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    ((seed % 2001) as f32 - 1000.0) / 4000.0
                })
                .collect()
        };
        let mut common: Vec<(String, Vec<usize>, Vec<f32>)> = vec![
            (
                "embeddings.word_embeddings.weight".into(),
                vec![vocab, h],
                values(vocab * h),
            ),
            ("embeddings.LayerNorm.weight".into(), vec![h], values(h)),
            ("embeddings.LayerNorm.bias".into(), vec![h], values(h)),
        ];
        let p = "encoder.layer.0.";
        for (name, rows, cols) in [
            ("attention.self.query", h, h),
            ("attention.self.key", h, h),
            ("attention.self.value", h, h),
            ("attention.output.dense", h, h),
            ("intermediate.dense", inter, h),
            ("output.dense", h, inter),
        ] {
            common.push((
                format!("{p}{name}.weight"),
                vec![rows, cols],
                values(rows * cols),
            ));
            common.push((format!("{p}{name}.bias"), vec![rows], values(rows)));
        }
        for name in ["attention.output.LayerNorm", "output.LayerNorm"] {
            common.push((format!("{p}{name}.weight"), vec![h], values(h)));
            common.push((format!("{p}{name}.bias"), vec![h], values(h)));
        }
        let pos = values(positions * h);
        let types = values(2 * h);
        let mut bert = common.clone();
        bert.push((
            "embeddings.position_embeddings.weight".into(),
            vec![positions, h],
            pos.clone(),
        ));
        bert.push((
            "embeddings.token_type_embeddings.weight".into(),
            vec![2, h],
            types.clone(),
        ));
        let mut xlmr: Vec<(String, Vec<usize>, Vec<f32>)> = common
            .into_iter()
            .map(|(n, s, v)| (format!("roberta.{n}"), s, v))
            .collect();
        let mut shifted = values(2 * h);
        shifted.extend_from_slice(&pos);
        xlmr.push((
            "roberta.embeddings.position_embeddings.weight".into(),
            vec![positions + 2, h],
            shifted,
        ));
        xlmr.push((
            "roberta.embeddings.token_type_embeddings.weight".into(),
            vec![1, h],
            types[..h].to_vec(),
        ));
        let config = |model_type: &str, max_positions: usize, types: usize| -> BertConfig {
            serde_json::from_value(serde_json::json!({
                "model_type": model_type, "vocab_size": vocab, "hidden_size": h,
                "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": inter,
                "max_position_embeddings": max_positions, "type_vocab_size": types,
                "pad_token_id": 1,
            }))
            .expect("config")
        };
        let a = Bert::load(&config("bert", positions, 2), &safetensors(&bert)).expect("bert");
        let x_config = config("xlm-roberta", positions + 2, 1);
        assert_eq!(
            (x_config.position_offset(), x_config.usable_positions()),
            (2, positions)
        );
        let b = Bert::load(&x_config, &safetensors(&xlmr)).expect("xlm-roberta");
        assert_eq!(b.max_positions, positions);
        let seqs: [&[u32]; 2] = [&[0, 5, 7, 3, 2], &[0, 9, 4, 6, 8, 1, 3, 2]];
        let (mut sa, mut sb) = (Scratch::default(), Scratch::default());
        let (va, oa) = a.forward(&seqs, 1, &mut sa).expect("forward");
        let (vb, ob) = b.forward(&seqs, 1, &mut sb).expect("forward");
        assert_eq!(oa, ob);
        assert_eq!(va, vb);
        // Nine tokens do not fit either.
        assert!(b.forward(&[&[0; 9]], 1, &mut sb).is_err());
    }

    #[test]
    fn matmul_with_strides() {
        // a = [[1,2],[3,4]], b = aᵀ read through strides: a·aᵀ = [[5,11],[11,25]].
        let a = [1.0f32, 2.0, 3.0, 4.0];
        let mut out = [0.0f32; 4];
        matmul(
            2,
            2,
            2,
            Out {
                data: &mut out,
                rs: 2,
                accumulate: false,
            },
            In {
                data: &a,
                offset: 0,
                rs: 2,
                cs: 1,
            },
            In {
                data: &a,
                offset: 0,
                rs: 1,
                cs: 2,
            },
            Parallelism::None,
        );
        assert_eq!(out, [5.0, 11.0, 11.0, 25.0]);
    }
}
