//! Products with 4-bit (Q4_0) weights read in place from the mapped model file, never copied:
//! the matrices of the packed multilingual-e5-small ([`super::e5`]), multiplied by the kernel
//! crate `ragtrail_q4` (bit for bit candle's Q4_0 × Q8_0 arithmetic; a test below holds them
//! together, so vectors did not move when candle's `QMatMul` was replaced).
//!
//! Why not candle's `QMatMul`: it wants its own copy of the blocks (12 MB copied twice at
//! load, then faulted in), unpacks a weight block once per token, and starts a parallel
//! section per product on its own spinning thread pool. Here a single text's product splits
//! its rows across the caller's threads; a batch of texts runs one whole pass per thread
//! instead ([`super::e5`]), its products single-threaded.

use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;

use ragtrail_q4::{BLOCK_BYTES, Kernel, Q8, QK};

use super::e5_file::E5File;

/// Where a matrix's blocks are.
enum Bytes {
    /// In the mapped model file.
    Mapped(Arc<E5File>, Range<usize>),
    /// Made up by a test.
    #[cfg(test)]
    Owned(Vec<u8>),
}

impl Bytes {
    fn get(&self) -> &[u8] {
        match self {
            Bytes::Mapped(file, range) => &file.bytes()[range.clone()],
            #[cfg(test)]
            Bytes::Owned(v) => v,
        }
    }
}

/// A `rows × cols` matrix of Q4_0 blocks, row-major, possibly made of several stacked parts
/// (query, key and value lie apart in the file but are multiplied as one).
pub(super) struct Q4Matrix {
    parts: Vec<(Bytes, usize)>,
    rows: usize,
    cols: usize,
}

impl Q4Matrix {
    /// Owned blocks (`rows × cols / 32` of them).
    #[cfg(test)]
    pub(super) fn owned(blocks: Vec<u8>, rows: usize, cols: usize) -> Result<Self, String> {
        let mut m = Self::empty(cols)?;
        m.push(Bytes::Owned(blocks), rows)?;
        Ok(m)
    }

    /// No rows yet; [`Q4Matrix::push_mapped`] stacks parts.
    pub(super) fn empty(cols: usize) -> Result<Self, String> {
        if cols == 0 || !cols.is_multiple_of(QK) {
            return Err(format!(
                "4-bit weights need a multiple of {QK} columns, not {cols}"
            ));
        }
        Ok(Self {
            parts: Vec::new(),
            rows: 0,
            cols,
        })
    }

    /// Stacks `rows` rows lying at `range` of the mapped file below the matrix's rows.
    pub(super) fn push_mapped(
        &mut self,
        file: &Arc<E5File>,
        range: Range<usize>,
        rows: usize,
    ) -> Result<(), String> {
        if range.end > file.bytes().len() {
            return Err(format!("4-bit weights at {range:?} lie outside the file"));
        }
        self.push(Bytes::Mapped(Arc::clone(file), range), rows)
    }

    fn push(&mut self, bytes: Bytes, rows: usize) -> Result<(), String> {
        let want = rows * self.row_bytes();
        let got = bytes.get().len();
        if got != want {
            return Err(format!(
                "4-bit weights {rows}×{}: {got} bytes, {want} expected",
                self.cols
            ));
        }
        self.parts.push((bytes, rows));
        self.rows += rows;
        Ok(())
    }

    #[cfg(test)]
    pub(super) fn rows(&self) -> usize {
        self.rows
    }

    fn row_bytes(&self) -> usize {
        self.cols / QK * BLOCK_BYTES
    }

    /// The blocks of rows `range` (which must lie within one part).
    fn part_rows(&self, mut range: Range<usize>) -> (&[u8], usize) {
        let rb = self.row_bytes();
        for (bytes, rows) in &self.parts {
            if range.start < *rows {
                let end = range.end.min(*rows);
                return (&bytes.get()[range.start * rb..end * rb], end - range.start);
            }
            range.start -= rows;
            range.end -= rows;
        }
        (&[], 0)
    }

