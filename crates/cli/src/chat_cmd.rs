//! `ragtrail chat`: an interactive conversation; each turn is traced and remembered.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::ask_cmd;
use super::output::{Lang, quote_lines, terminal_safe};
use crate::global::GlobalArgs;
use crate::open::open_current_engine;
use ragtrail::SessionStore;
use ragtrail::trace::RunStatus;
use ragtrail::{AgentEvent, AgentOutcome};

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Resume this session (its earlier turns inform follow-up questions) [default: a new one].
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Searches allowed per question (1 to 10).
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = super::ask_cmd::max_rounds_arg())]
    pub max_rounds: u32,
    /// Hits per search (1 to 20).
    #[arg(long, short = 'k', default_value_t = 5, value_name = "N", value_parser = super::ask_cmd::top_k_arg())]
    pub top_k: u32,
    /// Who plans the searches [default: llm when a chat endpoint is configured, else offline].
    #[arg(long, value_enum)]
    pub planner: Option<ask_cmd::PlannerChoice>,
    /// Remember what a message says about you ("我是B类员工", "I'm based in Singapore",
    /// "我2023年7月入职"; see `ragtrail memory`). `ask`: after the answer, asks once
    /// `Remember: grade = B? [y/N]` (in the message's language) and reads the reply as the next
    /// input line: y or yes (是, 好) remembers, anything else does not. `always`: remembers
    /// without asking (`--remember` alone), as `ask --remember` does. `never`: neither.
    /// A fact memory already holds with that value is not asked about. [default: ask on a
    /// terminal, never when stdin is not one; a script that answers the question passes
    /// `--remember ask` and writes y or n on the line after the message]
    #[arg(long, value_enum, value_name = "WHEN", num_args = 0..=1, default_missing_value = "always")]
    pub remember: Option<RememberWhen>,
    #[command(flatten)]
    pub llm: ask_cmd::LlmArgs,
}

/// When chat remembers the facts a message states about the asker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RememberWhen {
    Ask,
    Always,
    Never,
}

const HELP: &str = "Ask a question, or:\n  /sources  the sources of the last answer\n  /trace    the last turn's trace and how to replay or audit it\n  /new      start a new session\n  /help     this text\n  /quit     leave (Ctrl-D works too)";

