//! Deterministic signed feature-hashing embedder over character n-grams.
//!
//! # Algorithm (`char-ngram-fnv1a-v1`)
//!
//! Changing anything below changes the vectors, so it must come with a new [`MODEL`] name
//! (stored indexes record it through [`EmbedderInfo`] and are re-embedded on mismatch).
//!
//! 1. **Normalise**: full-width ASCII letters and digits (`Ａ`, `１`) become their ASCII forms.
//! 2. **Split into runs** of one class: CJK (Han, kana, Hangul), word (any other alphanumeric
//!    character: Latin, digits, …) or other (punctuation, spaces, symbols; dropped).
//! 3. **Features**:
//!    * CJK run: every character unigram and bigram (weight 1.0) and trigram (weight 0.5). Chinese
//!      has no spaces, so n-grams stand in for words without needing a dictionary.
//!    * Word run: the lowercased word (weight 1.0) and the character trigrams of `#word#`
//!      (`#wo`, `wor`, `ord`, `rd#`, weight 0.5), so inflections and typos still overlap.
//! 4. **Hash** each feature as FNV-1a 64 over a one-byte feature-kind tag followed by the UTF-8
//!    of the n-gram, then MurmurHash3's `fmix64` finaliser (FNV-1a's low bits depend only on the
//!    low bits of the input bytes, and the index is taken modulo `dims`). Index = `h % dims`,
//!    sign = top bit of `h` (signed hashing keeps collisions unbiased). The hash is implemented
//!    here rather than taken from `std`, whose `DefaultHasher` may change between releases.
//! 5. **Weight**: `weight × (1 + ln tf)` for a feature occurring `tf` times (sublinear, so a
//!    repeated term does not drown the rest), accumulated in `f64` in hash order.
//! 6. **L2-normalise**. Text with no features (empty, only punctuation) gives the all-zeros
//!    vector, which the vector index treats as "matches nothing".
//!
//! Only correctly rounded IEEE operations are used (`ln` is computed here, not by the platform's
//! libm), so vectors are bit-identical across runs and platforms.

use super::EmbedderInfo;

/// Vector length used by [`HashingEmbedder::default`].
pub const DEFAULT_DIMS: usize = 384;
/// Embedder family reported in [`EmbedderInfo::kind`].
pub const KIND: &str = "hashing";
/// Algorithm version reported in [`EmbedderInfo::model`]; bump it when the vectors change.
pub const MODEL: &str = "char-ngram-fnv1a-v1";

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// Feature kinds. The tag is hashed first so that, e.g., the CJK unigram `年` and a word never
/// share a feature, and so the kind's weight can be recovered from the tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    CjkUnigram,
    CjkBigram,
    CjkTrigram,
    Word,
    WordTrigram,
}

impl Kind {
    fn tag(self) -> u8 {
        match self {
            Kind::CjkUnigram => b'1',
            Kind::CjkBigram => b'2',
            Kind::CjkTrigram => b'3',
            Kind::Word => b'w',
            Kind::WordTrigram => b't',
        }
    }

    fn weight(self) -> f64 {
        match self {
            Kind::CjkUnigram | Kind::CjkBigram | Kind::Word => 1.0,
            Kind::CjkTrigram | Kind::WordTrigram => 0.5,
        }
    }
}

/// Offline, deterministic text embedder based on hashed character n-grams.
///
/// Lexical, not semantic: see the module docs of `embed::hashing` and `embed`.
///
/// # Examples
///
/// ```
/// use ragtrail::HashingEmbedder;
///
/// let embedder = HashingEmbedder::default();
/// let a = embedder.embed("高铁票报销凭证");
/// let b = embedder.embed("铁路电子客票报销凭证");
/// let c = embedder.embed("年假天数");
/// let cos = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>();
/// assert_eq!(a.len(), 384);
/// assert!(cos(&a, &b) > cos(&a, &c));
/// // Nothing to hash: the all-zeros vector.
/// assert!(embedder.embed("，。!").iter().all(|&x| x == 0.0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HashingEmbedder {
    dims: usize,
}

