//! Formatting for people: tables, summaries, terminal-safe text.

use ragtrail::IngestSummary;
use ragtrail::KnowledgeChanges;
use ragtrail::SearchHit;

/// Replaces control characters (ANSI escapes, carriage returns) so document text cannot drive
/// the terminal.
pub fn terminal_safe(s: &str) -> String {
    ragtrail::review::report::plain(s)
}

/// A quote made terminal-safe, its lines after the first indented by `indent` and one space more,
/// so that a quote of several lines (a list under its lead-in, a table row under its header row)
/// stays aligned inside its opening “.
pub fn quote_lines(quote: &str, indent: &str) -> String {
    terminal_safe(quote).replace('\n', &format!("\n{indent} "))
}

pub use ragtrail::Lang;

/// Exit status for errors (2 is clap's usage error and is not reused).
pub const EXIT_ERROR: u8 = 3;

/// Exit status when the reader of stdout went away (`ragtrail audit … | head`): 128 + SIGPIPE,
/// what a shell reports for a command a closed pipe stopped.
pub const EXIT_CLOSED_PIPE: u8 = 141;

/// Where a cited chunk was first returned in a run: (round, 1-based position in that round).
pub fn first_seen(rounds: &[ragtrail::RoundRecord], chunk_id: &str) -> Option<(u32, usize)> {
    rounds.iter().find_map(|r| {
        r.hits
            .iter()
            .position(|h| h.chunk_id == chunk_id)
            .map(|i| (r.round, i + 1))
    })
}

/// One line saying what an ingest did, in `lang` (the asker's, when an `ask` ingested first).
pub fn ingest_summary_line(s: &IngestSummary, lang: Lang) -> String {
    let (added, changed, removed) = (s.added.len(), s.changed.len(), s.removed.len());
    let (unchanged, chunks, skipped, pruned) =
        (s.unchanged, s.chunks, s.skipped.len(), s.versions_pruned);
    let mut line = match lang {
        Lang::En => format!(
            "ingest: {added} added, {changed} changed, {removed} removed, {unchanged} unchanged; {chunks} chunks in the index"
        ),
        Lang::Zh => format!(
            "导入：新增 {added}，修改 {changed}，删除 {removed}，未变 {unchanged}；索引中共 {chunks} 个片段"
        ),
    };
    if skipped > 0 {
        line.push_str(&match lang {
            Lang::En => format!("; {skipped} files skipped"),
            Lang::Zh => format!("；跳过 {skipped} 个文件"),
        });
    }
    line.push_str(&ingest_formats_part(s, lang));
    if pruned > 0 {
        line.push_str(&match lang {
            Lang::En => format!(
                "; {} pruned (--keep-versions)",
                count(pruned, "past chunk text", "past chunk texts")
            ),
            Lang::Zh => format!("；清理了 {pruned} 个旧版片段文本（--keep-versions）"),
        });
    }
    line
}

/// `; files: markdown 22 read, pdf 2 read 1 skipped, other 1 skipped` (nothing for an empty
/// count).
fn ingest_formats_part(s: &IngestSummary, lang: Lang) -> String {
    if s.formats.is_empty() {
        return String::new();
    }
    // "markdown 22 read" / "markdown 读取 22 个"
    let counted = |n: usize, en: &str, zh: &str| match lang {
        Lang::En => format!(" {n} {en}"),
        Lang::Zh => format!(" {zh} {n} 个"),
    };
    let parts: Vec<String> = s
        .formats
        .iter()
        .map(|(format, count)| {
            let mut part = format.clone();
            if count.read > 0 {
                part.push_str(&counted(count.read, "read", "读取"));
            }
            if count.skipped > 0 {
                part.push_str(&counted(count.skipped, "skipped", "跳过"));
            }
            part
        })
        .collect();
    match lang {
        Lang::En => format!("; files: {}", parts.join(", ")),
        Lang::Zh => format!("；文件：{}", parts.join("，")),
    }
}

/// The ingest summary as JSON (`ingest --json`): what changed, the counts per format and every
/// skipped file with its reason.
pub fn ingest_summary_json(s: &IngestSummary) -> serde_json::Value {
    serde_json::json!({
        "added": s.added,
        "changed": s.changed,
        "removed": s.removed,
        "unchanged": s.unchanged,
        "chunks": s.chunks,
        "generation": s.generation,
        "versionsPruned": s.versions_pruned,
        "formats": s.formats.iter().map(|(f, c)| {
            (f.clone(), serde_json::json!({"read": c.read, "skipped": c.skipped}))
        }).collect::<serde_json::Map<String, serde_json::Value>>(),
        "skipped": s.skipped.iter().map(|k| {
            serde_json::json!({"path": k.path, "reason": k.reason})
        }).collect::<Vec<_>>(),
    })
}

