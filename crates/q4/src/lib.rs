//! ragtrail's 4-bit matrix kernel: products of f32 activations with Q4_0 weight rows (ggml's
//! block format: per 32 weights an f16 scale and 16 bytes of 4-bit values, weight `j` in the
//! low nibble of byte `j`, weight `j + 16` in its high nibble, each standing for
//! `(q − 8) · scale`).
//!
//! The arithmetic is ggml's Q4_0 × Q8_0 product as candle's x86 kernel does it, step for step,
//! so results are bit for bit candle's (the engine's tests hold the two together): each
//! activation row is quantized to 8 bits per block of 32 (an f16 scale, `round(x / scale)`);
//! per weight row and block, eight lanes of four-weight integer sums are scaled by the product
//! of the two scales and added to eight f32 accumulators with one fused multiply-add each; the
//! lanes are summed pairwise at the end. The speed comes from the loop around it: a weight
//! block is unpacked once for four tokens, and the integer sums take the unsigned 4-bit values
//! as they are (the `− 8` folded into a per-block correction of the activations).
//!
//! A crate of its own so that debug builds can optimise it (the workspace's `profile.dev`
//! sets its `opt-level`): unoptimised SIMD intrinsics made the engine's model tests 10× slower.

/// Weights per block.
pub const QK: usize = 32;
/// Bytes per Q4_0 block: an f16 scale and 16 bytes of nibbles.
pub const BLOCK_BYTES: usize = 18;

/// Activations quantized to 8 bits per block of 32 (ggml's Q8_0, as candle quantizes them).
///
/// Tokens are stored in pairs, block by block: block `b` of token `2p`, then block `b` of token
/// `2p + 1` (an odd count is padded with a zero token), so the 512-bit kernel loads both
/// tokens' blocks at once.
pub struct Q8 {
    blocks: usize,
    tokens: usize,
    /// 32 values per block, in [`Q8::at`] order.
    q: Vec<i8>,
    /// Each block's scale (the f16 one, widened).
    d: Vec<f32>,
    /// Per block, eight lanes of `−8 · (sum of the lane's four values)`: adding it to the sums
    /// of unsigned 4-bit values times activations gives the sums of `(q − 8)` times them.
    correction: Vec<[i32; 8]>,
}

impl Q8 {
    /// `tokens` rows of `k` values each (`k` a multiple of 32).
    pub fn quantize(x: &[f32], tokens: usize, k: usize) -> Self {
        assert!(k.is_multiple_of(QK) && x.len() >= tokens * k);
        let blocks = k / QK;
        let n = tokens.div_ceil(2) * 2 * blocks;
        let mut out = Self {
            blocks,
            tokens,
            q: vec![0i8; n * QK],
            d: vec![0.0f32; n],
            correction: vec![[0i32; 8]; n],
        };
        for (t, row) in x[..tokens * k].chunks_exact(k).enumerate() {
            for (b, xs) in row.chunks_exact(QK).enumerate() {
                let i = out.at(t, b);
                let amax = xs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                let scale = amax / 127.0;
                let inv = if scale != 0.0 { 1.0 / scale } else { 0.0 };
                out.d[i] = half::f16::from_f32(scale).to_f32();
                let qs = &mut out.q[i * QK..(i + 1) * QK];
                for (q, &x) in qs.iter_mut().zip(xs) {
                    *q = round(x * inv);
                }
                for (lane, c) in out.correction[i].iter_mut().enumerate() {
                    *c = -8
                        * qs[lane * 4..lane * 4 + 4]
                            .iter()
                            .map(|&v| v as i32)
                            .sum::<i32>();
                }
            }
        }
        out
    }

    pub fn tokens(&self) -> usize {
        self.tokens
    }

    /// Where block `b` of token `t` is.
    #[inline(always)]
    fn at(&self, t: usize, b: usize) -> usize {
        ((t / 2) * self.blocks + b) * 2 + t % 2
    }
}

/// `v` rounded half away from zero, as `f32::round` (which is a call into libm on baseline
/// x86-64), for |v| ≤ 127 as quantized activations are.
#[inline(always)]
fn round(v: f32) -> i8 {
    let t = v as i32;
    // Exact: the fractional part of a float is a float.
    let frac = v - t as f32;
    let r = t + (frac >= 0.5) as i32 - (frac <= -0.5) as i32;
    r.clamp(-128, 127) as i8
}

/// The widened f16 scale at the start of a block.
#[inline(always)]
fn scale(block: &[u8]) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([block[0], block[1]])).to_f32()
}

