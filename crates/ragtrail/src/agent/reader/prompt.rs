//! What the reader's model reads, in the question's language: the rules, then the numbered
//! passages and the question.

use crate::text::Lang;

/// The rules: only the passages, the question's language, a few sentences, every sentence
/// citing its passage by number, `NONE` when no passage states the answer.
pub fn system(lang: Lang) -> &'static str {
    match lang {
        Lang::En => {
            "You answer a question using only the numbered passages you are given, which come \
             from a knowledge base.\n\
             Rules:\n\
             - Use only what the passages state. Never add facts, figures or advice of your own.\n\
             - Answer in English, in one to three short sentences, and keep the passages' figures \
             and terms as they are written.\n\
             - End each sentence with the number of the passage it comes from in square brackets, \
             like [2].\n\
             - If no passage states the answer, reply with the single word NONE."
        }
        Lang::Zh => {
            "你只根据给你的编号段落回答问题，这些段落来自知识库。\n\
             规则：\n\
             - 只用段落中写明的内容，不要添加段落以外的事实、数字或建议。\n\
             - 用中文回答，一到三句话，数字和用语照段落原样写。\n\
             - 每句话末尾用方括号写出它依据的段落编号，例如[2]。\n\
             - 如果没有段落写明答案，只回复 NONE。"
        }
    }
}

/// The passages and the question (and the conversation's previous question, which a
/// follow-up may lean on).
pub fn user(lang: Lang, passages: &str, question: &str, earlier: Option<&str>) -> String {
    let (head, asked) = crate::agent::passages::headings(lang);
    let earlier = match (earlier, lang) {
        (Some(q), Lang::Zh) => format!("上一个问题：{q}\n"),
        (Some(q), Lang::En) => format!("Previous question: {q}\n"),
        (None, _) => String::new(),
    };
    format!("{head}\n{passages}\n\n{earlier}{asked}{question}")
}
