//! What `ask` shows a person: every hit a round returned up to the ten a default run can cite,
//! numbered so each source says where it was found, and the words around them in the
//! question's language.

use crate::common::cli::{ragtrail, text};
use crate::common::{LEAVE_EN, TRAVEL, Workspace};

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
    let out = ragtrail(
        ws.dir.path(),
        &[
            "--data-dir",
            data.to_str().expect("utf-8"),
            "--knowledge",
            knowledge.to_str().expect("utf-8"),
            "ask",
            question,
            "--no-trace",
        ],
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
