//! A seeded pseudo-random generator for synthetic data in tests, examples and benchmarks:
//! the same seed gives the same vectors and texts on every machine, without a `rand`
//! dependency. SplitMix64 (Steele, Lea and Flood): fast and well mixed, not for secrets.
//!
//! ```
//! use ragtrail::internals::SplitMix64;
//!
//! let mut a = SplitMix64(7);
//! let mut b = SplitMix64(7);
//! assert_eq!(a.vector(4), b.vector(4));
//! assert!(a.below(10) < 10);
//! assert!((-1.0..1.0).contains(&a.next_f32()));
//! ```

/// SplitMix64 state; the tuple field is the seed.
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Below `n` (which must not be 0); the modulo bias is negligible for synthetic data.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in [-1, 1), from the top 24 bits.
    pub fn next_f32(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// `dims` values uniform in [-1, 1).
    pub fn vector(&mut self, dims: usize) -> Vec<f32> {
        (0..dims).map(|_| self.next_f32()).collect()
    }
}