impl Default for HashingEmbedder {
    fn default() -> Self {
        Self::new(DEFAULT_DIMS)
    }
}

impl HashingEmbedder {
    /// An embedder producing `dims`-long vectors. `dims == 0` is accepted and yields empty
    /// vectors (useless, but not a reason to fail).
    pub fn new(dims: usize) -> Self {
        Self { dims }
    }

    /// Length of every vector this embedder returns.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Identity of the vectors, to store beside them. `dims` saturates at `u32::MAX`.
    pub fn info(&self) -> EmbedderInfo {
        EmbedderInfo {
            kind: KIND.to_owned(),
            model: MODEL.to_owned(),
            dims: u32::try_from(self.dims).unwrap_or(u32::MAX),
            marking: super::Marking::None,
        }
    }

    /// Embeds one text: an L2-normalised vector of length [`dims`](Self::dims), or all zeros
    /// when the text has no letters, digits or CJK characters.
    pub fn embed(&self, text: &str) -> Vec<f32> {
        if self.dims == 0 {
            return Vec::new();
        }
        let mut features = extract_features(text);
        // Sorting fixes the accumulation order, so float sums are reproducible.
        features.sort_unstable();

        let dims = self.dims as u64;
        let mut acc = vec![0.0f64; self.dims];
        let mut i = 0;
        while i < features.len() {
            let (hash, kind) = features[i];
            let mut j = i + 1;
            while j < features.len() && features[j] == (hash, kind) {
                j += 1;
            }
            let tf = j - i;
            let value = kind.weight() * (1.0 + ln_count(tf));
            // `hash % dims < dims`, which came from a usize.
            let index = (hash % dims) as usize;
            if hash >> 63 == 1 {
                acc[index] -= value;
            } else {
                acc[index] += value;
            }
            i = j;
        }

        let norm = acc.iter().map(|x| x * x).sum::<f64>().sqrt();
        if norm == 0.0 || !norm.is_finite() {
            return vec![0.0; self.dims];
        }
        acc.iter().map(|x| (x / norm) as f32).collect()
    }

    /// Embeds several texts; same as calling [`embed`](Self::embed) on each.
    pub fn embed_batch(&self, texts: &[&str]) -> Vec<Vec<f32>> {
        texts.iter().map(|t| self.embed(t)).collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Cjk,
    Word,
    Other,
}

/// Maps full-width ASCII letters and digits to ASCII, so `２０２４` and `2024` match.
fn normalize_char(c: char) -> char {
    match c {
        '\u{FF10}'..='\u{FF19}' | '\u{FF21}'..='\u{FF3A}' | '\u{FF41}'..='\u{FF5A}' => {
            char::from_u32(c as u32 - 0xFEE0).unwrap_or(c)
        }
        _ => c,
    }
}

fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{3040}'..='\u{30FF}'      // Hiragana, Katakana
        | '\u{3400}'..='\u{4DBF}'    // CJK Extension A
        | '\u{4E00}'..='\u{9FFF}'    // CJK Unified Ideographs
        | '\u{AC00}'..='\u{D7AF}'    // Hangul syllables
        | '\u{F900}'..='\u{FAFF}'    // CJK Compatibility Ideographs
        | '\u{20000}'..='\u{3FFFF}'  // CJK Extensions B and later
    )
}

fn classify(c: char) -> Class {
    if is_cjk(c) {
        Class::Cjk
    } else if c.is_alphanumeric() {
        Class::Word
    } else {
        Class::Other
    }
}

/// All `(hash, kind)` features of `text`, one entry per occurrence.
fn extract_features(text: &str) -> Vec<(u64, Kind)> {
    let mut features = Vec::new();
    let mut run: Vec<char> = Vec::new();
    let mut run_class = Class::Other;
    for c in text.chars().map(normalize_char) {
        let class = classify(c);
        if class != run_class {
            flush_run(run_class, &run, &mut features);
            run.clear();
            run_class = class;
        }
        if class == Class::Word {
            run.extend(c.to_lowercase());
        } else if class == Class::Cjk {
            run.push(c);
        }
    }
    flush_run(run_class, &run, &mut features);
    features
}