/// The eight lanes summed as candle's `hsum_float_8` does: halves, then pairs.
#[inline(always)]
fn hsum(a: [f32; 8]) -> f32 {
    let r = [a[4] + a[0], a[5] + a[1], a[6] + a[2], a[7] + a[3]];
    (r[0] + r[2]) + (r[1] + r[3])
}

/// The best kernel this CPU runs.
#[derive(Clone, Copy, Debug)]
pub enum Kernel {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX-512 with VNNI: two tokens per instruction, the integer sums in one.
    #[cfg(target_arch = "x86_64")]
    Avx512Vnni,
}

impl Kernel {
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let avx2 = has!("avx2") && has!("fma") && has!("f16c");
            if avx2 && has!("avx512f") && has!("avx512bw") && has!("avx512vnni") {
                return Kernel::Avx512Vnni;
            }
            if avx2 {
                return Kernel::Avx2;
            }
        }
        Kernel::Portable
    }

    /// `dst[r·tokens + t] = w_r · x_t` for the `rows` rows of blocks `w`.
    /// `w` holds `rows` rows of `k / 32` blocks each.
    pub fn rows(self, w: &[u8], rows: usize, k: usize, q: &Q8, dst: &mut [f32]) {
        match self {
            Kernel::Portable => portable(w, rows, k, q, dst),
            // SAFETY: the CPU has the features (detected above); the kernels check bounds.
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => unsafe { avx2::rows(w, rows, k, q, dst) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512Vnni => unsafe { vnni::rows(w, rows, k, q, dst) },
        }
    }
}

/// The same arithmetic without SIMD (and the reference the SIMD kernel is tested against).
fn portable(w: &[u8], rows: usize, k: usize, q: &Q8, dst: &mut [f32]) {
    let kb = k / QK;
    let tokens = q.tokens();
    assert!(w.len() >= rows * kb * BLOCK_BYTES && dst.len() >= rows * tokens && q.blocks == kb);
    for r in 0..rows {
        let wr = &w[r * kb * BLOCK_BYTES..(r + 1) * kb * BLOCK_BYTES];
        for t in 0..tokens {
            let mut acc = [0.0f32; 8];
            for (b, wb) in wr.chunks_exact(BLOCK_BYTES).enumerate() {
                let i = q.at(t, b);
                let d = scale(wb) * q.d[i];
                let ys = &q.q[i * QK..(i + 1) * QK];
                for (lane, a) in acc.iter_mut().enumerate() {
                    let mut s = q.correction[i][lane];
                    for j in lane * 4..lane * 4 + 4 {
                        let nib = if j < 16 {
                            wb[2 + j] & 0x0F
                        } else {
                            wb[2 + j - 16] >> 4
                        };
                        s += nib as i32 * ys[j] as i32;
                    }
                    *a = d.mul_add(s as f32, *a);
                }
            }
            dst[r * tokens + t] = hsum(acc);
        }
    }
}

/// The widened f16 scale at the start of a block, by the F16C instruction (half's own
/// conversion is a call per block).
///
/// # Safety
/// The CPU must have F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "f16c")]
#[inline]
unsafe fn f16c_scale(block: &[u8]) -> f32 {
    use std::arch::x86_64::*;
    let bits = u16::from_le_bytes([block[0], block[1]]);
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)))
}

#[cfg(target_arch = "x86_64")]
mod vnni {
    use super::{BLOCK_BYTES, Q8, QK, f16c_scale, hsum};
    use std::arch::x86_64::*;

    /// # Safety
    /// The CPU must have AVX-512 (F, BW, VNNI), AVX2, FMA and F16C.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
    pub(super) unsafe fn rows(w: &[u8], rows: usize, k: usize, q: &Q8, dst: &mut [f32]) {
        let kb = k / QK;
        let tokens = q.tokens();
        let pairs = tokens.div_ceil(2);
        assert!(w.len() >= rows * kb * BLOCK_BYTES && dst.len() >= rows * tokens);
        assert!(q.blocks == kb && q.correction.len() >= pairs * 2 * kb);
        let mut put = |r: usize, p: usize, sums: [f32; 2]| {
            for (h, s) in sums.into_iter().enumerate() {
                if 2 * p + h < tokens {
                    dst[r * tokens + 2 * p + h] = s;
                }
            }
        };
        for r in 0..rows {
            let wr = &w[r * kb * BLOCK_BYTES..(r + 1) * kb * BLOCK_BYTES];
            let mut p = 0;
            while p + 2 <= pairs {
                let [a, b] = unsafe { tile::<2>(wr, kb, q, p) };
                put(r, p, a);
                put(r, p + 1, b);
                p += 2;
            }
            if p < pairs {
                let [a] = unsafe { tile::<1>(wr, kb, q, p) };
                put(r, p, a);
            }
        }
    }

