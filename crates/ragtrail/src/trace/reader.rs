//! Reading a trace file back into values (for hashing) and typed events (for use).

use std::path::Path;

use serde_json::Value;
use uuid::Uuid;

use super::error::TraceError;
use super::events::{EventBody, RunStarted, TRACE_VERSION, TraceEvent};

/// One line of a trace: its raw parsed value, which verification hashes, and the typed event.
#[derive(Debug, Clone, PartialEq)]
pub struct RawLine {
    /// 1-based, as editors and error messages count.
    pub line_no: usize,
    /// The line as parsed, unknown fields included; this is what verification hashes.
    pub value: Value,
    /// The same line as a typed event.
    pub event: TraceEvent,
}

/// A trace as read: every complete line, and the torn last line if the writer died mid-line.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceFile {
    /// Complete lines in file order.
    pub lines: Vec<RawLine>,
    /// Line number of a final line that has no newline and is not JSON; it is not in `lines`.
    pub torn_tail: Option<usize>,
}

impl TraceFile {
    /// The runId of the first line (verification checks that the others agree).
    pub fn run_id(&self) -> Option<Uuid> {
        self.lines.first().map(|l| l.event.run_id)
    }

    /// `hash` of the last complete line.
    pub fn final_hash(&self) -> Option<&str> {
        self.lines.last().map(|l| l.event.hash.as_str())
    }

    /// The typed events in order.
    pub fn events(&self) -> impl Iterator<Item = &TraceEvent> {
        self.lines.iter().map(|l| &l.event)
    }

    /// Whether the last complete line is `run_finished`.
    pub fn is_finished(&self) -> bool {
        matches!(
            self.lines.last().map(|l| &l.event.body),
            Some(EventBody::RunFinished(_))
        )
    }
}

/// Reads and parses a trace; see [`TraceFile`] for how a torn last line is handled.
///
/// The file is read a line at a time, so memory holds the parsed lines and one raw line, never
/// the whole file twice. Any other unparsable line is [`TraceError::Malformed`]; a line with
/// `v` above 1 is [`TraceError::UnsupportedVersion`]; an empty file is [`TraceError::Empty`].
pub fn read_trace(path: &Path) -> Result<TraceFile, TraceError> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).map_err(|e| TraceError::io(path, e))?;
    let mut reader = std::io::BufReader::new(file);
    let mut lines = Vec::new();
    let mut torn_tail = None;
    let mut raw = Vec::new();
    let mut line_no = 0;
    loop {
        raw.clear();
        let n = reader
            .read_until(b'\n', &mut raw)
            .map_err(|e| TraceError::io(path, e))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let terminated = raw.last() == Some(&b'\n');
        if terminated {
            raw.pop();
        }
        match serde_json::from_slice::<Value>(&raw) {
            Ok(value) => {
                let line = parse_line(line_no, value)?;
                require_canonical(line_no, &raw, &line.value)?;
                lines.push(line);
            }
            // Cut mid-line by a writer that died: the last line, without its newline.
            Err(_) if !terminated => {
                tracing::warn!(path = %path.display(), line = line_no, "torn last line skipped");
                torn_tail = Some(line_no);
            }
            Err(e) => {
                return Err(TraceError::Malformed {
                    line: line_no,
                    message: e.to_string(),
                });
            }
        }
    }
    if line_no == 0 {
        return Err(TraceError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(TraceFile { lines, torn_tail })
}

/// Splits into newline-terminated lines (without the newline) and a non-empty unterminated tail.
pub(crate) fn split_lines(bytes: &[u8]) -> (Vec<&[u8]>, Option<&[u8]>) {
    let mut parts: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    // `split` yields one part more than there are newlines: the text after the last one.
    let tail = parts.pop().filter(|t| !t.is_empty());
    (parts, tail)
}

/// Checks `v` before the typed parse: a newer major version may have changed the envelope.
pub(crate) fn check_version(line: usize, value: &Value) -> Result<(), TraceError> {
    let Some(object) = value.as_object() else {
        return Err(TraceError::Malformed {
            line,
            message: "not a JSON object".into(),
        });
    };
    match object.get("v").and_then(Value::as_u64) {
        Some(v) if v == u64::from(TRACE_VERSION) => Ok(()),
        Some(v) if v > u64::from(TRACE_VERSION) => Err(TraceError::UnsupportedVersion {
            found: v,
            supported: TRACE_VERSION,
        }),
        _ => Err(TraceError::Malformed {
            line,
            message: "missing or invalid `v`".into(),
        }),
    }
}

/// The writer writes every line in canonical form; a line spelled differently (`0e0` for `0.0`,
/// reordered keys, added spaces) was edited, even when it parses to the same values — the hash
/// covers the values, so this check covers the spelling.
fn require_canonical(line_no: usize, raw: &[u8], value: &Value) -> Result<(), TraceError> {
    if super::canonical::canonical_json(value).as_bytes() == raw {
        Ok(())
    } else {
        Err(TraceError::Malformed {
            line: line_no,
            message: "not in canonical form: the line was edited".into(),
        })
    }
}

fn parse_line(line_no: usize, value: Value) -> Result<RawLine, TraceError> {
    check_version(line_no, &value)?;
    let event =
        serde_json::from_value::<TraceEvent>(value.clone()).map_err(|e| TraceError::Malformed {
            line: line_no,
            message: e.to_string(),
        })?;
    Ok(RawLine {
        line_no,
        value,
        event,
    })
}

/// The recorded question and settings of a trace.
pub fn run_started(file: &TraceFile) -> Option<&RunStarted> {
    file.events().find_map(|e| match &e.body {
        EventBody::RunStarted(r) => Some(r),
        _ => None,
    })
}
