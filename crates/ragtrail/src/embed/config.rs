//! Choosing the embedder from the configuration.

use std::path::PathBuf;
use std::sync::Arc;

#[cfg(feature = "local-embed")]
use super::e5::{self, E5Embedder};
use super::http::{
    DEFAULT_BATCH_SIZE, DEFAULT_CONCURRENCY, DEFAULT_MAX_INPUT_CHARS, HttpEmbedder,
    HttpEmbedderConfig,
};
#[cfg(feature = "local-embed")]
use super::local::{LocalEmbedder, LocalOptions};
use super::marking::Marking;
use super::{EmbedError, Embedder, HashingEmbedder};
use crate::http::RetryPolicy;

/// Which embedder to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EmbedderChoice {
    /// A model folder if one is configured, else an endpoint if one is configured, else the
    /// installed default model ([`EmbedConfig::default_model`]), else hashing.
    #[default]
    Auto,
    /// The offline, lexical hashing embedder.
    Hashing,
    /// A local model (`RAGTRAIL_EMBED_MODEL_DIR`): a sentence-transformers folder, or the
    /// packed 4-bit multilingual-e5-small file `e5-small-q4.bin`.
    Local,
    /// An OpenAI-compatible endpoint (`RAGTRAIL_EMBED_BASE_URL`).
    Http,
}

impl std::str::FromStr for EmbedderChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Ok(Self::Auto),
            "hashing" => Ok(Self::Hashing),
            "local" => Ok(Self::Local),
            "http" | "openai" => Ok(Self::Http),
            other => Err(format!(
                "unknown embedder {other:?}: expected auto, hashing, local or http"
            )),
        }
    }
}

/// The embedding settings of one invocation (`RAGTRAIL_EMBED_*` variables and flags).
#[derive(Clone, Default)]
pub struct EmbedConfig {
    pub choice: EmbedderChoice,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub model: Option<String>,
    pub model_dir: Option<PathBuf>,
    /// The installed default model file (`models::DEFAULT_MODEL`), used by [`EmbedderChoice::Auto`]
    /// when neither a model folder nor an endpoint is configured. The caller fills it in: it
    /// decides whether an existing index or a missing file rules it out.
    pub default_model: Option<PathBuf>,
    /// Expected dimension of the endpoint's vectors (unset: learnt from its first answer).
    pub dims: Option<u32>,
    /// Inputs per request (HTTP) or per forward pass (local); unset: the embedder's default.
    pub batch_size: Option<usize>,
    /// Requests in flight at once (HTTP).
    pub concurrency: Option<usize>,
    /// Longest input sent to an endpoint, in characters (longer ones are cut and counted).
    pub max_input_chars: Option<usize>,
    /// How queries and passages are marked for the endpoint (`RAGTRAIL_EMBED_MARKING`); unset:
    /// not at all.
    pub marking: Option<Marking>,
}

impl std::fmt::Debug for EmbedConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbedConfig")
            .field("choice", &self.choice)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("model", &self.model)
            .field("model_dir", &self.model_dir)
            .field("default_model", &self.default_model)
            .field("dims", &self.dims)
            .field("batch_size", &self.batch_size)
            .field("concurrency", &self.concurrency)
            .field("max_input_chars", &self.max_input_chars)
            .field("marking", &self.marking)
            .finish()
    }
}

fn set(s: &Option<String>) -> Option<&str> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

fn given(p: &Option<PathBuf>) -> Option<&PathBuf> {
    p.as_ref().filter(|d| !d.as_os_str().is_empty())
}

impl EmbedConfig {
    /// Whether nothing chose an embedder: no kind, no model folder, no endpoint. The default
    /// model applies then.
    pub fn is_unconfigured(&self) -> bool {
        self.choice == EmbedderChoice::Auto
            && given(&self.model_dir).is_none()
            && set(&self.base_url).is_none()
    }

    /// The model the local embedder loads: the configured folder or file, else the default.
    #[cfg(feature = "local-embed")]
    fn local_model(&self) -> Option<&PathBuf> {
        given(&self.model_dir).or_else(|| given(&self.default_model))
    }

    /// The embedder [`from_config`] would build, without building it.
    pub fn resolved_choice(&self) -> EmbedderChoice {
        match self.choice {
            EmbedderChoice::Auto => {
                if given(&self.model_dir).is_some() {
                    EmbedderChoice::Local
                } else if set(&self.base_url).is_some() {
                    EmbedderChoice::Http
                } else if given(&self.default_model).is_some() {
                    EmbedderChoice::Local
                } else {
                    EmbedderChoice::Hashing
                }
            }
            chosen => chosen,
        }
    }
}

