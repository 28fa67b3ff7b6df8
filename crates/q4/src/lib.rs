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
//! lanes are summed pairwise at the end. The speed comes from the loops around it: the tokens
//! are taken 64 at a time, so their 8-bit blocks stay in the core's cache while every weight
//! row passes over them; a group of four rows is unpacked once for those 64 tokens; a tile of
//! four rows by two token pairs shares its loads; and the integer sums take the unsigned
//! 4-bit values as they are (the `− 8` folded into a per-block correction of the activations).
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
#[derive(Default)]
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
        let mut out = Self::default();
        out.quantize_into(x, tokens, k);
        out
    }

    /// As [`Q8::quantize`], into this one's buffers (a forward pass quantizes four times per
    /// layer: reusing them spares the allocator tens of MB per product on long batches).
    pub fn quantize_into(&mut self, x: &[f32], tokens: usize, k: usize) {
        assert!(k.is_multiple_of(QK) && x.len() >= tokens * k);
        let blocks = k / QK;
        let n = tokens.div_ceil(2) * 2 * blocks;
        self.blocks = blocks;
        self.tokens = tokens;
        self.q.resize(n * QK, 0);
        self.d.resize(n, 0.0);
        self.correction.resize(n, [0; 8]);
        if tokens % 2 == 1 {
            // The padding token of an odd count: zeros, whatever an earlier batch left.
            for b in 0..blocks {
                let i = self.at(tokens, b);
                self.q[i * QK..(i + 1) * QK].fill(0);
                self.d[i] = 0.0;
                self.correction[i] = [0; 8];
            }
        }
        #[cfg(target_arch = "x86_64")]
        let simd = matches!(Kernel::detect(), Kernel::Avx512Vnni);
        #[cfg(not(target_arch = "x86_64"))]
        let simd = false;
        for (t, row) in x[..tokens * k].chunks_exact(k).enumerate() {
            for (b, xs) in row.chunks_exact(QK).enumerate() {
                let i = self.at(t, b);
                let qs: &mut [i8; QK] = (&mut self.q[i * QK..(i + 1) * QK])
                    .try_into()
                    .expect("a block is 32 values");
                let xs: &[f32; QK] = xs.try_into().expect("a block is 32 values");
                let correction = &mut self.correction[i];
                self.d[i] = if simd {
                    // SAFETY: the CPU has AVX-512 (detected just above).
                    #[cfg(target_arch = "x86_64")]
                    unsafe {
                        vnni::quantize_block(xs, qs, correction)
                    }
                    #[cfg(not(target_arch = "x86_64"))]
                    unreachable!()
                } else {
                    quantize_block(xs, qs, correction)
                };
            }
        }
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

/// One block to 8 bits: `round(x / scale)` with `scale = max |x| / 127`, and its correction
/// lanes; returns the scale rounded to f16 and widened (what the block stores), as candle does.
#[inline(always)]
fn quantize_block(xs: &[f32; QK], qs: &mut [i8; QK], correction: &mut [i32; 8]) -> f32 {
    // Eight lanes of maxima, so the loop vectorises; a maximum is exact in any order.
    let mut lanes = [0.0f32; 8];
    for c in xs.chunks_exact(8) {
        for (m, v) in lanes.iter_mut().zip(c) {
            *m = m.max(v.abs());
        }
    }
    let amax = lanes.iter().fold(0.0f32, |m, &v| m.max(v));
    let scale = amax / 127.0;
    let inv = if scale != 0.0 { 1.0 / scale } else { 0.0 };
    for (q, &x) in qs.iter_mut().zip(xs) {
        *q = round(x * inv);
    }
    for (lane, c) in correction.iter_mut().enumerate() {
        let s: i32 = qs[lane * 4..lane * 4 + 4].iter().map(|&v| v as i32).sum();
        *c = -8 * s;
    }
    half::f16::from_f32(scale).to_f32()
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

    /// `dst[t·ld + r] = w_r · x_t` for the `rows` rows of blocks `w` (`rows` rows of `k / 32`
    /// blocks each) and every token `t` of `q`: token-major, as the encoder wants its
    /// activations, `ld ≥ rows` apart.
    pub fn rows(self, w: &[u8], rows: usize, k: usize, q: &Q8, dst: &mut [f32], ld: usize) {
        let kb = k / QK;
        let tokens = q.tokens();
        assert!(k.is_multiple_of(QK) && q.blocks == kb && w.len() >= rows * kb * BLOCK_BYTES);
        assert!(q.correction.len() >= tokens.div_ceil(2) * 2 * kb);
        assert!(rows <= ld && (tokens == 0 || dst.len() >= (tokens - 1) * ld + rows));
        // A slice of the tokens against every row, then the next slice: the slice's 8-bit
        // activations stay in the core's cache while all the rows pass over them (the whole
        // batch's, re-read for each row, did not fit and made long batches memory-bound).
        let pairs = tokens.div_ceil(2);
        let mut p0 = 0;
        while p0 < pairs {
            let p1 = (p0 + PAIRS_PER_SLICE).min(pairs);
            match self {
                Kernel::Portable => portable(w, rows, kb, q, p0..p1, dst, ld),
                // SAFETY: the CPU has the features (detected above); bounds are checked above.
                #[cfg(target_arch = "x86_64")]
                Kernel::Avx2 => unsafe { avx2::rows(w, rows, kb, q, p0..p1, dst, ld) },
                // SAFETY: as above.
                #[cfg(target_arch = "x86_64")]
                Kernel::Avx512Vnni => unsafe { vnni::rows(w, rows, kb, q, p0..p1, dst, ld) },
            }
            p0 = p1;
        }
    }
}

/// Token pairs per slice of [`Kernel::rows`]: 64 tokens of 1536 values are about 200 kB of
/// 8-bit blocks with their scales and corrections, well inside a core's L2.
const PAIRS_PER_SLICE: usize = 32;

/// The same arithmetic without SIMD (and the reference the SIMD kernels are tested against),
/// for the tokens of pairs `pairs`.
fn portable(
    w: &[u8],
    rows: usize,
    kb: usize,
    q: &Q8,
    pairs: std::ops::Range<usize>,
    dst: &mut [f32],
    ld: usize,
) {
    let tokens = (pairs.start * 2)..(pairs.end * 2).min(q.tokens());
    for r in 0..rows {
        let wr = &w[r * kb * BLOCK_BYTES..(r + 1) * kb * BLOCK_BYTES];
        for t in tokens.clone() {
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
            dst[t * ld + r] = hsum(acc);
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
    use super::{BLOCK_BYTES, Q8, QK, f16c_scale};
    use std::arch::x86_64::*;
    use std::ops::Range;

    /// Weight rows per tile: each pair's loaded block serves [`R`] rows.
    const R: usize = 4;
    /// Token pairs per tile: each row's unpacked block serves [`P`] pairs.
    const P: usize = 2;

    /// # Safety
    /// The CPU must have AVX-512 (F, BW, VNNI), AVX2, FMA and F16C; the caller checked that
    /// `w` holds `rows × kb` blocks, `q` the pairs and `dst` every token's row.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
    pub(super) unsafe fn rows(
        w: &[u8],
        rows: usize,
        kb: usize,
        q: &Q8,
        pairs: Range<usize>,
        dst: &mut [f32],
        ld: usize,
    ) {
        let tokens = q.tokens();
        let mut put = |r0: usize, p0: usize, acc: &[[__m512; P]; R], nr: usize, np: usize| {
            for (i, row) in acc.iter().enumerate().take(nr) {
                for (j, a) in row.iter().enumerate().take(np) {
                    let sums = unsafe { hsum_pair(*a) };
                    for (h, sum) in sums.into_iter().enumerate() {
                        let t = 2 * (p0 + j) + h;
                        if t < tokens {
                            dst[t * ld + r0 + i] = sum;
                        }
                    }
                }
            }
        };
        // A row group's blocks unpacked once for the whole slice of tokens: nibbles as the
        // 512-bit operand (weights 0..32 in each half) and the widened scales.
        let mut nibbles = vec![_mm512_setzero_si512(); R * kb];
        let mut scales = vec![0.0f32; R * kb];
        let low = _mm512_set1_epi8(0x0F);
        // The 16 bytes of nibbles in all four 128-bit lanes, lanes 1 and 3 shifted by 4 bits.
        let by4 = 4 << 48 | 4 << 32 | 4 << 16 | 4;
        let shifts = _mm512_set_epi64(by4, by4, 0, 0, by4, by4, 0, 0);
        let mut r0 = 0;
        while r0 < rows {
            let nr = (rows - r0).min(R);
            for i in 0..nr {
                let row = &w[(r0 + i) * kb * BLOCK_BYTES..(r0 + i + 1) * kb * BLOCK_BYTES];
                for (b, wb) in row.chunks_exact(BLOCK_BYTES).enumerate() {
                    scales[i * kb + b] = unsafe { f16c_scale(wb) };
                    // SAFETY: `wb` has 16 bytes after its scale.
                    let raw = _mm512_broadcast_i32x4(unsafe {
                        _mm_loadu_si128(wb.as_ptr().add(2).cast())
                    });
                    nibbles[i * kb + b] = _mm512_and_si512(_mm512_srlv_epi16(raw, shifts), low);
                }
            }
            let mut p0 = pairs.start;
            while p0 < pairs.end {
                let np = (pairs.end - p0).min(P);
                // SAFETY: rows `r0 .. r0 + nr` are unpacked, pairs `p0 .. p0 + np` exist.
                let acc = unsafe {
                    match (nr, np) {
                        (R, P) => tile::<R, P>(&nibbles, &scales, kb, q, p0),
                        (R, _) => widen(tile::<R, 1>(&nibbles, &scales, kb, q, p0)),
                        (_, P) => tile_rows::<P>(&nibbles, &scales, kb, q, nr, p0),
                        _ => tile_rows::<1>(&nibbles, &scales, kb, q, nr, p0),
                    }
                };
                put(r0, p0, &acc, nr, np);
                p0 += np;
            }
            r0 += nr;
        }
    }

    /// [`hsum`] of each 256-bit half (a token's eight lanes), in its order: halves of the
    /// eight, then pairs.
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn hsum_pair(a: __m512) -> [f32; 2] {
        // Lanes k and k + 4 of each half: r = [a4 + a0, a5 + a1, a6 + a2, a7 + a3].
        let r = _mm512_add_ps(a, _mm512_shuffle_f32x4::<0b10_11_00_01>(a, a));
        // (r0 + r2), (r1 + r3).
        let r = _mm512_add_ps(r, _mm512_permute_ps::<0b01_00_11_10>(r));
        // (r0 + r2) + (r1 + r3).
        let r = _mm512_add_ps(r, _mm512_permute_ps::<0b10_11_00_01>(r));
        [
            _mm512_cvtss_f32(r),
            _mm_cvtss_f32(_mm512_extractf32x4_ps::<2>(r)),
        ]
    }

    /// [`super::quantize_block`] sixteen values at a time, the same operations in the same
    /// order on each value (a test holds the two to the same bits).
    ///
    /// # Safety
    /// The CPU must have AVX-512 (F, BW), AVX2 and F16C.
    #[target_feature(enable = "avx512f,avx512bw,avx2,f16c")]
    #[inline]
    pub(super) unsafe fn quantize_block(
        xs: &[f32; QK],
        qs: &mut [i8; QK],
        correction: &mut [i32; 8],
    ) -> f32 {
        // SAFETY: 32 floats.
        let (x0, x1) = unsafe {
            (
                _mm512_loadu_ps(xs.as_ptr()),
                _mm512_loadu_ps(xs.as_ptr().add(16)),
            )
        };
        let amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
        let scale = amax / 127.0;
        let inv = _mm512_set1_ps(if scale != 0.0 { 1.0 / scale } else { 0.0 });
        let one = _mm512_set1_epi32(1);
        // `round`: truncate, then one up or down by the fraction's side of ±0.5.
        let round = |x: __m512| -> __m128i {
            let v = _mm512_mul_ps(x, inv);
            let t = _mm512_cvttps_epi32(v);
            let frac = _mm512_sub_ps(v, _mm512_cvtepi32_ps(t));
            let up = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(frac, _mm512_set1_ps(0.5));
            let down = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(frac, _mm512_set1_ps(-0.5));
            let r = _mm512_mask_add_epi32(t, up, t, one);
            let r = _mm512_mask_sub_epi32(r, down, r, one);
            let r = _mm512_max_epi32(
                _mm512_min_epi32(r, _mm512_set1_epi32(127)),
                _mm512_set1_epi32(-128),
            );
            _mm512_cvtepi32_epi8(r)
        };
        let bytes = _mm256_set_m128i(round(x1), round(x0));
        // SAFETY: 32 bytes.
        unsafe { _mm256_storeu_si256(qs.as_mut_ptr().cast(), bytes) };
        // Lane sums of four values (1 · q, pairwise, then pairs of pairs), times −8.
        let sums = _mm256_madd_epi16(
            _mm256_maddubs_epi16(_mm256_set1_epi8(1), bytes),
            _mm256_set1_epi16(1),
        );
        let c = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32::<3>(sums));
        // SAFETY: eight i32.
        unsafe { _mm256_storeu_si256(correction.as_mut_ptr().cast(), c) };
        let half = _mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(scale));
        _mm_cvtss_f32(_mm_cvtph_ps(half))
    }

    fn widen<const N: usize>(a: [[__m512; N]; R]) -> [[__m512; P]; R] {
        a.map(|row| {
            let mut out = [row[0]; P];
            out[..N].copy_from_slice(&row);
            out
        })
    }

    /// Fewer than [`R`] rows (the matrix's last): one row at a time.
    ///
    /// # Safety
    /// As [`tile`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
    unsafe fn tile_rows<const N: usize>(
        nibbles: &[__m512i],
        scales: &[f32],
        kb: usize,
        q: &Q8,
        nr: usize,
        p0: usize,
    ) -> [[__m512; P]; R] {
        let mut out = [[_mm512_setzero_ps(); P]; R];
        for (i, o) in out.iter_mut().enumerate().take(nr) {
            let (n, s) = (&nibbles[i * kb..], &scales[i * kb..]);
            let [a] = unsafe { tile::<1, N>(n, s, kb, q, p0) };
            o[..N].copy_from_slice(&a);
        }
        out
    }

    /// `NR` unpacked rows (`kb` blocks apart in `nibbles` and `scales`) against token pairs
    /// `p0 .. p0 + NP`, a pair per 512-bit register (its two halves are the 256-bit lanes of
    /// the AVX2 kernel, one token each). Every output's arithmetic is the one-row, one-pair
    /// sequence: the tile only shares loads.
    ///
    /// # Safety
    /// As [`rows`]; the rows are unpacked and the pairs exist (checked by the caller).
    // Indices, not iterators: each step reads three arrays at the same row or pair.
    #[allow(clippy::needless_range_loop)]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn tile<const NR: usize, const NP: usize>(
        nibbles: &[__m512i],
        scales: &[f32],
        kb: usize,
        q: &Q8,
        p0: usize,
    ) -> [[__m512; NP]; NR] {
        assert!(nibbles.len() >= (NR - 1) * kb + kb && scales.len() >= (NR - 1) * kb + kb);
        // Lanes 0..8 take the first token's scale, 8..16 the second's.
        let halves = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
        let mut acc = [[_mm512_setzero_ps(); NP]; NR];
        let (qp, cp, dp) = (q.q.as_ptr(), q.correction.as_ptr(), q.d.as_ptr());
        for b in 0..kb {
            for j in 0..NP {
                // Both tokens' block `b`, side by side.
                let at = ((p0 + j) * kb + b) * 2;
                // SAFETY: blocks `at` and `at + 1` exist (checked by the caller).
                let (ys, c, d2) = unsafe {
                    (
                        _mm512_loadu_si512(qp.add(at * QK).cast()),
                        _mm512_loadu_si512(cp.add(at).cast()),
                        _mm_castpd_ps(_mm_load_sd(dp.add(at).cast())),
                    )
                };
                let dq = _mm512_permutexvar_ps(halves, _mm512_castps128_ps512(d2));
                for i in 0..NR {
                    let sums = _mm512_dpbusd_epi32(c, nibbles[i * kb + b], ys);
                    let d = _mm512_mul_ps(_mm512_set1_ps(scales[i * kb + b]), dq);
                    acc[i][j] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sums), acc[i][j]);
                }
            }
        }
        acc
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{BLOCK_BYTES, Q8, QK, f16c_scale, hsum};
    use std::arch::x86_64::*;
    use std::ops::Range;

    /// Tokens sharing one unpacked weight block.
    const T: usize = 4;

    /// # Safety
    /// The CPU must have AVX2, FMA and F16C; the caller checked the bounds (as for
    /// `super::vnni::rows`).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn rows(
        w: &[u8],
        rows: usize,
        kb: usize,
        q: &Q8,
        pairs: Range<usize>,
        dst: &mut [f32],
        ld: usize,
    ) {
        let end = (pairs.end * 2).min(q.tokens());
        for r in 0..rows {
            let wr = &w[r * kb * BLOCK_BYTES..(r + 1) * kb * BLOCK_BYTES];
            let mut t = pairs.start * 2;
            while t + T <= end {
                let sums = unsafe { tile::<T>(wr, kb, q, t) };
                for (n, s) in sums.into_iter().enumerate() {
                    dst[(t + n) * ld + r] = s;
                }
                t += T;
            }
            while t < end {
                let [s] = unsafe { tile::<1>(wr, kb, q, t) };
                dst[t * ld + r] = s;
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

/// Deterministic pseudo-random weights and activations (a xorshift generator) for the kernel's
/// tests and its benchmark: scales up to 0.1, every nibble, activations in [-10, 10].
pub struct Sample {
    state: u64,
}

impl Default for Sample {
    fn default() -> Self {
        Self::new()
    }
}

impl Sample {
    pub fn new() -> Self {
        Self {
            state: 0x9e37_79b9_7f4a_7c15,
        }
    }

    fn next(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }

    /// `rows` weight rows of `k` values (a multiple of [`QK`]) as Q4_0 blocks.
    pub fn weights(&mut self, rows: usize, k: usize) -> Vec<u8> {
        let mut w = Vec::with_capacity(rows * k / QK * BLOCK_BYTES);
        for _ in 0..rows * k / QK {
            let d = half::f16::from_f32((self.next() % 1000) as f32 / 10_000.0);
            w.extend_from_slice(&d.to_bits().to_le_bytes());
            w.extend((0..16).map(|_| self.next() as u8));
        }
        w
    }

    /// `tokens` rows of `k` activations.
    pub fn activations(&mut self, tokens: usize, k: usize) -> Vec<f32> {
        (0..tokens * k)
            .map(|_| (self.next() % 20_001) as f32 / 1000.0 - 10.0)
            .collect()
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
        // Rows around the SIMD tile's four, tokens around its pairs and the 64-token slices.
        for (rows, tokens) in [
            (7, 1),
            (7, 2),
            (7, 3),
            (4, 4),
            (9, 5),
            (7, 9),
            (9, 70),
            (5, 130),
        ] {
            simd_equals_portable(rows, 96, tokens);
        }
    }

    #[test]
    fn reused_buffers_quantize_as_fresh_ones() {
        let x: Vec<f32> = (0..9 * 64).map(|i| (i % 37) as f32 - 18.5).collect();
        let mut q = Q8::quantize(&x, 9, 64);
        // Fewer, odd tokens into the same buffers: the padding token must be zero again.
        let y: Vec<f32> = (0..3 * 64).map(|i| (i % 11) as f32 * 0.25).collect();
        q.quantize_into(&y, 3, 64);
        let fresh = Q8::quantize(&y, 3, 64);
        assert_eq!((q.tokens, q.blocks), (fresh.tokens, fresh.blocks));
        assert_eq!(q.q, fresh.q);
        assert_eq!(q.correction, fresh.correction);
        assert!(
            q.d.iter()
                .zip(&fresh.d)
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
    }

    #[test]
    fn the_simd_quantizer_gives_the_scalar_ones_bits() {
        #[cfg(target_arch = "x86_64")]
        if matches!(Kernel::detect(), Kernel::Avx512Vnni) {
            let mut s = 0x2545_f491_4f6c_dd1du64;
            let mut next = || {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s
            };
            let mut blocks: Vec<[f32; QK]> = vec![[0.0; QK], [-0.0; QK], [1e-9; QK], [3.5; QK]];
            // Ties (scale 1: x / scale is x), then values of every size.
            blocks.push(std::array::from_fn(|j| match j {
                0 => 127.0,
                _ => (j as f32 - 16.0) * 7.0 + 0.5,
            }));
            for magnitude in [1e-6f32, 1e-3, 0.1, 1.0, 30.0, 1e4, 1e20] {
                for _ in 0..200 {
                    blocks.push(std::array::from_fn(|_| {
                        ((next() % 2_000_001) as f32 / 1e6 - 1.0) * magnitude
                    }));
                }
            }
            for xs in &blocks {
                let (mut a, mut b) = ([0i8; QK], [0i8; QK]);
                let (mut ca, mut cb) = ([0i32; 8], [0i32; 8]);
                let da = quantize_block(xs, &mut a, &mut ca);
                // SAFETY: the CPU has AVX-512 (checked above).
                let db = unsafe { vnni::quantize_block(xs, &mut b, &mut cb) };
                assert_eq!((a, ca, da.to_bits()), (b, cb, db.to_bits()), "{xs:?}");
            }
        }
    }

    fn simd_equals_portable(rows: usize, k: usize, tokens: usize) {
        let mut sample = Sample::new();
        let w = sample.weights(rows, k);
        let x = sample.activations(tokens, k);
        let q = Q8::quantize(&x, tokens, k);
        // Rows `ld` apart, with a gap after each token's rows that nothing may write.
        let ld = rows + 3;
        let mut a = vec![f32::NAN; tokens * ld];
        portable(&w, rows, k / QK, &q, 0..tokens.div_ceil(2), &mut a, ld);
        for kernel in kernels() {
            let mut b = vec![f32::NAN; tokens * ld];
            kernel.rows(&w, rows, k, &q, &mut b, ld);
            assert!(
                a.iter().zip(&b).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{kernel:?}, {rows} rows, {tokens} tokens"
            );
        }
        for t in 0..tokens {
            assert!(a[t * ld + rows..(t + 1) * ld].iter().all(|v| v.is_nan()));
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
                let got = a[t * ld + r] as f64;
                assert!(
                    (got - exact).abs() < 1e-4 * (1.0 + exact.abs()),
                    "{got} vs {exact}"
                );
            }
        }
    }
}
