//! Tuning of the Postgres store: HNSW parameters, iterative scans, pool.

use std::time::Duration;

use super::PgError;

/// pgvector's `hnsw.iterative_scan`: what an index scan does when the filter removed rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IterativeScan {
    /// Stop after `ef_search` candidates: a selective filter may return fewer than `k` rows.
    Off,
    /// Keep scanning until `k` rows pass the filter; rows may come slightly out of order
    /// (the store re-sorts them).
    RelaxedOrder,
    /// Keep scanning, in exact distance order.
    StrictOrder,
}

impl IterativeScan {
    pub fn as_str(self) -> &'static str {
        match self {
            IterativeScan::Off => "off",
            IterativeScan::RelaxedOrder => "relaxed_order",
            IterativeScan::StrictOrder => "strict_order",
        }
    }
}

/// How the vector leg searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VectorSearchMode {
    /// The HNSW index (approximate; the default).
    Hnsw,
    /// Score every visible row (exact; the parity reference, and fine for small corpora).
    Exact,
}

// Chosen by measurement (BENCHMARKS.md, "PostgreSQL + pgvector"): with MiniLM vectors at 100k
// rows, pgvector's defaults (16, 64, 40) reach recall@10 0.94 against exact; these reach
// ≥ 0.97 for a tenant with 95% of the rows and for one with 5%, for twice the build time.
/// HNSW `m` of new indexes (pgvector's default: 16).
pub const DEFAULT_HNSW_M: u32 = 24;
/// HNSW `ef_construction` of new indexes (pgvector's default: 64).
pub const DEFAULT_HNSW_EF_CONSTRUCTION: u32 = 100;
/// `hnsw.ef_search` of every query (pgvector's default: 40); also covers the vector leg's
/// 100 candidates in one pass of the graph.
pub const DEFAULT_HNSW_EF_SEARCH: u32 = 100;
/// `hnsw.ef_search` when the vectors come from the lexical hashing embedder: its neighbours
/// are near-ties, so 100 buys little recall (0.72 → 0.80 at 100k) for ~4 ms more per search,
/// which would put fused `searchDocs` over its 10 ms budget.
pub const HASHING_HNSW_EF_SEARCH: u32 = 40;

#[derive(Debug, Clone)]
pub struct PgSettings {
    /// HNSW `m` (links per node) for indexes created from now on ([`DEFAULT_HNSW_M`]).
    pub hnsw_m: u32,
    /// HNSW `ef_construction` for indexes created from now on
    /// ([`DEFAULT_HNSW_EF_CONSTRUCTION`]).
    pub hnsw_ef_construction: u32,
    /// `hnsw.ef_search` for every query ([`DEFAULT_HNSW_EF_SEARCH`]).
    pub hnsw_ef_search: u32,
    pub iterative_scan: IterativeScan,
    /// `hnsw.max_scan_tuples` (pgvector's default, 20,000, when unset).
    pub hnsw_max_scan_tuples: Option<u32>,
    pub vector_search: VectorSearchMode,
    /// `maintenance_work_mem` while an HNSW index is built (the server's when unset).
    pub maintenance_work_mem: Option<String>,
    pub max_connections: u32,
    pub connect_timeout: Duration,
    /// Apply pending migrations when connecting (otherwise `ragtrail migrate` must).
    pub auto_migrate: bool,
}

impl Default for PgSettings {
    fn default() -> Self {
        Self {
            hnsw_m: DEFAULT_HNSW_M,
            hnsw_ef_construction: DEFAULT_HNSW_EF_CONSTRUCTION,
            hnsw_ef_search: DEFAULT_HNSW_EF_SEARCH,
            iterative_scan: IterativeScan::RelaxedOrder,
            hnsw_max_scan_tuples: None,
            vector_search: VectorSearchMode::Hnsw,
            maintenance_work_mem: None,
            max_connections: 4,
            connect_timeout: Duration::from_secs(10),
            auto_migrate: true,
        }
    }
}

