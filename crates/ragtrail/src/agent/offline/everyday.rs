//! Everyday words and the written words documents use for them: people ask "我老婆生孩子" or
//! "my kid", policies and laws say 配偶, 生育, 子女, "child". A question word no chunk contains
//! is searched with its written words that some chunk does contain, so that an everyday word
//! never refuses a question by itself.
//!
//! The table is general language (colloquial against written register), not any knowledge
//! base's vocabulary; a written word is used only when the run's knowledge base mentions it.

/// Everyday word → written words, Chinese then English (English by lowercased word; the
/// analyser's stemming matches the written words' other forms).
const WRITTEN: &[(&str, &[&str])] = &[
    ("老婆", &["配偶", "妻子"]),
    ("媳妇", &["配偶", "妻子"]),
    ("爱人", &["配偶"]),
    ("老公", &["配偶", "丈夫"]),
    ("对象", &["配偶"]),
    ("孩子", &["子女", "婴儿", "生育"]),
    ("小孩", &["子女", "婴儿"]),
    ("娃", &["子女", "婴儿"]),
    ("宝宝", &["婴儿", "子女"]),
    ("儿子", &["子女"]),
    ("女儿", &["子女"]),
    ("生孩子", &["生育", "分娩"]),
    ("生娃", &["生育", "分娩"]),
    ("坐月子", &["产假"]),
    ("怀孕", &["孕期", "妊娠"]),
    ("老板", &["上级", "负责人"]),
    ("领导", &["上级", "负责人"]),
    ("上司", &["上级"]),
    ("薪水", &["工资"]),
    ("月薪", &["工资"]),
    ("工钱", &["工资"]),
    ("辞职", &["离职", "解除劳动合同"]),
    ("跳槽", &["离职"]),
    ("开除", &["解除劳动合同", "辞退"]),
    ("炒鱿鱼", &["解除劳动合同", "辞退"]),
    ("看病", &["就医", "医疗"]),
    ("生病", &["疾病", "病假"]),
    ("退钱", &["退款"]),
    ("钱", &["费用", "金额"]),
    ("打车", &["出租车", "网约车"]),
    ("机票", &["飞机"]),
    ("住酒店", &["住宿"]),
    ("吃饭", &["餐费", "伙食"]),
    ("饭钱", &["餐费", "伙食补贴"]),
    ("电脑", &["笔记本电脑", "计算机"]),
    ("kid", &["child", "children"]),
    ("kids", &["child", "children"]),
    ("son", &["child"]),
    ("daughter", &["child"]),
    ("baby", &["child", "birth"]),
    ("wife", &["spouse", "partner"]),
    ("husband", &["spouse", "partner"]),
    ("boss", &["manager", "supervisor"]),
    ("paycheck", &["salary", "pay"]),
    ("wage", &["salary", "pay"]),
    ("wages", &["salary", "pay"]),
    ("fired", &["dismissal", "termination"]),
    ("quit", &["resignation", "leave the company"]),
    ("cab", &["taxi"]),
    ("money", &["cost", "amount"]),
];

/// The formal words for the everyday `word` that the knowledge base mentions (`mentions` answers under the
/// run's access context), best first; empty when there are none.
pub(super) fn formal_equivalents(word: &str, mentions: &dyn Fn(&str) -> bool) -> Vec<String> {
    let lower = word.to_lowercase();
    WRITTEN
        .iter()
        .filter(|(everyday, _)| *everyday == lower)
        .flat_map(|(_, written)| written.iter())
        .filter(|w| mentions(w))
        .map(|w| w.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everyday_words_map_to_the_written_words_a_knowledge_base_mentions() {
        let mentions = |w: &str| matches!(w, "配偶" | "生育" | "child");
        assert_eq!(formal_equivalents("老婆", &mentions), ["配偶"]);
        assert_eq!(formal_equivalents("孩子", &mentions), ["生育"]);
        assert_eq!(formal_equivalents("Kid", &mentions), ["child"]);
        // Nothing written that the knowledge base mentions, or no everyday word at all.
        assert!(formal_equivalents("老公", &|_: &str| false).is_empty());
        assert!(formal_equivalents("报销", &mentions).is_empty());
    }
}
