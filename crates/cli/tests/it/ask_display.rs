//! What `ask` shows a person: the answer or the evidence first, then its sources, then one
//! line per search; with `--rounds`, every hit a round returned up to the ten a default run can
//! cite, numbered so each source says where it was found. Every label in the question's
//! language, the asker's own words (never an analyser's stems), no coverage percentages, no
//! HTML.

use crate::common::cli::{ragtrail_over, text};
use crate::common::{LEAVE_EN, TRAVEL, Workspace, repo_root};

/// (round, #n) of every "round R #N" / "第 R 轮 #N" source line, and the hits each round listed.
fn sources_and_rounds(stdout: &str, round_word: &str) -> (Vec<(u32, usize)>, Vec<usize>) {
    let mut rounds = Vec::new();
    let mut sources = Vec::new();
    let mut in_sources = false;
    for line in stdout.lines() {
        if line.starts_with(round_word) {
            rounds.push(0);
        } else if line.starts_with("    #") && !in_sources {
            if let Some(n) = rounds.last_mut() {
                *n += 1;
            }
        } else if line == "Sources:" || line == "来源：" {
            in_sources = true;
        } else if in_sources && line.starts_with("  [") {
            let tail = line
                .rsplit(round_word.trim_end_matches(' '))
                .next()
                .unwrap_or("");
            let nums: Vec<u32> = tail
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|t| t.parse().ok())
                .collect();
            if let [r, n, ..] = nums[..] {
                sources.push((r, n as usize));
            }
        }
    }
    (sources, rounds)
}

/// Each source's round and number (found by `round_word`) is among the hits its round listed.
fn every_source_is_a_listed_hit(stdout: &str, round_word: &str) {
    let (sources, rounds) = sources_and_rounds(stdout, round_word);
    assert!(!sources.is_empty(), "{stdout}");
    for (round, n) in sources {
        let listed = rounds[round as usize - 1];
        assert!(
            n <= listed,
            "source at round {round} #{n}, listed {listed}: {stdout}"
        );
    }
}