fn flush_run(class: Class, run: &[char], out: &mut Vec<(u64, Kind)>) {
    match class {
        Class::Other => {}
        Class::Cjk => {
            for (n, kind) in [
                (1, Kind::CjkUnigram),
                (2, Kind::CjkBigram),
                (3, Kind::CjkTrigram),
            ] {
                out.extend(run.windows(n).map(|g| (feature_hash(kind, g), kind)));
            }
        }
        Class::Word => {
            if run.is_empty() {
                return;
            }
            out.push((feature_hash(Kind::Word, run), Kind::Word));
            // '#' is never alphanumeric, so the boundary markers cannot clash with word text.
            let mut padded = Vec::with_capacity(run.len() + 2);
            padded.push('#');
            padded.extend_from_slice(run);
            padded.push('#');
            out.extend(
                padded
                    .windows(3)
                    .map(|g| (feature_hash(Kind::WordTrigram, g), Kind::WordTrigram)),
            );
        }
    }
}

/// FNV-1a 64 state after absorbing `bytes`.
fn fnv1a_update(mut state: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        state ^= u64::from(b);
        state = state.wrapping_mul(FNV_PRIME);
    }
    state
}

/// MurmurHash3 64-bit finaliser: spreads every input bit over every output bit.
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

fn feature_hash(kind: Kind, gram: &[char]) -> u64 {
    let mut state = fnv1a_update(FNV_OFFSET_BASIS, &[kind.tag()]);
    let mut buf = [0u8; 4];
    for &c in gram {
        state = fnv1a_update(state, c.encode_utf8(&mut buf).as_bytes());
    }
    fmix64(state)
}

/// `ln(n)` for a term count, exactly reproducible (see [`ln_f64`]); `ln(1) = 0` fast path.
fn ln_count(n: usize) -> f64 {
    if n <= 1 { 0.0 } else { ln_f64(n as f64) }
}