impl PgSettings {
    /// Defaults overridden by `RAGTRAIL_PG_*` environment variables:
    /// `HNSW_M`, `HNSW_EF_CONSTRUCTION`, `HNSW_EF_SEARCH`, `ITERATIVE_SCAN`
    /// (`off` | `relaxed_order` | `strict_order`), `MAX_SCAN_TUPLES`, `VECTOR_SEARCH`
    /// (`hnsw` | `exact`), `MAINTENANCE_WORK_MEM`, `MAX_CONNECTIONS`, `CONNECT_TIMEOUT_SECS`,
    /// `AUTO_MIGRATE` (`1` | `0`).
    pub fn from_env() -> Result<Self, PgError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`PgSettings::from_env`] for a store searched with vectors of `embedder_kind`: unless
    /// `RAGTRAIL_PG_HNSW_EF_SEARCH` is set, the hashing embedder gets
    /// `HASHING_HNSW_EF_SEARCH`.
    pub fn from_env_for(embedder_kind: &str) -> Result<Self, PgError> {
        Self::from_lookup_for(|name| std::env::var(name).ok(), embedder_kind)
    }

    /// [`PgSettings::from_env_for`] over any variable lookup.
    pub fn from_lookup_for(
        get: impl Fn(&str) -> Option<String>,
        embedder_kind: &str,
    ) -> Result<Self, PgError> {
        let explicit = get("RAGTRAIL_PG_HNSW_EF_SEARCH").is_some_and(|v| !v.trim().is_empty());
        let mut s = Self::from_lookup(get)?;
        if !explicit && embedder_kind == crate::embed::hashing::KIND {
            s.hnsw_ef_search = HASHING_HNSW_EF_SEARCH;
        }
        Ok(s)
    }

    /// [`PgSettings::from_env`] over any variable lookup.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, PgError> {
        let mut s = Self::default();
        let var = |suffix: &str| {
            let name = format!("RAGTRAIL_PG_{suffix}");
            get(&name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .map(|v| (name, v))
        };
        let bad = |name: &str, value: &str, message: &str| PgError::Setting {
            name: name.to_string(),
            value: value.to_string(),
            message: message.to_string(),
        };
        let number = |suffix: &str, min: u32, max: u32| -> Result<Option<u32>, PgError> {
            match var(suffix) {
                None => Ok(None),
                Some((name, v)) => match v.parse::<u32>() {
                    Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
                    _ => Err(bad(
                        &name,
                        &v,
                        &format!("expected a whole number from {min} to {max}"),
                    )),
                },
            }
        };
        if let Some(n) = number("HNSW_M", 2, 100)? {
            s.hnsw_m = n;
        }
        if let Some(n) = number("HNSW_EF_CONSTRUCTION", 4, 1000)? {
            s.hnsw_ef_construction = n;
        }
        if s.hnsw_ef_construction < 2 * s.hnsw_m {
            return Err(bad(
                "RAGTRAIL_PG_HNSW_EF_CONSTRUCTION",
                &s.hnsw_ef_construction.to_string(),
                "must be at least twice RAGTRAIL_PG_HNSW_M (pgvector's rule)",
            ));
        }
        if let Some(n) = number("HNSW_EF_SEARCH", 1, 1000)? {
            s.hnsw_ef_search = n;
        }
        s.hnsw_max_scan_tuples = number("MAX_SCAN_TUPLES", 1, i32::MAX as u32)?;
        if let Some(n) = number("MAX_CONNECTIONS", 1, 100)? {
            s.max_connections = n;
        }
        if let Some(n) = number("CONNECT_TIMEOUT_SECS", 1, 3600)? {
            s.connect_timeout = Duration::from_secs(u64::from(n));
        }
        if let Some((name, v)) = var("ITERATIVE_SCAN") {
            s.iterative_scan = match v.as_str() {
                "off" => IterativeScan::Off,
                "relaxed_order" => IterativeScan::RelaxedOrder,
                "strict_order" => IterativeScan::StrictOrder,
                _ => {
                    return Err(bad(
                        &name,
                        &v,
                        "expected off, relaxed_order or strict_order",
                    ));
                }
            };
        }
        if let Some((name, v)) = var("VECTOR_SEARCH") {
            s.vector_search = match v.as_str() {
                "hnsw" => VectorSearchMode::Hnsw,
                "exact" => VectorSearchMode::Exact,
                _ => return Err(bad(&name, &v, "expected hnsw or exact")),
            };
        }
        if let Some((name, v)) = var("MAINTENANCE_WORK_MEM") {
            let ok = v
                .trim_end_matches(|c: char| c.is_ascii_alphabetic())
                .parse::<u64>()
                .is_ok();
            if !ok {
                return Err(bad(&name, &v, "expected a size such as 512MB"));
            }
            s.maintenance_work_mem = Some(v);
        }
        if let Some((name, v)) = var("AUTO_MIGRATE") {
            s.auto_migrate = match v.as_str() {
                "1" | "true" | "yes" => true,
                "0" | "false" | "no" => false,
                _ => return Err(bad(&name, &v, "expected 1 or 0")),
            };
        }
        Ok(s)
    }
}