pub fn run(global: &GlobalArgs, args: &ChatArgs) -> anyhow::Result<ExitCode> {
    // Checks the chat configuration before anything else (a wrong URL fails here, not mid-chat).
    drop(ask_cmd::choose_planner(args.planner, &args.llm)?);
    // Said before the first question, so in English (each answer is in its question's language).
    let engine = open_current_engine(global, Lang::En)?;
    let sessions = SessionStore::new(&global.data_dir);
    let mut settings =
        ask_cmd::run_settings(global, args.max_rounds, args.top_k, true, None, true)?;
    // Asking needs someone to answer: never by default when stdin is a pipe or a file.
    let remember = args.remember.unwrap_or(if std::io::stdin().is_terminal() {
        RememberWhen::Ask
    } else {
        RememberWhen::Never
    });
    let mut id = args.session.clone().unwrap_or_else(SessionStore::new_id);
    // Checked before the first question: a session of another access context is refused.
    let resumed = sessions
        .load_for(&id, &settings.access)?
        .conversation
        .turns
        .len();
    let mut out = std::io::stdout();
    writeln!(
        out,
        "ragtrail chat — session {id}{}. /help for commands.",
        if resumed > 0 {
            format!(" (resumed, {resumed} earlier turns)")
        } else {
            String::new()
        }
    )?;
    let mut last: Option<AgentOutcome> = None;
    // The language of the last question: `/trace` labels its lines in it.
    let mut last_lang = Lang::En;
    let mut lines = Lines::new();
    while let Some(line) = lines.next()? {
        let line = line.trim().to_string();
        if line.is_empty() {
            continue;
        }
        match line.as_str() {
            "/quit" | "/exit" => break,
            "/help" => writeln!(out, "{HELP}")?,
            "/new" => {
                id = SessionStore::new_id();
                last = None;
                writeln!(out, "new session {id}")?;
            }
            "/sources" => match last.as_ref().and_then(|o| o.answer.as_ref()) {
                Some(a) if !a.citations.is_empty() => {
                    for (i, c) in a.citations.iter().enumerate() {
                        writeln!(
                            out,
                            "[{}] {}  {}\n    “{}”",
                            i + 1,
                            terminal_safe(&c.title_path),
                            terminal_safe(&c.source_uri),
                            quote_lines(&c.quote, "    ")
                        )?;
                    }
                }
                _ => writeln!(out, "The last turn cited no sources.")?,
            },
            "/trace" => match last.as_ref().and_then(|o| o.trace.as_ref()) {
                Some(t) => {
                    write!(
                        out,
                        "{}{}",
                        super::output::trace_line(&t.path, last_lang),
                        super::output::review_hint(global, &t.path, last_lang)
                    )?;
                }
                None => writeln!(out, "No turn yet.")?,
            },
            cmd if cmd.starts_with('/') => writeln!(out, "Unknown command {cmd}. {HELP}")?,
            question => {
                let mut planner = ask_cmd::choose_planner(args.planner, &args.llm)?;
                let lang = Lang::of(question);
                let mut show = |e: AgentEvent<'_>| {
                    if let AgentEvent::Round(r) = e {
                        println!(
                            "  {} [{}]",
                            lang.pick("searching", "检索"),
                            terminal_safe(&r.keywords.join(", "))
                        );
                    }
                };
                match ragtrail::ask_in_session(
                    &engine,
                    planner.as_mut(),
                    &sessions,
                    &id,
                    question,
                    &settings,
                    &mut show,
                ) {
                    Ok((outcome, turn)) => {
                        let text = match &outcome.answer {
                            // Evidence: its statement; the passages follow as the sources.
                            Some(a) if outcome.status == RunStatus::Evidence => {
                                a.text.lines().next().unwrap_or_default().to_string()
                            }
                            Some(a) => a.text.clone(),
                            None => outcome.message.clone().unwrap_or_default(),
                        };
                        // The turn is named in words: "[2]" would read as the second source.
                        let turn = match lang {
                            Lang::Zh => format!("第 {turn} 问"),
                            Lang::En => format!("turn {turn}"),
                        };
                        writeln!(out, "{turn} › {}", terminal_safe(&text))?;
                        if let Some(a) = &outcome.answer {
                            if a.unsourced {
                                writeln!(
                                    out,
                                    "    {}",
                                    lang.pick(
                                        "(conversational reply: unsourced)",
                                        "（寒暄回复：没有出处）"
                                    )
                                )?;
                            } else {
                                for (i, c) in a.citations.iter().enumerate() {
                                    writeln!(
                                        out,
                                        "    [{}] {}",
                                        i + 1,
                                        terminal_safe(&c.title_path)
                                    )?;
                                    if outcome.status == RunStatus::Evidence {
                                        writeln!(
                                            out,
                                            "        “{}”",
                                            quote_lines(&c.quote, "        ")
                                        )?;
                                    }
                                }
                            }
                        }
                        out.flush()?;
                        if remember != RememberWhen::Never {
                            offer_to_remember(
                                global,
                                &mut settings,
                                question,
                                &outcome,
                                remember,
                                &mut lines,
                                &mut out,
                            )?;
                        }
                        last = Some(outcome);
                        last_lang = lang;
                    }
                    Err(e) => writeln!(out, "error: {e}")?,
                }
            }
        }
        out.flush()?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The facts `question` states about the asker (the fixed patterns', and the model's kept
/// proposals) that memory does not hold with that value, remembered as said in the run, after the asker says yes (`ask`) or at once (`always`).
/// Memory is read again afterwards, so the next turn uses what was remembered.
fn offer_to_remember(
    global: &GlobalArgs,
    settings: &mut ragtrail::RunSettings,
    question: &str,
    outcome: &ragtrail::AgentOutcome,
    when: RememberWhen,
    lines: &mut Lines,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let run_id = outcome.run_id.to_string();
    let new: Vec<(String, String)> = outcome
        .facts_said(question, &settings.today)
        .into_iter()
        .filter(|(key, value)| {
            !(settings.memory.iter()).any(|f| ragtrail::same_key(&f.key, key) && &f.value == value)
        })
        .collect();
    if new.is_empty() {
        return Ok(());
    }
    let lang = Lang::of(question);
    if when == RememberWhen::Ask {
        let listed: Vec<String> = new.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        let prompt = terminal_safe(&match lang {
            Lang::Zh => format!("记住：{}？[y/N] ", listed.join("，")),
            Lang::En => format!("Remember: {}? [y/N] ", listed.join(", ")),
        });
        let reply = lines.confirm(&prompt, out)?;
        if !is_yes(&reply) {
            writeln!(out, "{}", lang.pick("not remembered", "没有记住"))?;
            return Ok(());
        }
    }
    let store = ragtrail::MemoryStore::new(&global.data_dir);
    let asker = global.asker()?;
    for (key, value) in &new {
        let source = ragtrail::FactSource::Said {
            run_id: run_id.clone(),
        };
        match store.set(&asker, key, value, source) {
            Ok((fact, _)) => writeln!(
                out,
                "{}",
                terminal_safe(&match lang {
                    Lang::Zh => format!("已记住：{} = {}", fact.key, fact.value),
                    Lang::En => format!("remembered: {} = {}", fact.key, fact.value),
                })
            )?,
            // The conversation goes on; the fact is not kept, and the asker is told why.
            Err(e) => writeln!(out, "error: {e}")?,
        }
    }
    settings.memory = store
        .list(&asker)
        .context("reading the asker's memory (`ragtrail memory list` shows it)")?;
    Ok(())
}

/// A yes to "[y/N]": y, yes, 是, 好 (any case, surrounding space ignored); anything else is no.
fn is_yes(reply: &str) -> bool {
    matches!(
        reply.trim().to_lowercase().as_str(),
        "y" | "yes" | "是" | "好"
    )
}

/// Input lines: a line editor with history on a terminal, plain lines otherwise (scripts, tests).
enum Lines {
    Editor(Box<rustyline::DefaultEditor>),
    Plain(std::io::StdinLock<'static>),
}

impl Lines {
    fn new() -> Self {
        if std::io::stdin().is_terminal()
            && let Ok(editor) = rustyline::DefaultEditor::new()
        {
            return Lines::Editor(Box::new(editor));
        }
        Lines::Plain(std::io::stdin().lock())
    }

    /// The reply to a yes/no question: read with `prompt` shown, kept out of the history; an
    /// end of input is an empty reply (no).
    fn confirm(&mut self, prompt: &str, out: &mut impl Write) -> anyhow::Result<String> {
        match self {
            Lines::Editor(editor) => match editor.readline(prompt) {
                Ok(line) => Ok(line),
                Err(
                    rustyline::error::ReadlineError::Eof
                    | rustyline::error::ReadlineError::Interrupted,
                ) => Ok(String::new()),
                Err(e) => Err(e.into()),
            },
            Lines::Plain(stdin) => {
                // The prompt and the line read are shown, so a transcript reads as a dialogue.
                write!(out, "{prompt}")?;
                out.flush()?;
                let mut line = String::new();
                stdin.read_line(&mut line)?;
                writeln!(out, "{}", terminal_safe(line.trim()))?;
                Ok(line)
            }
        }
    }

    fn next(&mut self) -> anyhow::Result<Option<String>> {
        match self {
            Lines::Editor(editor) => match editor.readline("> ") {
                Ok(line) => {
                    let _ = editor.add_history_entry(line.as_str());
                    Ok(Some(line))
                }
                Err(
                    rustyline::error::ReadlineError::Eof
                    | rustyline::error::ReadlineError::Interrupted,
                ) => Ok(None),
                Err(e) => Err(e.into()),
            },
            Lines::Plain(stdin) => {
                let mut line = String::new();
                Ok((stdin.read_line(&mut line)? > 0).then_some(line))
            }
        }
    }
}
