//! XLM-RoBERTa's tokenizer (SentencePiece unigram) built from the vocabulary and normalization
//! table inside an `e5-small-q4.bin` file ([`super::e5_file`]).
//!
//! The steps, as the model was trained with them:
//! 1. each character goes through the file's normalization table (NFKC-like: full-width forms
//!    to ASCII, tabs and newlines to spaces, control characters dropped);
//! 2. runs of spaces become one space;
//! 3. a space is put before the text unless it starts with one, and every space becomes the
//!    metaspace `▁` (U+2581);
//! 4. the best segmentation into vocabulary pieces under the unigram scores (Viterbi; the
//!    `tokenizers` crate's `Unigram` model), a character no piece covers becoming `<unk>`.
//!
//! The whole text is segmented at once, not word by word: the vocabulary has no piece with a
//! `▁` after its first character, so the result is the same, and a long text costs one pass.

use tokenizers::Model;
use tokenizers::models::unigram::Unigram;

use super::e5_file::{E5File, Specials};

/// The SentencePiece word-boundary marker.
const METASPACE: char = '\u{2581}';

/// A control character the normalization table drops, so no normalized text contains it.
const UNMATCHABLE: char = '\u{1}';

/// A ready tokenizer.
pub struct XlmrTokenizer {
    unigram: Unigram,
    /// (code point, replacement), sorted by code point.
    normalization: Vec<(char, Vec<char>)>,
    pub specials: Specials,
}

impl std::fmt::Debug for XlmrTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XlmrTokenizer")
            .field("pieces", &self.unigram.get_vocab_size())
            .field("normalization entries", &self.normalization.len())
            .finish()
    }
}

impl XlmrTokenizer {
    /// Builds the tokenizer from the file's vocabulary and normalization table.
    pub fn from_file(file: &E5File) -> Result<Self, String> {
        let unk = file.specials.unk as usize;
        let vocab: Vec<(String, f64)> = file
            .pieces()
            .enumerate()
            .map(|(id, (p, s))| {
                // The text "<unk>" is not the unknown piece (SentencePiece never matches it
                // from text): renamed with a character normalisation always drops, it is only
                // ever what an uncovered character becomes.
                let piece = if id == unk {
                    format!("{UNMATCHABLE}{p}")
                } else {
                    p.to_string()
                };
                (piece, f64::from(s))
            })
            .collect();
        if file
            .normalization()
            .binary_search_by_key(&UNMATCHABLE, |(c, _)| *c)
            .map_or(true, |i| !file.normalization()[i].1.is_empty())
        {
            return Err(format!(
                "the normalization table does not drop {UNMATCHABLE:?}, which the tokenizer relies on"
            ));
        }
        let unigram = Unigram::from(vocab, Some(unk), false)
            .map_err(|e| format!("the vocabulary cannot make a unigram model: {e}"))?;
        Ok(Self {
            unigram,
            normalization: file.normalization().to_vec(),
            specials: file.specials,
        })
    }

    /// Steps 1–3: the text the pieces are matched against.
    pub fn normalize(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len() + 3);
        let mut last_space = false;
        let mut push = |c: char, out: &mut String| {
            // Step 2: a space after a space is dropped (a `▁` in the text itself is not a space).
            if c == ' ' && last_space {
                return;
            }
            last_space = c == ' ';
            if out.is_empty() && c != ' ' {
                out.push(METASPACE);
            }
            out.push(if c == ' ' { METASPACE } else { c });
        };
        for c in text.chars() {
            match self
                .normalization
                .binary_search_by_key(&c, |(from, _)| *from)
            {
                Ok(i) => {
                    for &r in &self.normalization[i].1 {
                        push(r, &mut out);
                    }
                }
                Err(_) => push(c, &mut out),
            }
        }
        if out.is_empty() {
            out.push(METASPACE);
        }
        out
    }

    /// The piece ids of `text`, without `<s>` and `</s>`.
    pub fn content_ids(&self, text: &str) -> Result<Vec<u32>, String> {
        let normalized = self.normalize(text);
        let tokens = self
            .unigram
            .tokenize(&normalized)
            .map_err(|e| format!("tokenizer: {e}"))?;
        let unk = self.specials.unk;
        let mut ids = Vec::with_capacity(tokens.len());
        for t in tokens {
            if t.id == unk {
                // One `<unk>` per uncovered character, as the package's engine (whose vectors
                // these must equal) does; SentencePiece would fuse a run into one.
                ids.extend(std::iter::repeat_n(unk, t.value.chars().count().max(1)));
            } else {
                ids.push(t.id);
            }
        }
        Ok(ids)
    }

    /// The text of piece `id` (for messages and tests).
    pub fn piece(&self, id: u32) -> Option<String> {
        self.unigram.id_to_token(id)
    }
}

#[cfg(test)]
mod tests {
    use super::super::e5_file::tests::{open_bytes, tiny};
    use super::*;

    #[test]
    fn normalization_spaces_and_unknown_characters() {
        let file = open_bytes(&tiny()).expect("tiny file");
        let t = XlmrTokenizer::from_file(&file).expect("tokenizer");
        // U+3000 becomes a space, U+0001 is dropped, runs of spaces collapse, a space leads.
        assert_eq!(t.normalize("a\u{3000}\u{1} \u{3000}a"), "▁a▁a");
        assert_eq!(t.normalize(" a"), "▁a");
        assert_eq!(t.normalize(""), "▁");
        // "▁a" is a piece (id 2); "b" and "c" are not: one <unk> (id 1) each.
        assert_eq!(t.content_ids("a a").expect("ids"), vec![2, 2]);
        assert_eq!(t.content_ids("abc").expect("ids"), vec![2, 1, 1]);
        // The text "</s>" is the unknown piece's text here, and never matches it.
        assert_eq!(t.content_ids("a</s>").expect("ids"), vec![2, 1, 1, 1, 1]);
    }
}
