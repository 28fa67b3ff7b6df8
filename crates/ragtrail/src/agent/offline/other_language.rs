//! A question's words in the other language of a bilingual knowledge base: an English question
//! about paternity leave, where only a Chinese policy speaks of it (陪产假), and the reverse.
//! The glossary (`text::Glossary`) names the other language's words for a word, or for the
//! phrase it makes with a neighbour ("paternity leave": "paternity" alone names nothing); a
//! word is used only when a passage the run may see writes it.

use crate::text::{Glossary, is_cjk};

/// Other-language words searched for one question word at most.
const MAX_WORDS: usize = 2;

/// What the other language calls a question word no passage uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Crossing {
    /// The other language's words some passage writes, best first.
    pub words: Vec<String>,
    /// The neighbour the word made its phrase with, if it took one ("leave" of "paternity
    /// leave"): the other language's word stands for it too.
    pub with: Option<String>,
}

/// The other language's words for `word` that some passage writes (`writes`): for an English
/// word, the Chinese words whose sense is the phrase it makes with the word after it, else with
/// the word before it, else the word alone; for a Chinese word, its English senses of two words
/// or more. `None`
/// when the glossary has none that a passage writes.
pub(super) fn crossing(
    word: &str,
    after: Option<&str>,
    before: Option<&str>,
    glossary: &Glossary,
    writes: &dyn Fn(&str) -> bool,
) -> Option<Crossing> {
    let written = |found: Vec<String>| -> Vec<String> {
        found
            .into_iter()
            .filter(|w| writes(w))
            .take(MAX_WORDS)
            .collect()
    };
    if word.chars().any(is_cjk) {
        // A sense of one word is everyday vocabulary (家里 → "home", 名字 → "name") that
        // passages about anything use; a name of two or more ("marriage leave", "customer
        // service") is the thing itself.
        let senses = glossary
            .english_for(word)
            .into_iter()
            .filter(|s| s.split_whitespace().count() >= 2)
            .collect();
        let words = written(senses);
        return (!words.is_empty()).then_some(Crossing { words, with: None });
    }
    let latin = |w: &&str| !w.chars().any(is_cjk);
    let phrases = [
        after
            .filter(latin)
            .map(|a| (format!("{word} {a}"), Some(a))),
        before
            .filter(latin)
            .map(|b| (format!("{b} {word}"), Some(b))),
        Some((word.to_string(), None)),
    ];
    phrases.into_iter().flatten().find_map(|(phrase, with)| {
        // One character (红 is a "bonus" too) is never an index term of its own.
        let names = glossary
            .chinese_for(&phrase)
            .into_iter()
            .filter(|w| w.chars().count() >= 2)
            .collect();
        let words = written(names);
        (!words.is_empty()).then(|| Crossing {
            words,
            with: with.map(str::to_string),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries written for these tests in CC-CEDICT's line format.
    const SAMPLE: &str = "陪產假 陪产假 [pei2 chan3 jia4] /paternity leave/\n\
        產假 产假 [chan3 jia4] /maternity leave/\n\
        哺乳 哺乳 [bu3 ru3] /breastfeeding/to nurse/\n\
        紅 红 [hong2] /red/bonus/\n\
        婚假 婚假 [hun1 jia4] /marriage leave/\n\
        客服 客服 [ke4 fu2] /customer service/\n\
        家裡 家里 [jia1 li5] /home/\n\
        健身房 健身房 [jian4 shen1 fang2] /gym/gymnasium/\n";

    #[test]
    fn an_english_word_crosses_with_its_neighbour_into_the_words_a_passage_writes() {
        let g = Glossary::from_text(SAMPLE);
        let written = |w: &str| matches!(w, "陪产假" | "产假" | "哺乳" | "customer service");
        assert_eq!(
            crossing("paternity", Some("leave"), Some("of"), &g, &written),
            Some(Crossing {
                words: vec!["陪产假".to_string()],
                with: Some("leave".to_string()),
            })
        );
        assert_eq!(
            crossing("breastfeeding", Some("breaks"), None, &g, &written),
            Some(Crossing {
                words: vec!["哺乳".to_string()],
                with: None,
            })
        );
        // The glossary names it, but no passage writes it: the knowledge base lacks it.
        assert_eq!(
            crossing("gym", Some("membership"), None, &g, &written),
            None
        );
        assert_eq!(crossing("paternity", None, None, &g, &written), None);
        // One character is no index term, whoever writes it.
        let any = |_: &str| true;
        assert_eq!(crossing("bonus", None, None, &g, &any), None);
    }

    #[test]
    fn a_chinese_word_crosses_into_english_senses_a_passage_writes() {
        let g = Glossary::from_text(SAMPLE);
        let written = |w: &str| matches!(w, "customer service" | "home");
        assert_eq!(
            crossing("客服", None, None, &g, &written),
            Some(Crossing {
                words: vec!["customer service".to_string()],
                with: None,
            })
        );
        assert_eq!(crossing("婚假", None, None, &g, &written), None);
        // One everyday word is no name for a thing, whoever writes it.
        assert_eq!(crossing("家里", None, None, &g, &written), None);
    }
}