    /// `out[t·rows + r] = x_t · w_r` for the `tokens` rows of `x` (`tokens × cols`), the
    /// activations quantized into `q8` (buffers kept by the caller across products). With
    /// `threads > 1` the rows are split across that many threads (a single text's pass, where
    /// nothing else runs beside it).
    pub(super) fn product(
        &self,
        x: &[f32],
        tokens: usize,
        out: &mut [f32],
        threads: usize,
        q8: &mut Q8,
    ) {
        let (k, n) = (self.cols, self.rows);
        assert!(x.len() >= tokens * k && out.len() >= tokens * n);
        if tokens == 0 || n == 0 {
            return;
        }
        q8.quantize_into(&x[..tokens * k], tokens, k);
        let q = &*q8;
        let kernel = Kernel::detect();
        if threads <= 1 {
            // Each part straight into its columns of `out`.
            let mut start = 0;
            for (bytes, rows) in &self.parts {
                kernel.rows(bytes.get(), *rows, k, q, &mut out[start..], n);
                start += rows;
            }
            return;
        }
        // Row ranges: never across two parts, about two per thread for balance; each range
        // computed into a buffer of its own, then copied into its columns.
        let mut ranges = Vec::new();
        let mut start = 0;
        let per = n.div_ceil(threads * 2).max(16);
        for (_, rows) in &self.parts {
            let end = start + rows;
            let mut s = start;
            while s < end {
                let e = (s + per).min(end);
                ranges.push(s..e);
                s = e;
            }
            start = end;
        }
        let parts: Vec<Vec<f32>> = ranges
            .par_iter()
            .map(|r| {
                let (w, rows) = self.part_rows(r.clone());
                let mut dst = vec![0.0f32; tokens * rows];
                kernel.rows(w, rows, k, q, &mut dst, rows);
                dst
            })
            .collect();
        for (r, dst) in ranges.iter().zip(&parts) {
            for (t, row) in dst.chunks_exact(r.len()).enumerate() {
                out[t * n + r.start..t * n + r.end].copy_from_slice(row);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::{GgmlDType, QMatMul, ggml_file::qtensor_from_ggml};
    use candle_core::{Device, Module, Tensor};
    use ragtrail_q4::Kernel;

    fn blocks(rows: usize, cols: usize, seed: u64) -> Vec<u8> {
        let mut s = seed;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut bytes = Vec::new();
        for _ in 0..rows * cols / QK {
            let scale = half::f16::from_f32(0.001 + (next() % 1000) as f32 / 20_000.0);
            bytes.extend_from_slice(&scale.to_bits().to_le_bytes());
            bytes.extend((0..16).map(|_| next() as u8));
        }
        bytes
    }

    fn candle(bytes: &[u8], rows: usize, cols: usize, x: &[f32], tokens: usize) -> Vec<f32> {
        let mut aligned = vec![0u16; bytes.len().div_ceil(2)];
        for (d, s) in aligned.iter_mut().zip(bytes.chunks(2)) {
            *d = u16::from_ne_bytes([s[0], s.get(1).copied().unwrap_or(0)]);
        }
        // SAFETY: the view covers the Vec's initialised memory and lives shorter than it.
        let view =
            unsafe { std::slice::from_raw_parts(aligned.as_ptr().cast::<u8>(), bytes.len()) };
        let t = qtensor_from_ggml(GgmlDType::Q4_0, view, vec![rows, cols], &Device::Cpu)
            .expect("qtensor");
        let m = QMatMul::from_qtensor(t).expect("qmatmul");
        let x = Tensor::from_slice(x, (tokens, cols), &Device::Cpu).expect("x");
        m.forward(&x)
            .and_then(|y| y.flatten_all())
            .and_then(|y| y.to_vec1::<f32>())
            .expect("product")
    }

    #[test]
    fn products_are_bit_for_bit_candles() {
        let cols = 384;
        let parts = [(40usize, 1u64), (23, 2), (37, 3)];
        let mut all = Vec::new();
        let mut m = Q4Matrix::empty(cols).expect("matrix");
        for (rows, seed) in parts {
            let b = blocks(rows, cols, seed);
            all.extend_from_slice(&b);
            m.push(Bytes::Owned(b), rows).expect("part");
        }
        let rows = m.rows();
        // One set of 8-bit buffers for every product, as a forward pass keeps them: a long
        // batch (across the kernel's 64-token slices), then a short odd one.
        let mut q8 = Q8::default();
        for tokens in [75, 11] {
            let x: Vec<f32> = (0..tokens * cols)
                .map(|i| (((i * 7919) % 2003) as f32 - 1001.0) / 97.0)
                .collect();
            let want = candle(&all, rows, cols, &x, tokens);
            for threads in [1, 2, 3] {
                let mut got = vec![0.0f32; tokens * rows];
                m.product(&x, tokens, &mut got, threads, &mut q8);
                let differ = got
                    .iter()
                    .zip(&want)
                    .filter(|(a, b)| a.to_bits() != b.to_bits())
                    .count();
                assert_eq!(
                    differ, 0,
                    "{tokens} tokens, {threads} threads: {differ} differ"
                );
            }
        }
        let tokens = 11;
        let x: Vec<f32> = (0..tokens * cols)
            .map(|i| (((i * 7919) % 2003) as f32 - 1001.0) / 97.0)
            .collect();
        // One part straight through the kernel, against candle again.
        let q = Q8::quantize(&x, tokens, cols);
        let w = blocks(8, cols, 9);
        let mut got = vec![0.0f32; 8 * tokens];
        Kernel::detect().rows(&w, 8, cols, &q, &mut got, 8);
        let expect = candle(&w, 8, cols, &x, tokens);
        assert!(
            got.iter()
                .zip(&expect)
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
    }

    #[test]
    fn a_block_row_stands_for_its_weights() {
        // Scale 0.5, weights (q − 8)·0.5 with q = 0..15 then 15..0; x all ones ⇒ Σ weights.
        let mut b = half::f16::from_f32(0.5).to_bits().to_le_bytes().to_vec();
        b.extend((0..16u8).map(|j| (15 - j) << 4 | j));
        let m = Q4Matrix::owned(b, 1, 32).expect("matrix");
        let mut out = [0.0f32; 1];
        m.product(&[1.0; 32], 1, &mut out, 1, &mut Q8::default());
        // Σ (q − 8)·0.5 over q = 0..15 twice = 2 · (−8)·0.5 = −8, give or take 8-bit x.
        assert!((out[0] + 8.0).abs() < 1e-3, "{}", out[0]);
        assert!(Q4Matrix::owned(vec![0; 18], 1, 16).is_err());
        assert!(Q4Matrix::owned(vec![0; 17], 1, 32).is_err());
    }
}