    /// One weight row against token pairs `p0 .. p0 + N`, a pair per 512-bit register (its
    /// two halves are the 256-bit lanes of the AVX2 kernel, one token each).
    ///
    /// # Safety
    /// As [`rows`]; the pairs exist in `q` (checked by the caller).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn tile<const N: usize>(wr: &[u8], kb: usize, q: &Q8, p0: usize) -> [[f32; 2]; N] {
        let low = _mm256_set1_epi8(0x0F);
        // Lanes 0..8 take the first scale, 8..16 the second.
        let halves = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
        let mut acc = [_mm512_setzero_ps(); N];
        let (qp, cp, dp) = (q.q.as_ptr(), q.correction.as_ptr(), q.d.as_ptr());
        for b in 0..kb {
            let wb = &wr[b * BLOCK_BYTES..(b + 1) * BLOCK_BYTES];
            let wd = _mm512_set1_ps(unsafe { f16c_scale(wb) });
            // SAFETY: `wb` has 16 bytes after its scale.
            let raw = unsafe { _mm_loadu_si128(wb.as_ptr().add(2).cast()) };
            let nibbles = _mm256_and_si256(
                _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(raw), _mm_srli_epi16(raw, 4)),
                low,
            );
            let nibbles = _mm512_broadcast_i64x4(nibbles);
            for (n, a) in acc.iter_mut().enumerate() {
                // Both tokens' block `b`, side by side.
                let i = ((p0 + n) * kb + b) * 2;
                // SAFETY: blocks `i` and `i + 1` exist (checked by the caller).
                let (ys, c, d2) = unsafe {
                    (
                        _mm512_loadu_si512(qp.add(i * QK).cast()),
                        _mm512_loadu_si512(cp.add(i).cast()),
                        _mm_castpd_ps(_mm_load_sd(dp.add(i).cast())),
                    )
                };
                let sums = _mm512_dpbusd_epi32(c, nibbles, ys);
                let d = _mm512_mul_ps(
                    wd,
                    _mm512_permutexvar_ps(halves, _mm512_castps128_ps512(d2)),
                );
                *a = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sums), *a);
            }
        }
        let mut out = [[0.0f32; 2]; N];
        for (o, a) in out.iter_mut().zip(acc) {
            let mut lanes = [0.0f32; 16];
            // SAFETY: sixteen floats.
            unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), a) };
            let (lo, hi) = lanes.split_at(8);
            *o = [
                hsum(lo.try_into().unwrap_or([0.0; 8])),
                hsum(hi.try_into().unwrap_or([0.0; 8])),
            ];
        }
        out
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{BLOCK_BYTES, Q8, QK, f16c_scale, hsum};
    use std::arch::x86_64::*;

    /// Tokens sharing one unpacked weight block.
    const T: usize = 4;

    /// # Safety
    /// The CPU must have AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn rows(w: &[u8], rows: usize, k: usize, q: &Q8, dst: &mut [f32]) {
        let kb = k / QK;
        let tokens = q.tokens();
        assert!(w.len() >= rows * kb * BLOCK_BYTES && dst.len() >= rows * tokens);
        assert!(q.blocks == kb && q.correction.len() >= tokens.div_ceil(2) * 2 * kb);
        for r in 0..rows {
            let wr = &w[r * kb * BLOCK_BYTES..(r + 1) * kb * BLOCK_BYTES];
            let mut t = 0;
            while t + T <= tokens {
                let sums = unsafe { tile::<T>(wr, kb, q, t) };
                dst[r * tokens + t..r * tokens + t + T].copy_from_slice(&sums);
                t += T;
            }
            while t < tokens {
                let [s] = unsafe { tile::<1>(wr, kb, q, t) };
                dst[r * tokens + t] = s;
                t += 1;
            }
        }
    }

    /// One weight row against tokens `t0 .. t0 + N`.
    ///
    /// # Safety
    /// AVX2, FMA and F16C; `wr` holds `kb` blocks and `q` has tokens `t0 .. t0 + N` (checked
    /// by the caller).
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn tile<const N: usize>(wr: &[u8], kb: usize, q: &Q8, t0: usize) -> [f32; N] {
        let low = _mm256_set1_epi8(0x0F);
        let ones = _mm256_set1_epi16(1);
        let mut acc = [_mm256_setzero_ps(); N];
        let qp = q.q.as_ptr();
        let cp = q.correction.as_ptr();
        for b in 0..kb {
            let wb = &wr[b * BLOCK_BYTES..(b + 1) * BLOCK_BYTES];
            let wd = _mm256_set1_ps(unsafe { f16c_scale(wb) });
            // SAFETY: `wb` has 16 bytes after its scale.
            let raw = unsafe { _mm_loadu_si128(wb.as_ptr().add(2).cast()) };
            // Weights 0..16 from the low nibbles, 16..32 from the high ones, unsigned.
            let nibbles = _mm256_and_si256(
                _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(raw), _mm_srli_epi16(raw, 4)),
                low,
            );
            for (n, a) in acc.iter_mut().enumerate() {
                let i = q.at(t0 + n, b);
                // SAFETY: block `i` exists (checked by the caller): 32 values, eight lanes.
                let (ys, c) = unsafe {
                    (
                        _mm256_loadu_si256(qp.add(i * QK).cast()),
                        _mm256_loadu_si256(cp.add(i).cast()),
                    )
                };
                let sums = _mm256_add_epi32(
                    _mm256_madd_epi16(_mm256_maddubs_epi16(nibbles, ys), ones),
                    c,
                );
                let d = _mm256_mul_ps(wd, _mm256_set1_ps(q.d[i]));
                *a = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), *a);
            }
        }
        let mut out = [0.0f32; N];
        for (o, a) in out.iter_mut().zip(acc) {
            let mut lanes = [0.0f32; 8];
            // SAFETY: eight floats.
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), a) };
            *o = hsum(lanes);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel this CPU can run.
    fn kernels() -> Vec<Kernel> {
        let mut all = vec![Kernel::Portable];
        #[cfg(target_arch = "x86_64")]
        match Kernel::detect() {
            Kernel::Avx512Vnni => all.extend([Kernel::Avx2, Kernel::Avx512Vnni]),
            Kernel::Avx2 => all.push(Kernel::Avx2),
            Kernel::Portable => {}
        }
        all
    }

    #[test]
    fn rounding_is_f32_rounds() {
        let mut v = -128.0f32;
        while v <= 128.0 {
            for x in [
                v,
                v + 0.5,
                v - f32::EPSILON * v.abs(),
                0.5 - f32::EPSILON / 4.0,
            ] {
                assert_eq!(round(x), x.round().clamp(-128.0, 127.0) as i8, "{x}");
            }
            v += 0.125;
        }
    }

    #[test]
    fn the_simd_kernel_gives_the_portable_ones_bits() {
        for tokens in [1, 2, 3, 4, 5, 9] {
            simd_equals_portable(7, 96, tokens);
        }
    }

    fn simd_equals_portable(rows: usize, k: usize, tokens: usize) {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut w = Vec::new();
        for _ in 0..rows * k / QK {
            let d = half::f16::from_f32((next() % 1000) as f32 / 10_000.0);
            w.extend_from_slice(&d.to_bits().to_le_bytes());
            w.extend((0..16).map(|_| next() as u8));
        }
        let x: Vec<f32> = (0..tokens * k)
            .map(|_| (next() % 20_001) as f32 / 1000.0 - 10.0)
            .collect();
        let q = Q8::quantize(&x, tokens, k);
        let mut a = vec![0.0f32; rows * tokens];
        portable(&w, rows, k, &q, &mut a);
        for kernel in kernels() {
            let mut b = vec![0.0f32; rows * tokens];
            kernel.rows(&w, rows, k, &q, &mut b);
            assert!(
                a.iter().zip(&b).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{kernel:?}"
            );
        }
        // And both are the dot products of the weights with the 8-bit activations.
        for r in 0..rows {
            for t in 0..tokens {
                let mut exact = 0.0f64;
                for (blk, wb) in w[r * k / QK * BLOCK_BYTES..(r + 1) * k / QK * BLOCK_BYTES]
                    .chunks_exact(BLOCK_BYTES)
                    .enumerate()
                {
                    let d = scale(wb) as f64;
                    for j in 0..QK {
                        let nib = if j < 16 {
                            wb[2 + j] & 15
                        } else {
                            wb[2 + j - 16] >> 4
                        };
                        let i = q.at(t, blk);
                        let y = q.q[i * QK + j] as f64 * q.d[i] as f64;
                        exact += (nib as f64 - 8.0) * d * y;
                    }
                }
                let got = a[r * tokens + t] as f64;
                assert!(
                    (got - exact).abs() < 1e-4 * (1.0 + exact.abs()),
                    "{got} vs {exact}"
                );
            }
        }
    }
}