/// Whether a version string such as `0.8.5` is at least `major.minor`.
pub(super) fn version_at_least(version: &str, major: u32, minor: u32) -> bool {
    let mut parts = version
        .split(|c: char| !c.is_ascii_digit())
        .filter(|p| !p.is_empty())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let got = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    got >= (major, minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(vars: &[(&str, &str)]) -> Result<PgSettings, PgError> {
        PgSettings::from_lookup(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn defaults_are_the_measured_ones() {
        let s = from(&[]).unwrap();
        assert_eq!(
            (s.hnsw_m, s.hnsw_ef_construction, s.hnsw_ef_search),
            (24, 100, 100)
        );
        assert_eq!(s.iterative_scan, IterativeScan::RelaxedOrder);
        assert_eq!(s.vector_search, VectorSearchMode::Hnsw);
    }

    #[test]
    fn environment_overrides_and_rejects_nonsense() {
        let s = from(&[
            ("RAGTRAIL_PG_HNSW_EF_SEARCH", "100"),
            ("RAGTRAIL_PG_ITERATIVE_SCAN", "off"),
            ("RAGTRAIL_PG_VECTOR_SEARCH", "exact"),
        ])
        .unwrap();
        assert_eq!(s.hnsw_ef_search, 100);
        assert_eq!(s.iterative_scan, IterativeScan::Off);
        assert_eq!(s.vector_search, VectorSearchMode::Exact);
        let err = from(&[("RAGTRAIL_PG_HNSW_M", "zero")]).unwrap_err();
        assert!(err.to_string().contains("RAGTRAIL_PG_HNSW_M=zero"), "{err}");
        assert!(from(&[("RAGTRAIL_PG_HNSW_M", "60")]).is_err()); // ef_construction 100 < 120
        assert!(from(&[("RAGTRAIL_PG_ITERATIVE_SCAN", "sometimes")]).is_err());
    }

    #[test]
    fn hashing_vectors_get_a_smaller_ef_search_unless_one_is_set() {
        let get = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let hashing = crate::embed::hashing::KIND;
        let s = PgSettings::from_lookup_for(get(&[]), hashing).unwrap();
        assert_eq!(s.hnsw_ef_search, HASHING_HNSW_EF_SEARCH);
        let s = PgSettings::from_lookup_for(get(&[]), "local").unwrap();
        assert_eq!(s.hnsw_ef_search, DEFAULT_HNSW_EF_SEARCH);
        let s = PgSettings::from_lookup_for(get(&[("RAGTRAIL_PG_HNSW_EF_SEARCH", "100")]), hashing)
            .unwrap();
        assert_eq!(s.hnsw_ef_search, 100);
    }

    #[test]
    fn versions_compare_numerically() {
        assert!(version_at_least("0.8.5", 0, 8));
        assert!(version_at_least("0.10.0", 0, 8));
        assert!(version_at_least("1.0", 0, 8));
        assert!(!version_at_least("0.7.4", 0, 8));
        assert!(!version_at_least("", 0, 8));
    }
}