/// Builds the configured embedder: a model folder if set, else an endpoint if set, else the
/// default model if one is given, else the hashing embedder (unless [`EmbedConfig::choice`] forces one). An endpoint without a declared
/// dimension is asked once, here, for a short text's vector to learn it.
pub fn from_config(config: &EmbedConfig) -> Result<Arc<dyn Embedder>, EmbedError> {
    match config.resolved_choice() {
        EmbedderChoice::Auto | EmbedderChoice::Hashing => Ok(Arc::new(HashingEmbedder::default())),
        #[cfg(feature = "local-embed")]
        EmbedderChoice::Local => {
            let dir = config.local_model().ok_or_else(|| {
                    EmbedError::Config(
                        "the local embedder needs a model folder: set RAGTRAIL_EMBED_MODEL_DIR (or --embed-model-dir)".into(),
                    )
                })?;
            // A file, not a folder: the packed multilingual-e5-small, which writes the e5
            // prefixes itself.
            if dir.is_file() {
                if let Some(m) = config.marking.as_ref().filter(|m| !m.is_none())
                    && *m != e5::marking()
                {
                    return Err(EmbedError::Config(format!(
                        "{} is multilingual-e5-small, which marks queries and passages with the e5 prefixes itself; RAGTRAIL_EMBED_MARKING={m} does not apply: unset it",
                        dir.display()
                    )));
                }
                let mut e5 = E5Embedder::load(dir)?;
                if let Some(b) = config.batch_size {
                    e5 = e5.with_batch_size(b);
                }
                return Ok(Arc::new(e5));
            }
            if config.marking.as_ref().is_some_and(|m| m.input_type(super::marking::Side::Query).is_some()) {
                return Err(EmbedError::Config(
                    "a model folder runs in-process, where there is no request to carry an input_type: set RAGTRAIL_EMBED_MARKING to a prefix marking (e5, bge, prefix:QUERY|PASSAGE) or none, or unset it to use what the folder says".into(),
                ));
            }
            let mut options = LocalOptions {
                marking: config.marking.clone(),
                ..LocalOptions::default()
            };
            if let Some(b) = config.batch_size {
                options.batch_size = b;
            }
            Ok(Arc::new(LocalEmbedder::load(dir, options)?))
        }
        #[cfg(not(feature = "local-embed"))]
        EmbedderChoice::Local => Err(EmbedError::Config(
            "this build of ragtrail has no local embedder (the `local-embed` feature is off): serve the model behind an OpenAI-compatible endpoint (RAGTRAIL_EMBED_BASE_URL) instead".into(),
        )),
        EmbedderChoice::Http => {
            let base_url = set(&config.base_url).ok_or_else(|| {
                EmbedError::Config(
                    "the http embedder needs an endpoint: set RAGTRAIL_EMBED_BASE_URL (or --embed-base-url)".into(),
                )
            })?;
            let model = set(&config.model).ok_or_else(|| {
                EmbedError::Config(
                    "the http embedder needs a model name: set RAGTRAIL_EMBED_MODEL (or --embed-model)".into(),
                )
            })?;
            let http = HttpEmbedderConfig {
                base_url: base_url.to_string(),
                api_key: set(&config.api_key).map(String::from),
                model: model.to_string(),
                dims: config.dims,
                batch_size: config.batch_size.unwrap_or(DEFAULT_BATCH_SIZE),
                concurrency: config.concurrency.unwrap_or(DEFAULT_CONCURRENCY),
                max_input_chars: config.max_input_chars.unwrap_or(DEFAULT_MAX_INPUT_CHARS),
                marking: config.marking.clone().unwrap_or_default(),
                policy: RetryPolicy::default(),
            };
            Ok(Arc::new(HttpEmbedder::connect(http)?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_folder_wins_over_an_endpoint_which_wins_over_hashing() {
        let mut c = EmbedConfig::default();
        assert_eq!(c.resolved_choice(), EmbedderChoice::Hashing);
        c.base_url = Some("http://127.0.0.1:9/v1".into());
        assert_eq!(c.resolved_choice(), EmbedderChoice::Http);
        c.model_dir = Some(PathBuf::from("/models/minilm"));
        assert_eq!(c.resolved_choice(), EmbedderChoice::Local);
        c.choice = EmbedderChoice::Hashing;
        assert_eq!(c.resolved_choice(), EmbedderChoice::Hashing);
        // Blank values count as unset.
        let blank = EmbedConfig {
            base_url: Some("  ".into()),
            model_dir: Some(PathBuf::new()),
            ..EmbedConfig::default()
        };
        assert_eq!(blank.resolved_choice(), EmbedderChoice::Hashing);
    }

    #[test]
    fn the_default_model_is_used_only_when_nothing_is_configured() {
        let unconfigured = EmbedConfig {
            default_model: Some(PathBuf::from("/models/e5-small-q4.bin")),
            ..EmbedConfig::default()
        };
        assert!(unconfigured.is_unconfigured());
        assert_eq!(unconfigured.resolved_choice(), EmbedderChoice::Local);
        // An endpoint, a model folder or a chosen kind wins over it.
        let endpoint = EmbedConfig {
            base_url: Some("http://127.0.0.1:9/v1".into()),
            ..unconfigured.clone()
        };
        assert!(!endpoint.is_unconfigured());
        assert_eq!(endpoint.resolved_choice(), EmbedderChoice::Http);
        let hashing = EmbedConfig {
            choice: EmbedderChoice::Hashing,
            ..unconfigured.clone()
        };
        assert!(!hashing.is_unconfigured());
        assert_eq!(hashing.resolved_choice(), EmbedderChoice::Hashing);
        #[cfg(feature = "local-embed")]
        {
            let folder = EmbedConfig {
                model_dir: Some(PathBuf::from("/models/minilm")),
                ..unconfigured
            };
            assert_eq!(folder.local_model(), Some(&PathBuf::from("/models/minilm")));
        }
    }

    fn error_of(config: EmbedConfig) -> EmbedError {
        match from_config(&config) {
            Ok(e) => panic!("expected an error, built {:?}", e.info()),
            Err(e) => e,
        }
    }

    #[test]
    fn missing_settings_are_named() {
        let e = error_of(EmbedConfig {
            choice: EmbedderChoice::Local,
            ..EmbedConfig::default()
        });
        #[cfg(feature = "local-embed")]
        assert!(e.to_string().contains("RAGTRAIL_EMBED_MODEL_DIR"), "{e}");
        #[cfg(not(feature = "local-embed"))]
        assert!(e.to_string().contains("`local-embed` feature"), "{e}");
        let e = error_of(EmbedConfig {
            choice: EmbedderChoice::Http,
            ..EmbedConfig::default()
        });
        assert!(e.to_string().contains("RAGTRAIL_EMBED_BASE_URL"), "{e}");
        let e = error_of(EmbedConfig {
            base_url: Some("http://127.0.0.1:9/v1".into()),
            ..EmbedConfig::default()
        });
        assert!(e.to_string().contains("RAGTRAIL_EMBED_MODEL"), "{e}");
        #[cfg(feature = "local-embed")]
        {
            let e = error_of(EmbedConfig {
                model_dir: Some(PathBuf::from("/nonexistent/model")),
                ..EmbedConfig::default()
            });
            assert!(e.to_string().contains("/nonexistent/model"), "{e}");
            assert!(e.to_string().contains("e5-small-q4.bin"), "{e}");
        }
        assert_eq!(
            "HTTP".parse::<EmbedderChoice>().expect("parse"),
            EmbedderChoice::Http
        );
        assert!("bert".parse::<EmbedderChoice>().is_err());
        let hashing = from_config(&EmbedConfig::default()).expect("hashing");
        assert_eq!(hashing.info().kind, "hashing");
    }

    #[cfg(feature = "local-embed")]
    #[test]
    fn a_model_file_is_read_as_the_packed_e5_model() {
        use std::io::Write;
        // A file, not a folder: read as e5-small-q4.bin, whose errors name the file.
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        f.write_all(b"not a model").expect("write");
        let e = error_of(EmbedConfig {
            model_dir: Some(f.path().to_path_buf()),
            ..EmbedConfig::default()
        });
        let msg = e.to_string();
        assert!(
            msg.contains("E5S1") && msg.contains(&f.path().display().to_string()),
            "{msg}"
        );
        // It marks queries and passages itself: another marking is refused before loading.
        let e = error_of(EmbedConfig {
            model_dir: Some(f.path().to_path_buf()),
            marking: Some("input-type".parse().expect("marking")),
            ..EmbedConfig::default()
        });
        assert!(e.to_string().contains("RAGTRAIL_EMBED_MARKING"), "{e}");
    }

    #[test]
    fn debug_output_hides_the_key() {
        let c = EmbedConfig {
            api_key: Some("sk-secret".into()),
            ..EmbedConfig::default()
        };
        assert!(!format!("{c:?}").contains("sk-secret"));
    }
}
