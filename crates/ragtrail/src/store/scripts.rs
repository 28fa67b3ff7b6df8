//! The vector leg across writing systems: a multilingual model scores a question against
//! passages in its own language higher on the whole than against most in another (with
//! multilingual-e5-small, a Chinese question's mean cosine is about 0.85 over Chinese chunks and
//! 0.78 over English ones), so ranked by raw cosine a passage in the other language seldom
//! reaches the hits, however well it answers. Within each script the right passage still
//! stands out: this finds the other script's best chunks and puts their similarity on the scale
//! of the script the query is nearest to, by standard deviations above their own script's mean.
//! A knowledge base with too few chunks in a second script gets nothing from here.

use crate::text::is_cjk;

use super::vector_leg::{SimilaritySpread, sampled_spread};
use super::vectors::{VectorError, VectorIndex};

/// The script a chunk is written in, and whether it borrows from the other one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// Mainly CJK: at least one character in five (spaces aside) is one. Chinese prose with
    /// Latin names and codes stays Chinese; an English passage quoting a Chinese title stays
    /// English.
    pub cjk: bool,
    /// It holds letters of the other script too: a CJK passage with a Latin letter, a Latin one
    /// with a CJK character.
    pub borrows: bool,
}

impl Written {
    pub(super) fn of(text: &str) -> Self {
        let (mut cjk, mut latin, mut all) = (0usize, 0usize, 0usize);
        for c in text.chars().filter(|c| !c.is_whitespace()) {
            all += 1;
            cjk += usize::from(is_cjk(c));
            latin += usize::from(c.is_ascii_alphabetic());
        }
        let is_cjk = all > 0 && cjk * 5 >= all;
        Self {
            cjk: is_cjk,
            borrows: if is_cjk { latin > 0 } else { cjk > 0 },
        }
    }
}

/// Rows of a script sampled at most for its mean and spread (an even sample of a large store).
const SAMPLE: usize = 4096;
/// A script with fewer visible chunks than this has no spread to speak of and is left out.
const MIN_ROWS: usize = 16;

/// The `k` best rows (by position, with a cosine on the nearer script's scale) of the script
/// `query` is farther from on the whole, CJK or not, among rows `allow`ed; empty when either
/// script has fewer than [`MIN_ROWS`] of them. `written` holds each row's script.
///
/// A row that borrows letters of the nearer script is not a candidate: its borrowed words lift
/// its similarity above its own script's, whatever it is about (an English gifts policy citing
/// a Chinese regulation by name stood out for a Chinese question about paternity leave).
pub(super) fn other_script_rows(
    vectors: &VectorIndex,
    written: &[Written],
    query: &[f32],
    k: usize,
    allow: impl Fn(usize) -> bool,
) -> Result<Vec<(usize, f32)>, VectorError> {
    if query.len() != vectors.dims() || written.len() != vectors.len() {
        return Ok(Vec::new());
    }
    let spread = |script: bool| -> Result<Option<SimilaritySpread>, VectorError> {
        let rows: Vec<usize> = (0..vectors.len())
            .filter(|&i| written[i].cjk == script && allow(i))
            .collect();
        if rows.len() < MIN_ROWS {
            return Ok(None);
        }
        Ok(sampled_spread(vectors, query, &rows, SAMPLE)?.filter(|s| s.spread > 1e-9))
    };
    let Some(in_cjk) = spread(true)? else {
        return Ok(Vec::new());
    };
    let Some(in_other) = spread(false)? else {
        return Ok(Vec::new());
    };
    // The script the query is nearer to keeps its cosines; the farther one's are re-expressed.
    let (nearer, far, far_script) = if in_cjk.mean >= in_other.mean {
        (in_cjk, in_other, false)
    } else {
        (in_other, in_cjk, true)
    };
    let rows = vectors.search(query, k, |i| {
        written[i].cjk == far_script && !written[i].borrows && allow(i)
    })?;
    Ok(rows
        .into_iter()
        .map(|(row, cosine)| {
            let z = (f64::from(cosine) - far.mean) / far.spread;
            (row, (nearer.mean + z * nearer.spread) as f32)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_cjk_when_one_character_in_five_is() {
        let w = |cjk, borrows| Written { cjk, borrows };
        assert_eq!(
            Written::of("职工本人结婚，可以享受婚假3天。"),
            w(true, false)
        );
        assert_eq!(
            Written::of("在「易报」中填写FIN-07《费用超标说明单》"),
            w(true, true)
        );
        assert_eq!(
            Written::of("While a tender runs (see 采购审批权限规定), accept no gifts."),
            w(false, true)
        );
        assert_eq!(
            Written::of("Report a lost phone within 4 hours."),
            w(false, false)
        );
        assert_eq!(Written::of("   "), w(false, false));
    }

    /// Two scripts whose rows sit around different similarities to the query: the far script's
    /// best row comes back on the near script's scale, by its standing within its own.
    #[test]
    fn the_far_scripts_best_rows_are_put_on_the_near_scripts_scale() {
        let dims = 2;
        let mut index = VectorIndex::new(dims);
        let mut written = Vec::new();
        // Near script: 20 rows at angles around 20°..39° from the query (cosine 0.94..0.78).
        // Far script: 20 rows at 50°..69° (cosine 0.64..0.36), the first standing out most.
        for (script, start) in [(true, 20.0f32), (false, 50.0)] {
            for i in 0..20 {
                let a = (start + i as f32).to_radians();
                index.push(&[a.cos(), a.sin()]).expect("push");
                written.push(Written {
                    cjk: script,
                    borrows: false,
                });
            }
        }
        let query = [1.0f32, 0.0];
        let rows = other_script_rows(&index, &written, &query, 3, |_| true).expect("search");
        let found: Vec<usize> = rows.iter().map(|(r, _)| *r).collect();
        assert_eq!(
            found,
            [20, 21, 22],
            "the far script's best rows, best first"
        );
        // Row 20 is the far script's best, as row 0 is the near one's: the same standing, so
        // about the same score as row 0's cosine (the two spreads differ a little).
        let near_best = 20.0f32.to_radians().cos();
        assert!((rows[0].1 - near_best).abs() < 0.02, "{rows:?}");
        assert!(rows[0].1 > 50.0f32.to_radians().cos() + 0.2, "{rows:?}");
        // Hidden rows are neither searched nor counted.
        assert!(
            other_script_rows(&index, &written, &query, 3, |i| i < 20)
                .expect("search")
                .is_empty()
        );
    }

    #[test]
    fn one_script_gives_nothing() {
        let mut index = VectorIndex::new(2);
        for i in 0..20 {
            let a = (i as f32).to_radians();
            index.push(&[a.cos(), a.sin()]).expect("push");
        }
        let latin = Written {
            cjk: false,
            borrows: false,
        };
        let rows = other_script_rows(&index, &[latin; 20], &[1.0, 0.0], 3, |_| true);
        assert!(rows.expect("search").is_empty());
    }
}