fn ask(ws: &Workspace, question: &str) -> String {
    let data = ws.data();
    let knowledge = ws.knowledge();
    let out = ragtrail_over(
        ws.dir.path(),
        &data,
        &knowledge,
        &["ask", question, "--no-trace", "--rounds"],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    stdout
}

#[test]
fn a_chinese_question_is_shown_in_chinese_and_every_source_is_a_listed_hit() {
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    let stdout = ask(&ws, "高铁票报销需要什么凭证？");
    assert!(stdout.contains("第 1 轮："), "{stdout}");
    assert!(stdout.contains("来源："), "{stdout}");
    assert!(!stdout.contains("Sources:"), "{stdout}");
    every_source_is_a_listed_hit(&stdout, "第 ");
}

#[test]
fn an_english_question_is_shown_in_english_and_every_source_is_a_listed_hit() {
    let ws = Workspace::new();
    ws.write("hr/leave.md", LEAVE_EN);
    ws.write("finance/travel.md", TRAVEL);
    let stdout = ask(&ws, "How many days of annual leave do I get?");
    assert!(stdout.contains("round 1:"), "{stdout}");
    assert!(stdout.contains("Sources:"), "{stdout}");
    assert!(!stdout.contains("来源"), "{stdout}");
    every_source_is_a_listed_hit(&stdout, "round ");
}

/// `ask QUESTION` over the bundled `knowledge/`, traced: (exit status, stdout, stderr).
fn ask_bundled(ws: &Workspace, question: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let data = ws.data();
    let knowledge = repo_root().join("knowledge");
    let mut args = vec!["--trace-dir", "traces", "ask", question];
    args.extend_from_slice(extra);
    let out = ragtrail_over(ws.dir.path(), &data, &knowledge, &args);
    let (stdout, stderr) = text(&out);
    (out.status.code(), stdout, stderr)
}

/// A line as far as it is the CLI's or the engine's own words: without quotes (“…”), keyword
/// lists ([…]), commands (from `ragtrail` on), paths, anchors and chunk ids.
fn own_words(line: &str) -> String {
    let line = match line.find("ragtrail ") {
        Some(i) => &line[..i],
        None => line,
    };
    // A flag (`--rounds`) is a command's word too.
    let line: String = line
        .split("--")
        .enumerate()
        .map(|(i, part)| match i {
            0 => part,
            _ => part.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '-'),
        })
        .collect();
    let mut kept = String::new();
    let mut depth = 0usize;
    for c in line.chars() {
        match c {
            '“' | '[' => depth += 1,
            '”' | ']' => depth = depth.saturating_sub(1),
            _ if depth == 0 => kept.push(c),
            _ => {}
        }
    }
    kept.split_whitespace()
        .filter(|t| !(t.contains('/') || t.contains('#') || t.starts_with("(c_")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The first run of three or more ASCII letters in `s`: an English word in a Chinese reply.
fn latin_word(s: &str) -> Option<String> {
    let mut run = String::new();
    for c in s.chars().chain([' ']) {
        if c.is_ascii_alphabetic() {
            run.push(c);
        } else if run.len() >= 3 {
            return Some(run);
        } else {
            run.clear();
        }
    }
    None
}

/// The rules every reply keeps, whatever its language: no coverage figures, no HTML tags.
fn assert_plain_reply(stdout: &str) {
    for internal in ["(bar ", "key terms", "覆盖", "rarest first"] {
        assert!(!stdout.contains(internal), "{internal}: {stdout}");
    }
    let bytes = stdout.as_bytes();
    for (i, _) in stdout.match_indices('<') {
        let next = bytes.get(i + 1).copied().unwrap_or(b' ');
        assert!(
            !(next.is_ascii_alphabetic() || next == b'/' || next == b'!'),
            "an HTML tag: {stdout}"
        );
    }
}

/// The answer (or evidence) comes first, then its sources, then one line per search.
fn assert_answer_first(stdout: &str, sources: &str, searches: &str) {
    let first = stdout
        .lines()
        .find(|l| !l.trim().is_empty())
        .expect("a line");
    assert!(
        !first.starts_with("round") && !first.starts_with("第 "),
        "{stdout}"
    );
    let at = |needle: &str| {
        stdout
            .find(needle)
            .unwrap_or_else(|| panic!("{needle}: {stdout}"))
    };
    assert!(at(sources) < at(searches), "{stdout}");
    assert!(
        !stdout.contains("    #1 "),
        "hits only with --rounds: {stdout}"
    );
}

/// The keywords of every summary line, each a whole word of `words` (the question, or the
/// documents' text): never a stem such as `invoic`.
fn assert_whole_words(stdout: &str, words: &str) {
    let words = words.to_lowercase();
    let whole: std::collections::HashSet<&str> = words
        .split(|c: char| !(c.is_alphanumeric() || c == '-'))
        .collect();
    for line in stdout.lines().filter(|l| l.starts_with("  round ")) {
        let inside = line
            .split_once('[')
            .and_then(|(_, r)| r.split_once(']'))
            .map(|(k, _)| k)
            .unwrap_or_else(|| panic!("{line}"));
        for keyword in inside.split(", ") {
            for word in keyword.to_lowercase().split_whitespace() {
                assert!(
                    whole.contains(word),
                    "{word:?} is no word of the question or documents: {line}"
                );
            }
        }
    }
}

fn bundled_text() -> String {
    let mut all = String::new();
    for entry in crate::common::files_under(&repo_root().join("knowledge")) {
        if entry.extension().is_some_and(|e| e == "md") {
            all.push_str(&std::fs::read_to_string(&entry).expect("read"));
            all.push('\n');
        }
    }
    all
}

#[test]
fn a_chinese_reply_is_chinese_in_every_line_and_puts_the_answer_first() {
    let ws = Workspace::new();
    let question = "年假没休完可以折算成工资吗？";
    let (code, stdout, stderr) = ask_bundled(&ws, question, &[]);
    assert!(matches!(code, Some(0 | 4)), "{code:?}\n{stdout}\n{stderr}");
    assert_answer_first(&stdout, "来源：", "检索 ");
    assert_plain_reply(&stdout);
    assert!(stdout.contains("轨迹："), "{stdout}");
    assert!(stdout.contains("复核：ragtrail"), "{stdout}");
    for line in stdout.lines() {
        let own = own_words(line);
        assert_eq!(
            latin_word(&own),
            None,
            "an English word in {line:?}\n{stdout}"
        );
    }
    assert!(
        stdout.lines().any(|l| l.starts_with("  第 1 轮：[")),
        "{stdout}"
    );
}

#[test]
fn an_english_reply_is_english_in_every_line_and_shows_the_askers_words() {
    let ws = Workspace::new();
    // Words an analyser stems (`reporting`, `emails`, `chair`): the reply shows them as written.
    let questions = [
        "Can I expense a desk chair for working from home?",
        "Who should I tell when I get suspicious emails?",
    ];
    let mut words = bundled_text();
    for question in questions {
        words.push_str(question);
        words.push('\n');
    }
    for question in questions {
        let (code, stdout, stderr) = ask_bundled(&ws, question, &[]);
        assert!(matches!(code, Some(0 | 4)), "{code:?}\n{stdout}\n{stderr}");
        assert_answer_first(&stdout, "Sources:", "(--rounds shows the hits):");
        assert_plain_reply(&stdout);
        assert_whole_words(&stdout, &words);
        for line in stdout.lines() {
            let own = own_words(line);
            assert!(
                !own.chars().any(ragtrail::internals::is_cjk),
                "a Chinese word in {line:?}\n{stdout}"
            );
        }
        assert!(
            stdout.contains("\ntrace: ") && stdout.contains("\nnext:  ragtrail"),
            "{stdout}"
        );
    }
}

#[test]
fn search_names_the_missing_keywords_as_typed() {
    let ws = Workspace::new();
    let data = ws.data();
    let knowledge = repo_root().join("knowledge");
    let out = ragtrail_over(
        ws.dir.path(),
        &data,
        &knowledge,
        &["search", "hotel", "invoices", "taxpayer", "zeppelins"],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("evidence: "))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains("zeppelins"), "{line}");
    for internal in ["zeppelin,", "zeppelin ", "invoic,", "taxpay,", "%", "bar"] {
        assert!(!format!("{line} ").contains(internal), "{internal}: {line}");
    }
    assert_plain_reply(&stdout);
}

#[test]
fn rounds_are_shown_before_the_answer_only_when_asked_for() {
    let ws = Workspace::new();
    let (code, stdout, _) = ask_bundled(&ws, "年假没休完可以折算成工资吗？", &["--rounds"]);
    assert!(matches!(code, Some(0 | 4)), "{stdout}");
    let round = stdout.find("第 1 轮：").expect("round 1");
    let sources = stdout.find("来源：").expect("sources");
    assert!(round < sources, "{stdout}");
    assert!(stdout.contains("    #1 "), "{stdout}");
    assert!(
        !stdout.contains("--rounds 显示"),
        "no summary as well: {stdout}"
    );
    // Why each round searched what it did is said in the question's language too.
    assert!(stdout.contains("— 问题中的实词，少见的在前"), "{stdout}");
    for line in stdout.lines().filter(|l| l.starts_with("第 ")) {
        assert_eq!(latin_word(&own_words(line)), None, "{line}\n{stdout}");
    }
}

/// The lines an `ask` writes before its answer (the first ingest, a changed folder) are in the
/// question's language too: a Chinese asker is not told in English what happened first.
#[test]
fn what_ask_says_before_answering_is_in_the_questions_language() {
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    let data = ws.data();
    let knowledge = ws.knowledge();
    let ask = |question: &str| {
        let out = ragtrail_over(
            ws.dir.path(),
            &data,
            &knowledge,
            &["ask", question, "--no-trace"],
        );
        let (stdout, stderr) = text(&out);
        // Answered, evidence or refused; never an error.
        assert!(
            matches!(out.status.code(), Some(0 | 1 | 4)),
            "{stdout}\n{stderr}"
        );
        stderr
    };
    let chinese_lines = |stderr: &str, expected: &[&str]| {
        for needle in expected {
            assert!(stderr.contains(needle), "{needle}: {stderr}");
        }
        for line in stderr.lines() {
            // A file format's name is a name, not an English sentence.
            let own = own_words(line).replace("markdown", "");
            assert_eq!(latin_word(&own), None, "{line}\n{stderr}");
        }
    };

    let first = ask("高铁票报销需要什么凭证？");
    chinese_lines(
        &first,
        &["索引还是空的：先导入", "导入：新增 1，", "读取 1 个"],
    );

    ws.write("finance/travel.md", &format!("{TRAVEL}\n补充说明。\n"));
    let after_edit = ask("住宿发票有什么要求？");
    chinese_lines(
        &after_edit,
        &[
            "提示：知识库文件夹",
            "修改 1 个（finance/travel.md）",
            "运行 `ragtrail",
        ],
    );

    // The same notes for an English question stay English.
    let english = ask("What does a train ticket claim need?");
    assert!(
        english.contains("changed since the last ingest: 1 edited (finance/travel.md)"),
        "{english}"
    );
}
