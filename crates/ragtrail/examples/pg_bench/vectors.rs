//! A vector cache for the benchmark: a semantic embedder costs minutes per corpus on two
//! cores, so every text is embedded once and later runs read the vectors back.
//!
//! The file is a sequence of records `sha256(embedder id, text)` + `dims` little-endian f32,
//! appended after every embedded batch; a torn last record (an interrupted run) is ignored.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Mutex;

use ragtrail::{EmbedError, Embedder, EmbedderInfo};
use sha2::{Digest, Sha256};

type Key = [u8; 32];

pub struct CachedEmbedder {
    inner: std::sync::Arc<dyn Embedder>,
    info: EmbedderInfo,
    known: Mutex<HashMap<Key, Vec<f32>>>,
    file: Option<Mutex<File>>,
}

impl CachedEmbedder {
    /// Wraps `inner`; with `path`, vectors are read from and appended to that file.
    pub fn new(
        inner: std::sync::Arc<dyn Embedder>,
        path: Option<&Path>,
    ) -> Result<Self, Box<dyn std::error::Error>> {
        let info = inner.info();
        let dims = info.dims as usize;
        let mut known = HashMap::new();
        let file = match path {
            None => None,
            Some(path) => {
                let mut bytes = Vec::new();
                if path.exists() {
                    File::open(path)?.read_to_end(&mut bytes)?;
                }
                let record = 32 + 4 * dims;
                for r in bytes.chunks_exact(record) {
                    let mut key = [0u8; 32];
                    key.copy_from_slice(&r[..32]);
                    let v = r[32..]
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                        .collect();
                    known.insert(key, v);
                }
                Some(Mutex::new(
                    OpenOptions::new().create(true).append(true).open(path)?,
                ))
            }
        };
        Ok(Self {
            inner,
            info,
            known: Mutex::new(known),
            file,
        })
    }

    fn key(&self, text: &str) -> Key {
        let mut h = Sha256::new();
        h.update(
            format!(
                "{}:{}:{}\0",
                self.info.kind, self.info.model, self.info.dims
            )
            .as_bytes(),
        );
        h.update(text.as_bytes());
        h.finalize().into()
    }

    pub fn cached(&self) -> usize {
        self.known.lock().map(|k| k.len()).unwrap_or(0)
    }

    /// Whether `text` still needs the model.
    pub fn missing(&self, text: &str) -> bool {
        let key = self.key(text);
        self.known
            .lock()
            .map(|k| !k.contains_key(&key))
            .unwrap_or(true)
    }

    /// The wrapped embedder (to time a query's embedding without the cache).
    pub fn inner(&self) -> &dyn Embedder {
        self.inner.as_ref()
    }
}

fn poisoned(model: &str) -> EmbedError {
    EmbedError::Failed {
        model: model.to_string(),
        message: "vector cache lock poisoned".to_string(),
    }
}

impl Embedder for CachedEmbedder {
    fn info(&self) -> EmbedderInfo {
        self.info.clone()
    }

    /// Queries are few and marked differently from passages: never cached.
    fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.inner.embed_query(texts)
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let keys: Vec<Key> = texts.iter().map(|t| self.key(t)).collect();
        let missing: Vec<usize> = {
            let known = self.known.lock().map_err(|_| poisoned(&self.info.model))?;
            (0..texts.len())
                .filter(|&i| !known.contains_key(&keys[i]))
                .collect()
        };
        if !missing.is_empty() {
            let batch: Vec<&str> = missing.iter().map(|&i| texts[i]).collect();
            let vectors = self.inner.embed(&batch)?;
            let mut bytes = Vec::new();
            let mut known = self.known.lock().map_err(|_| poisoned(&self.info.model))?;
            for (&i, v) in missing.iter().zip(vectors) {
                bytes.extend_from_slice(&keys[i]);
                for x in &v {
                    bytes.extend_from_slice(&x.to_le_bytes());
                }
                known.insert(keys[i], v);
            }
            if let Some(file) = &self.file {
                let mut f = file.lock().map_err(|_| poisoned(&self.info.model))?;
                f.write_all(&bytes)
                    .and_then(|_| f.flush())
                    .map_err(|e| EmbedError::Failed {
                        model: self.info.model.clone(),
                        message: format!("writing the vector cache: {e}"),
                    })?;
            }
        }
        let known = self.known.lock().map_err(|_| poisoned(&self.info.model))?;
        Ok(keys
            .iter()
            .map(|k| known.get(k).cloned().unwrap_or_default())
            .collect())
    }

    fn preferred_batch(&self) -> usize {
        self.inner.preferred_batch()
    }
}