/// What changed in the knowledge folder since the last ingest, in one line: "the knowledge
/// folder knowledge changed since the last ingest: 1 edited, 2 added (a.md, b.md, c.md)".
pub fn knowledge_changes_line(c: &KnowledgeChanges, lang: Lang) -> String {
    let root = c.root.display();
    if c.root_missing {
        return match lang {
            Lang::En => format!("the knowledge folder {root} indexed last is gone"),
            Lang::Zh => format!("上次导入的知识库文件夹 {root} 已不存在"),
        };
    }
    let mut counts = Vec::new();
    for (n, en, zh) in [
        (c.changed.len(), "edited", "修改"),
        (c.added.len(), "added", "新增"),
        (c.removed.len(), "removed", "删除"),
    ] {
        if n > 0 {
            counts.push(match lang {
                Lang::En => format!("{n} {en}"),
                Lang::Zh => format!("{zh} {n} 个"),
            });
        }
    }
    let (names, more) = c.sample(3);
    match lang {
        Lang::En => format!(
            "the knowledge folder {root} changed since the last ingest: {} ({}{})",
            counts.join(", "),
            names.join(", "),
            if more > 0 {
                format!(", {more} more")
            } else {
                String::new()
            }
        ),
        Lang::Zh => format!(
            "知识库文件夹 {root} 自上次导入后有变动：{}（{}{}）",
            counts.join("，"),
            names.join("、"),
            if more > 0 {
                format!(" 等，另有 {more} 个")
            } else {
                String::new()
            }
        ),
    }
}

/// The command that brings the index up to date with the folder it was built from.
pub fn knowledge_refresh_hint(
    c: &KnowledgeChanges,
    data_dir: &std::path::Path,
    lang: Lang,
) -> String {
    if c.root_missing {
        return lang
            .pick(
                "Ingest the folder that holds the documents now: `ragtrail ingest DIR`.",
                "请导入现在存放文档的文件夹：`ragtrail ingest DIR`。",
            )
            .into();
    }
    let data_dir = if data_dir == std::path::Path::new(crate::config::DEFAULT_DATA_DIR) {
        String::new()
    } else {
        format!(" --data-dir {}", data_dir.display())
    };
    let root = c.root.display();
    match lang {
        Lang::En => format!("Run `ragtrail{data_dir} ingest {root}` (or pass --auto-ingest)."),
        Lang::Zh => format!("运行 `ragtrail{data_dir} ingest {root}`（或加 --auto-ingest）。"),
    }
}

/// The global flags that chose the data, knowledge and trace directories and the access
/// context, as they must be repeated for `replay`/`audit` to read the same knowledge base under
/// the same access: ` --data-dir X --trace-dir Y`, each only when it is not the default.
/// (`DATABASE_URL` is not repeated: it holds a password, and comes from the environment.)
pub fn review_flags(global: &crate::global::GlobalArgs) -> String {
    use crate::config::{DEFAULT_DATA_DIR, DEFAULT_KNOWLEDGE_DIR, DEFAULT_TRACE_DIR};
    let mut out = String::new();
    for (flag, value, default) in [
        ("--data-dir", &global.data_dir, DEFAULT_DATA_DIR),
        ("--knowledge", &global.knowledge, DEFAULT_KNOWLEDGE_DIR),
        ("--trace-dir", &global.trace_dir, DEFAULT_TRACE_DIR),
    ] {
        if value.as_path() != std::path::Path::new(default) {
            out.push_str(&format!(
                " {flag} {}",
                shell_word(&value.display().to_string())
            ));
        }
    }
    let access = crate::config::access_context(global.tenant.as_deref(), &global.roles);
    if access.tenant != ragtrail::DEFAULT_TENANT {
        out.push_str(&format!(" --tenant {}", shell_word(&access.tenant)));
    }
    if !access.roles.is_empty() {
        out.push_str(&format!(" --role {}", shell_word(&access.roles.join(","))));
    }
    out
}

/// `s` quoted for a POSIX shell when it holds anything but safe characters.
pub fn shell_word(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_alphanumeric() || "-_./:,=+@%".contains(c));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// "1 round", "2 rounds": a count and its noun, singular for one.
pub fn count(n: usize, singular: &str, plural: &str) -> String {
    format!("{n} {}", if n == 1 { singular } else { plural })
}

/// Where a run's trace was written, labelled in the asker's language.
pub fn trace_line(trace: &std::path::Path, lang: Lang) -> String {
    format!("{}{}\n", lang.pick("trace: ", "轨迹："), trace.display())
}

/// The lines after a traced run: replay and audit commands that read the same data, labelled
/// in the asker's language (the commands are commands).
pub fn review_hint(
    global: &crate::global::GlobalArgs,
    trace: &std::path::Path,
    lang: Lang,
) -> String {
    let flags = review_flags(global);
    let path = shell_word(&trace.display().to_string());
    let (label, indent) = match lang {
        Lang::En => ("next:  ", "       "),
        Lang::Zh => ("复核：", "      "),
    };
    format!("{label}ragtrail{flags} replay {path}\n{indent}ragtrail{flags} audit {path}\n")
}

/// A readable list of hits: rank, score, titlePath, sourceUri, then the snippet.
pub fn hits_table(hits: &[SearchHit]) -> String {
    let mut out = String::new();
    for (i, hit) in hits.iter().enumerate() {
        out.push_str(&format!(
            "{:>2}. [{:.4}] {}\n    {}  ({})\n    {}\n",
            i + 1,
            hit.score,
            terminal_safe(&hit.title_path),
            terminal_safe(&hit.source_uri),
            hit.chunk_id,
            terminal_safe(&hit.snippet)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_neutralised() {
        assert_eq!(terminal_safe("a\u{1b}[31mb\rc"), "a\u{fffd}[31mb\u{fffd}c");
    }

    #[test]
    fn a_quote_of_several_lines_stays_inside_its_opening_mark() {
        assert_eq!(
            quote_lines("应当认定为工伤：\n…(六)在上下班途中\u{1b}", "  "),
            "应当认定为工伤：\n   …(六)在上下班途中\u{fffd}"
        );
        assert_eq!(quote_lines("one line", "      "), "one line");
    }
}
