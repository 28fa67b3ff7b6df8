//! Conversations kept in the data directory, so a session survives a restart: each session's
//! memory (the agent's [`Conversation`]: last turns, search cache) as one JSON file, and
//! [`ask`], which runs one turn of a session through the agent and saves it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::access::AccessContext;

pub use crate::agent::conversation::{Conversation, PriorTurn};

/// A conversation, as kept on disk: its id and its memory (the file's keys are `id`, `turns`,
/// `cache`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Session {
    pub id: String,
    /// The access context the session was started under; only that context may resume it
    /// (its earlier turns and cached searches are that tenant's). Absent in sessions written
    /// before it was recorded: those count as the default context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access: Option<AccessContext>,
    #[serde(flatten)]
    pub conversation: Conversation,
}

impl Session {
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            ..Self::default()
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("session id {0:?} is not valid: use letters, digits, '-' and '_' (at most 64)")]
    BadId(String),
    #[error("session file {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("session file {path} is corrupt: {message}")]
    Corrupt { path: String, message: String },
    #[error(
        "session {id} was started under another tenant or other roles, so its earlier turns cannot be continued here; start a new session (leave out --session), or resume it with the --tenant and --role it was started with"
    )]
    OtherAccess { id: String },
}

/// Sessions as JSON files under `<data dir>/sessions/`.
pub struct SessionStore {
    dir: PathBuf,
}

impl SessionStore {
    pub fn new(data_dir: &Path) -> Self {
        Self {
            dir: data_dir.join("sessions"),
        }
    }

    /// A fresh id (UUID v7, so ids sort by creation time).
    pub fn new_id() -> String {
        uuid::Uuid::now_v7().to_string()
    }

    fn path(&self, id: &str) -> Result<PathBuf, SessionError> {
        let ok = !id.is_empty()
            && id.len() <= 64
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !ok {
            return Err(SessionError::BadId(id.to_string()));
        }
        Ok(self.dir.join(format!("{id}.json")))
    }

    /// The session `id`, or a new empty one if it does not exist yet.
    pub fn load_or_new(&self, id: &str) -> Result<Session, SessionError> {
        let path = self.path(id)?;
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| SessionError::Corrupt {
                path: path.display().to_string(),
                message: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Session::new(id)),
            Err(source) => Err(SessionError::Io {
                path: path.display().to_string(),
                source,
            }),
        }
    }

    /// The session `id` for a caller with `access`: a new one if it does not exist yet, the
    /// stored one if it was started under the same access context (roles compared as a set),
    /// and `SessionError::OtherAccess` otherwise — another tenant's earlier turns would
    /// carry its topic words into this caller's searches.
    pub fn load_for(&self, id: &str, access: &AccessContext) -> Result<Session, SessionError> {
        let mut session = self.load_or_new(id)?;
        let started_under = match &session.access {
            Some(a) => Some(AccessContext::new(a.tenant.clone(), a.roles.clone())),
            None if session.conversation.turns.is_empty() => None,
            None => Some(AccessContext::default()),
        };
        let caller = AccessContext::new(access.tenant.clone(), access.roles.clone());
        match started_under {
            Some(a) if a != caller => Err(SessionError::OtherAccess { id: id.to_string() }),
            _ => {
                session.access = Some(caller);
                Ok(session)
            }
        }
    }

    /// Writes the session atomically (temp file + rename).
    pub fn save(&self, session: &Session) -> Result<(), SessionError> {
        let path = self.path(&session.id)?;
        let io = |source| SessionError::Io {
            path: path.display().to_string(),
            source,
        };
        // Sessions hold questions, answers and snippets of role-restricted chunks.
        crate::access::private::own_dir(&self.dir).map_err(io)?;
        let tmp = path.with_extension("json.tmp");
        let bytes = serde_json::to_vec(session).map_err(|e| SessionError::Corrupt {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        crate::access::private::write(&tmp, &bytes).map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::conversation::MAX_TURNS;

    #[test]
    fn sessions_round_trip_and_keep_the_last_turns() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SessionStore::new(dir.path());
        let mut s = store.load_or_new("abc").expect("new");
        assert!(s.conversation.turns.is_empty());
        for i in 0..10 {
            let turn = s.conversation.next_turn();
            s.conversation.push_turn(PriorTurn {
                turn,
                question: format!("q{i}"),
                ..PriorTurn::default()
            });
        }
        store.save(&s).expect("save");
        let back = store.load_or_new("abc").expect("load");
        assert_eq!(back.conversation.turns.len(), MAX_TURNS);
        assert_eq!(back.conversation.turns.last().map(|t| t.turn), Some(10));
        assert!(matches!(
            store.load_or_new("../etc/passwd"),
            Err(SessionError::BadId(_))
        ));
    }
}

/// Why a turn could not be run.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Agent(#[from] crate::agent::AgentError),
}

/// Runs one turn of the conversation `id`: the planner sees the earlier turns, repeated keyword
/// sets are served from the session's cache, the turn's trace records the session id and turn
/// number, and the session is saved with the new turn.
pub fn ask(
    engine: &crate::engine::Engine,
    planner: &mut dyn crate::agent::Planner,
    sessions: &SessionStore,
    id: &str,
    question: &str,
    base: &crate::agent::RunSettings,
    on_event: &mut dyn FnMut(crate::agent::AgentEvent<'_>),
) -> Result<(crate::agent::AgentOutcome, u32), TurnError> {
    let mut session = sessions.load_for(id, &base.access)?;
    let turn = session.conversation.next_turn();
    let shared = std::sync::Arc::new(std::sync::Mutex::new(std::mem::take(
        &mut session.conversation,
    )));
    let mut settings = base.clone();
    settings.session = Some((id.to_string(), turn));
    settings.conversation = Some(shared.clone());
    let outcome = crate::agent::run(engine, planner, question, &settings, on_event)?;
    session.conversation = match shared.lock() {
        Ok(c) => c.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    };
    session.conversation.push_turn(PriorTurn {
        turn,
        question: question.to_string(),
        answer: outcome
            .answer
            .as_ref()
            .map(|a| a.text.clone())
            .or_else(|| outcome.message.clone())
            .unwrap_or_default(),
        cited: outcome
            .answer
            .as_ref()
            .map(|a| a.citations.iter().map(|c| c.chunk_id.clone()).collect())
            .unwrap_or_default(),
        keywords: outcome.rounds.iter().map(|r| r.keywords.clone()).collect(),
        trace: outcome.trace.as_ref().map(|t| t.path.display().to_string()),
    });
    sessions.save(&session)?;
    Ok((outcome, turn))
}