/// Natural log for finite `x >= 1`, from `+ - * /` only, so the result does not depend on the
/// platform's libm (whose `ln` may differ in the last bit). Accurate to ~1 ulp.
fn ln_f64(x: f64) -> f64 {
    let bits = x.to_bits();
    let mut exponent = ((bits >> 52) & 0x7ff) as i64 - 1023;
    // Mantissa rescaled into [1, 2).
    let mut m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52));
    if m > std::f64::consts::SQRT_2 {
        m /= 2.0;
        exponent += 1;
    }
    // ln(m) = 2·atanh(s), s = (m-1)/(m+1), |s| <= 0.172: 12 odd terms reach f64 precision.
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut term = s;
    let mut sum = 0.0;
    let mut k = 1.0;
    for _ in 0..12 {
        sum += term / k;
        term *= s2;
        k += 2.0;
    }
    2.0 * sum + exponent as f64 * std::f64::consts::LN_2
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    fn norm(v: &[f32]) -> f64 {
        v.iter()
            .map(|&x| f64::from(x) * f64::from(x))
            .sum::<f64>()
            .sqrt()
    }

    #[test]
    fn fnv1a_matches_reference_vectors() {
        assert_eq!(fnv1a_update(FNV_OFFSET_BASIS, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a_update(FNV_OFFSET_BASIS, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(
            fnv1a_update(FNV_OFFSET_BASIS, b"foobar"),
            0x8594_4171_f739_67e8
        );
    }

    #[test]
    fn deterministic_across_calls_and_instances() {
        let text = "差旅费报销：高铁票 and Taxi receipts 2024";
        let a = HashingEmbedder::default().embed(text);
        let b = HashingEmbedder::new(384).embed(text);
        assert_eq!(a, b);
        assert_eq!(a.len(), 384);
    }

    /// Pins the exact output. If this fails, the vectors changed: bump [`MODEL`] and update.
    #[test]
    fn golden_fingerprint() {
        let e = HashingEmbedder::new(64);
        let mut hasher = Sha256::new();
        for text in [
            "高铁票报销凭证",
            "Travel Policy v2: taxis, trains",
            "ＡＢＣ１２３ 年假 年假",
        ] {
            for x in e.embed(text) {
                hasher.update(x.to_le_bytes());
            }
        }
        let digest = hex::encode(hasher.finalize());
        assert_eq!(digest, GOLDEN);
    }
    const GOLDEN: &str = "c2c3d5a0906882e29443a49f5f381b2cd70e429fd599ea29ce17059e9fe218fd";

    #[test]
    fn unit_norm() {
        let e = HashingEmbedder::default();
        for text in [
            "年",
            "a",
            "高铁票报销凭证",
            "The quick brown fox",
            "混合 mixed 文本 42",
        ] {
            let v = e.embed(text);
            assert!((norm(&v) - 1.0).abs() < 1e-6, "{text}: {}", norm(&v));
        }
    }

    #[test]
    fn featureless_text_is_all_zeros() {
        let e = HashingEmbedder::new(32);
        for text in ["", "   ", "，。、！？", "--- ### ..."] {
            let v = e.embed(text);
            assert_eq!(v.len(), 32);
            assert!(v.iter().all(|&x| x == 0.0), "{text:?}");
        }
        assert!(HashingEmbedder::new(0).embed("text").is_empty());
    }

    #[test]
    fn shared_chinese_ngrams_score_higher() {
        let e = HashingEmbedder::default();
        let q = e.embed("高铁票报销凭证");
        let related = e.embed("铁路电子客票报销凭证");
        let unrelated = e.embed("年假天数");
        let (r, u) = (cosine(&q, &related), cosine(&q, &unrelated));
        assert!(r > u + 0.2, "related {r} vs unrelated {u}");
    }

    #[test]
    fn latin_is_case_insensitive_and_fullwidth_folds() {
        let e = HashingEmbedder::default();
        assert_eq!(e.embed("Travel POLICY"), e.embed("travel policy"));
        assert_eq!(e.embed("ＡＢＣ１２３"), e.embed("abc123"));
    }

    #[test]
    fn trigrams_link_word_variants() {
        let e = HashingEmbedder::default();
        let q = e.embed("reimbursement");
        assert!(cosine(&q, &e.embed("reimbursements")) > cosine(&q, &e.embed("vacation")) + 0.3);
    }

    #[test]
    fn batch_equals_single() {
        let e = HashingEmbedder::new(48);
        let texts = ["a b", "高铁", ""];
        let batch = e.embed_batch(&texts);
        assert_eq!(batch.len(), 3);
        for (t, v) in texts.iter().zip(&batch) {
            assert_eq!(&e.embed(t), v);
        }
    }

    #[test]
    fn sublinear_tf() {
        // A repeated word weighs 1 + ln 3 times one occurrence, not 3 times.
        let e = HashingEmbedder::new(4096);
        let once = e.embed("alpha beta");
        let thrice = e.embed("alpha alpha alpha beta");
        let beta = e.embed("beta");
        let (c1, c3) = (cosine(&once, &beta), cosine(&thrice, &beta));
        assert!(c3 < c1 && c3 > c1 / 3.0, "{c1} {c3}");
    }

    #[test]
    fn own_ln_matches_std() {
        for n in [2usize, 3, 7, 10, 100, 1000, 123_457, 1 << 40] {
            let x = n as f64;
            let (ours, std) = (ln_f64(x), x.ln());
            assert!(
                (ours - std).abs() <= 4.0 * f64::EPSILON * std,
                "{n}: {ours} vs {std}"
            );
        }
        assert_eq!(ln_count(1), 0.0);
    }

    #[test]
    fn info_is_camel_case_json() {
        let info = HashingEmbedder::new(128).info();
        assert_eq!(info.kind, "hashing");
        assert_eq!(info.model, "char-ngram-fnv1a-v1");
        assert_eq!(info.dims, 128);
        let json = serde_json::to_string(&info).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"hashing","model":"char-ngram-fnv1a-v1","dims":128}"#
        );
    }
}
