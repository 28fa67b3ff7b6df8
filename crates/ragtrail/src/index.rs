//! The BM25 leg: a tantivy index on disk, derived from the chunk store and rebuildable from it.
//!
//! Keywords are always terms: they go through the same analyzer as the documents and become
//! `TermQuery`s, never through a query parser, so `tenant:other OR *` is just three words.
//! Access filters (tenant, roles) and the superseded filter are non-scoring `Must` clauses, so
//! they apply before ranking and before top-k.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use tantivy::collector::TopDocs;
use tantivy::columnar::Column;
use tantivy::query::{
    BooleanQuery, BoostQuery, ConstScoreQuery, Occur, Query, QueryClone, TermQuery,
};
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

use crate::access::AccessContext;
use crate::knowledge::{Chunk, DocStatus};
use crate::text;

mod scoring;

/// Term indexed in `roles` for chunks that everyone in the tenant may read.
const PUBLIC_ROLE: &str = "*";
/// Writer memory budget: small, these machines have 2 cores and other work to do.
const WRITER_HEAP_BYTES: usize = 64 * 1024 * 1024;

/// How much a keyword matching the heading path counts against one matching the body.
/// Measured on the golden set (see BENCHMARKS.md).
pub const DEFAULT_TITLE_BOOST: f32 = 1.5;

/// How much a keyword matching the title of a chunk that is its whole document counts, on top
/// of that title's place at the head of the chunk's text. Such a title (an abstract's paper
/// title, an article's name, a one-passage note) sums up the passage, so it is scored with the
/// text as a single-field index scores it; a heading shared by a document's sections is a label
/// of where the chunk sits, and keeps its own field and [`DEFAULT_TITLE_BOOST`]. Measured on
/// SciFact, cmrc2018 and HotpotQA (BENCHMARKS.md).
pub const WHOLE_DOCUMENT_TITLE_BOOST: f32 = 0.5;

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("BM25 index at {path}: {source}")]
    Tantivy {
        path: String,
        source: tantivy::TantivyError,
    },
    #[error("cannot create or clear the index folder {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "another ingest or reindex is writing the BM25 index at {path} right now; wait for it to finish, then try again (one process at a time may change a knowledge base)"
    )]
    Busy { path: String },
}

#[derive(Clone, Copy)]
struct Fields {
    id64: Field,
    source: Field,
    /// The titlePath of a chunk that is one of several of its document (a heading path).
    title: Field,
    body: Field,
    /// The titlePath of a chunk that is its whole document (also indexed in `body`).
    name: Field,
    tenant: Field,
    roles: Field,
    status: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text_options = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(text::ANALYZER_NAME)
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let fields = Fields {
        id64: b.add_u64_field("id64", INDEXED | FAST),
        source: b.add_text_field("source", STRING),
        title: b.add_text_field("title", text_options.clone()),
        body: b.add_text_field("body", text_options.clone()),
        name: b.add_text_field("name", text_options),
        tenant: b.add_text_field("tenant", STRING),
        roles: b.add_text_field("roles", STRING),
        status: b.add_text_field("status", STRING),
    };
    (b.build(), fields)
}

/// The numeric form of a chunk id (`c_` + 16 lowercase hex digits, as
/// [`crate::knowledge::chunk_id`] makes them), kept as a fast field. Any other string is not a
/// chunk id (`None`), so [`u64_to_chunk_id`] gives back exactly the id it came from.
pub fn chunk_id_to_u64(id: &str) -> Option<u64> {
    let hex = id.strip_prefix("c_")?;
    if hex.len() != 16
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// The chunk id of a numeric id: the inverse of [`chunk_id_to_u64`]. Lets a search leg name
/// its hits without reading each chunk record (a cache miss per hit on a large store).
pub fn u64_to_chunk_id(id64: u64) -> String {
    // Written digit by digit, without the formatting machinery: a ranking names a hundred
    // hits per query.
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut id = String::with_capacity(18);
    id.push_str("c_");
    for shift in (0..16).rev() {
        id.push(char::from(HEX[((id64 >> (shift * 4)) & 0xf) as usize]));
    }
    id
}

/// One BM25 match: the chunk's numeric id and its raw BM25 score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bm25Match {
    pub id64: u64,
    pub score: f32,
}

/// Options of one BM25 query.
#[derive(Debug, Clone)]
pub struct Bm25Query<'a> {
    pub keywords: &'a [String],
    pub access: &'a AccessContext,
    pub include_superseded: bool,
    pub limit: usize,
    pub title_boost: f32,
}

pub struct Bm25Index {
    path: PathBuf,
    index: Index,
    reader: IndexReader,
    fields: Fields,
    /// The retrieval bench's baseline only (see [`Bm25Index::bench_index_wide_statistics`]).
    index_wide_statistics: std::sync::atomic::AtomicBool,
    /// Counts already made per scope, for the searcher they were made on ([`ScopeMemo`]).
    scope_cache: Mutex<ScopeCache>,
}

/// Matches taken beyond a query's limit: ties are ordered by chunk id (`Bm25Index::search`),
/// not by where a segment merge happened to put the documents, so replays see the same order.
const TIE_SLACK: usize = 16;

/// Scopes remembered at most; past it the cache starts afresh (each token or role set is a
/// scope, so a server sees few, but a caller could name many).
const MAX_CACHED_SCOPES: usize = 256;
/// Terms remembered per scope at most; past it counts are made but not kept.
const MAX_CACHED_TERMS: usize = 200_000;

/// A scope as its filter clauses make it: tenant, the sorted role names (public included),
/// and whether superseded chunks are in it.
type ScopeKey = (String, Vec<String>, bool);

/// Counts over one scope's live chunks, made once per searcher generation and shared by every
/// query of that scope: an offline run asks the same terms' counts many times over its turns,
/// and every search needs its scope's BM25 totals. Each value is exactly what counting again
/// would give, since the searcher they were counted on has not changed.
#[derive(Default)]
struct ScopeMemo {
    /// Live chunks in scope (a `Count` of the scope query).
    num_chunks: OnceLock<u64>,
    /// Live chunks in scope and the tokens of their scored fields.
    totals: OnceLock<ScopeTotals>,
    /// Live chunks in scope whose `field` holds the term.
    counts: RwLock<HashMap<(Field, String), u64>>,
    /// The scored fields' BM25 length tables, from `totals`.
    lengths: OnceLock<LengthTables>,
    /// Whether every chunk of the index is in the scope ([`Bm25Index::filters_pass_all`]).
    pass_all: OnceLock<bool>,
    /// Each segment's `id64` column, by segment ordinal (not scope-bound, but held with what
    /// is remembered per searcher generation).
    id_columns: OnceLock<Vec<Column<u64>>>,
}

/// The BM25 length table of each scored field over one scope ([`scoring::length_table`]).
struct LengthTables {
    title: scoring::LengthTable,
    body: scoring::LengthTable,
    name: scoring::LengthTable,
}

impl LengthTables {
    /// The tables of a scope's fields, their average lengths as tantivy takes them (tokens
    /// over chunks, in `f32`).
    fn of(totals: &ScopeTotals) -> Self {
        let docs = totals.num_docs.max(1) as f32;
        let table = |tokens: u64| scoring::length_table(tokens as f32 / docs);
        Self {
            title: table(totals.title_tokens),
            body: table(totals.body_tokens),
            name: table(totals.name_tokens),
        }
    }
}

/// The analysed terms of `keywords`, each once, in the order they first occur: a query's
/// clauses, in the order scored.
fn query_terms(keywords: &[String]) -> Vec<String> {
    // A query has tens of terms at most: a scan finds a repeat sooner than hashing would.
    let mut out: Vec<String> = Vec::new();
    for keyword in keywords {
        for term in text::terms(keyword) {
            if !out.contains(&term.text) {
                out.push(term.text);
            }
        }
    }
    out
}

impl ScopeMemo {
    /// The count of chunks in `scope` whose field holds `term`, counted once.
    fn in_scope(
        &self,
        searcher: &tantivy::Searcher,
        scope: &BooleanQuery,
        term: &Term,
    ) -> tantivy::Result<u64> {
        let key = term.value().as_str().map(|t| (term.field(), t.to_string()));
        if let Some(key) = &key
            && let Some(&n) = self.counts.read().ok().as_ref().and_then(|c| c.get(key))
        {
            return Ok(n);
        }
        let in_scope = BooleanQuery::new(vec![
            (
                Occur::Must,
                Box::new(TermQuery::new(term.clone(), IndexRecordOption::Basic)) as Box<dyn Query>,
            ),
            (Occur::Must, scope.box_clone()),
        ]);
        let n = searcher.search(&in_scope, &tantivy::collector::Count)? as u64;
        if let (Some(key), Ok(mut counts)) = (key, self.counts.write())
            && counts.len() < MAX_CACHED_TERMS
        {
            counts.insert(key, n);
        }
        Ok(n)
    }
}

/// The scopes counted on one searcher generation.
#[derive(Default)]
struct ScopeCache {
    generation: Option<tantivy::SearcherGeneration>,
    scopes: HashMap<ScopeKey, Arc<ScopeMemo>>,
}

impl Bm25Index {
    /// For the retrieval bench only (`--compare-statistics`): score with the whole index's BM25
    /// statistics instead of the caller's scope, to measure what per-scope statistics cost.
    /// Never set in a product path: index-wide statistics leak other tenants' word counts.
    #[doc(hidden)]
    pub fn bench_index_wide_statistics(&self, on: bool) {
        self.index_wide_statistics
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Opens the index at `path`, creating an empty one if there is none (a writer's open:
    /// an index of other fields is removed and started afresh).
    pub fn open_or_create(path: &Path) -> Result<Self, IndexError> {
        let display = path.display().to_string();
        let tantivy_err = |source| IndexError::Tantivy {
            path: display.clone(),
            source,
        };
        // Tantivy writes its files with the default mode: the folder keeps others out.
        crate::access::private::own_dir(path).map_err(|source| IndexError::Io {
            path: display.clone(),
            source,
        })?;
        let (schema, fields) = schema();
        let existing = if path.join("meta.json").exists() {
            let index = Index::open_in_dir(path).map_err(tantivy_err)?;
            if index.schema() == schema {
                Some(index)
            } else {
                // Built by a ragtrail that indexed other fields. The index only mirrors the
                // chunk store (or the database), so it starts afresh, with no generation: the
                // engine then rebuilds it from the store.
                tracing::warn!(
                    path = %path.display(),
                    "the BM25 index was built by another version of ragtrail; rebuilding it from the store"
                );
                drop(index);
                std::fs::remove_dir_all(path)
                    .and_then(|()| crate::access::private::create_dir_all(path))
                    .map_err(|source| IndexError::Io {
                        path: display.clone(),
                        source,
                    })?;
                None
            }
        } else {
            None
        };
        let index = match existing {
            Some(index) => index,
            None => Index::create_in_dir(path, schema).map_err(tantivy_err)?,
        };
        Self::from_index(path, index, fields)
    }

    /// Opens the index at `path` to search it, never writing it: `None` when there is none, or
    /// one of other fields. With it, the payload of the commit its searcher holds (checked
    /// before and after the searcher opened, so an ingest committing meanwhile is noticed and
    /// the open starts again).
    pub fn open_read_only(path: &Path) -> Result<Option<(Self, Option<String>)>, IndexError> {
        if !path.join("meta.json").exists() {
            return Ok(None);
        }
        let tantivy_err = |source| IndexError::Tantivy {
            path: path.display().to_string(),
            source,
        };
        let (schema, fields) = schema();
        for _ in 0..3 {
            let index = Index::open_in_dir(path).map_err(tantivy_err)?;
            if index.schema() != schema {
                return Ok(None);
            }
            let before = index.load_metas().map_err(tantivy_err)?.payload;
            let opened = Self::from_index(path, index, fields)?;
            let after = opened.committed_payload()?;
            if before == after {
                return Ok(Some((opened, after)));
            }
        }
        // Commits keep landing as fast as it opens: let the caller build its own.
        Ok(None)
    }

    /// An empty index held in memory (for a reader whose on-disk index is not at the store's
    /// generation: it is built from the store instead, and nothing on disk is touched).
    pub fn in_memory() -> Result<Self, IndexError> {
        let (schema, fields) = schema();
        Self::from_index(
            Path::new("(in memory)"),
            Index::create_in_ram(schema),
            fields,
        )
    }

    fn from_index(path: &Path, index: Index, fields: Fields) -> Result<Self, IndexError> {
        index
            .tokenizers()
            .register(text::ANALYZER_NAME, text::analyzer());
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|source| IndexError::Tantivy {
                path: path.display().to_string(),
                source,
            })?;
        Ok(Self {
            path: path.to_path_buf(),
            index,
            reader,
            fields,
            index_wide_statistics: Default::default(),
            scope_cache: Default::default(),
        })
    }

    fn err(&self, source: tantivy::TantivyError) -> IndexError {
        IndexError::Tantivy {
            path: self.path.display().to_string(),
            source,
        }
    }

    /// The payload of the last commit: the store generation this index reflects.
    pub fn committed_generation(&self) -> Result<Option<u64>, IndexError> {
        let metas = self.index.load_metas().map_err(|e| self.err(e))?;
        Ok(metas.payload.and_then(|p| p.parse().ok()))
    }

    /// The raw payload of the last commit (what the index says it reflects).
    pub fn committed_payload(&self) -> Result<Option<String>, IndexError> {
        let metas = self.index.load_metas().map_err(|e| self.err(e))?;
        Ok(metas.payload)
    }

    /// Number of chunks in the last committed state.
    pub fn num_chunks(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// Term counts over the chunks a reader with `access` may see, for term rarity outside
    /// BM25 (the planner's keyword order and key-term weights, `searchDocs`' sufficiency): the
    /// same scope as BM25's statistics, so neither says whether a word occurs in another
    /// tenant's documents.
    pub fn scoped_counts(
        &self,
        access: &AccessContext,
        include_superseded: bool,
    ) -> Result<ScopedCounts, IndexError> {
        let searcher = self.reader.searcher();
        let q = Bm25Query {
            keywords: &[],
            access,
            include_superseded,
            limit: 0,
            title_boost: 1.0,
        };
        let (scope, num_chunks) = if self.filters_pass_all(&searcher, &q)? {
            (None, searcher.num_docs())
        } else {
            let scope = self.scope_query(&q);
            let memo = self.scope_memo(&searcher, &q);
            let n = match memo.num_chunks.get() {
                Some(&n) => n,
                None => {
                    let n = searcher
                        .search(&scope, &tantivy::collector::Count)
                        .map_err(|e| self.err(e))? as u64;
                    let _ = memo.num_chunks.set(n);
                    n
                }
            };
            (Some((scope, memo)), n)
        };
        Ok(ScopedCounts {
            searcher,
            fields: self.fields,
            scope,
            num_chunks,
        })
    }

    /// Starts a batch of changes; nothing is visible until [`IndexUpdate::commit`]. The update
    /// holds tantivy's writer lock until it is committed or dropped.
    pub fn update(&self) -> Result<IndexUpdate, IndexError> {
        let writer = self
            .index
            .writer_with_num_threads(1, WRITER_HEAP_BYTES)
            .map_err(|e| match e {
                // Another process (or another writer of this one) holds tantivy's writer lock.
                tantivy::TantivyError::LockFailure(
                    tantivy::directory::error::LockError::LockBusy,
                    _,
                ) => IndexError::Busy {
                    path: self.path.display().to_string(),
                },
                e => self.err(e),
            })?;
        Ok(IndexUpdate {
            path: self.path.clone(),
            fields: self.fields,
            reader: self.reader.clone(),
            writer,
        })
    }

    /// Top BM25 matches for a keyword list under an access context.
    pub fn search(&self, q: &Bm25Query<'_>) -> Result<Vec<Bm25Match>, IndexError> {
        let searcher = self.reader.searcher();
        let terms = query_terms(q.keywords);
        if terms.is_empty() || q.limit == 0 {
            return Ok(Vec::new());
        }
        let index_wide = self
            .index_wide_statistics
            .load(std::sync::atomic::Ordering::Relaxed);
        // BM25's document frequencies and average lengths come from the chunks this query may
        // see, never the whole index: otherwise a score (and the ranking) would tell whether a
        // word occurs in another tenant's documents, and one tenant's corpus would move
        // another's ranking.
        let memo = self.scope_memo(&searcher, q);
        let pass_all = match memo.pass_all.get() {
            Some(&pass_all) => pass_all,
            None => {
                let pass_all = self.filters_pass_all(&searcher, q)?;
                let _ = memo.pass_all.set(pass_all);
                pass_all
            }
        };
        let top = if pass_all && !index_wide {
            // Every chunk is in scope (the common case): our own scorer, the same scores
            // without the boolean query's per-clause costs (`scoring`).
            self.top_in_whole_scope(&searcher, &terms, q, &memo)
        } else {
            self.top_by_query(&searcher, &terms, q, memo.clone(), pass_all, index_wide)
        }
        .map_err(|e| self.err(e))?;
        // Each segment's id column, opened once per searcher generation.
        let fresh;
        let columns: &[Column<u64>] = match memo.id_columns.get() {
            Some(columns) => columns,
            None => {
                fresh = searcher
                    .segment_readers()
                    .iter()
                    .map(|segment| segment.fast_fields().u64("id64"))
                    .collect::<tantivy::Result<Vec<_>>>()
                    .map_err(|e| self.err(e))?;
                let _ = memo.id_columns.set(fresh.clone());
                &fresh
            }
        };
        let mut out = Vec::with_capacity(top.len());
        for (score, addr) in top {
            if let Some(id64) = columns
                .get(addr.segment_ord as usize)
                .and_then(|column| column.first(addr.doc_id))
            {
                out.push(Bm25Match { id64, score });
            }
        }
        out.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id64.cmp(&b.id64)));
        out.truncate(q.limit);
        Ok(out)
    }

    /// The best `q.limit` chunks and [`TIE_SLACK`] more when every chunk is in the query's scope: the clauses
    /// [`Bm25Index::top_by_query`] would build, scored by [`scoring::top`] with the scope's
    /// statistics. A field no chunk in scope has text in (the heading path in a knowledge base
    /// of one-chunk documents, the name in one without) gets no clause: it could add nothing.
    fn top_in_whole_scope(
        &self,
        searcher: &tantivy::Searcher,
        terms: &[String],
        q: &Bm25Query<'_>,
        memo: &ScopeMemo,
    ) -> tantivy::Result<Vec<(f32, tantivy::DocAddress)>> {
        let f = self.fields;
        // The scope's query is needed only to count what is not yet counted.
        let scope = OnceCell::new();
        let scope = || scope.get_or_init(|| self.scope_query(q));
        let totals = match memo.totals.get() {
            Some(&totals) => totals,
            None => {
                let totals = ScopeStats::totals(searcher, f, scope())?;
                let _ = memo.totals.set(totals);
                totals
            }
        };
        let tables = memo.lengths.get_or_init(|| LengthTables::of(&totals));
        let mut clauses = Vec::with_capacity(terms.len() * 3);
        for term in terms {
            if q.title_boost > 0.0 && totals.title_tokens > 0 {
                clauses.push(scoring::Clause {
                    term: Term::from_field_text(f.title, term),
                    boost: q.title_boost,
                    lengths: &tables.title,
                });
            }
            clauses.push(scoring::Clause {
                term: Term::from_field_text(f.body, term),
                boost: 1.0,
                lengths: &tables.body,
            });
            if totals.name_tokens > 0 {
                clauses.push(scoring::Clause {
                    term: Term::from_field_text(f.name, term),
                    boost: WHOLE_DOCUMENT_TITLE_BOOST,
                    lengths: &tables.name,
                });
            }
        }
        scoring::top(
            searcher,
            &clauses,
            totals.num_docs.max(1),
            &|term: &Term| memo.in_scope(searcher, scope(), term),
            q.limit + TIE_SLACK,
        )
    }

    /// The same best chunks by tantivy's boolean query: the keyword clauses (heading path,
    /// text, name per term) under the access filters, scored with the scope's statistics (or,
    /// for the bench's baseline only, the whole index's).
    fn top_by_query(
        &self,
        searcher: &tantivy::Searcher,
        terms: &[String],
        q: &Bm25Query<'_>,
        memo: Arc<ScopeMemo>,
        pass_all: bool,
        index_wide: bool,
    ) -> tantivy::Result<Vec<(f32, tantivy::DocAddress)>> {
        let f = self.fields;
        // Most knowledge bases have no chunk that is a whole document: no clause to look up.
        let has_names = searcher.segment_readers().iter().any(|segment| {
            segment
                .inverted_index(f.name)
                .is_ok_and(|names| names.total_num_tokens() > 0)
        });
        let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for term in terms {
            // A title boost of 0 (or less) means the heading path is not searched at all:
            // no clause that could only ever add 0 (each clause costs a term lookup).
            if q.title_boost > 0.0 {
                let title = TermQuery::new(
                    Term::from_field_text(f.title, term),
                    IndexRecordOption::WithFreqs,
                );
                should.push((
                    Occur::Should,
                    Box::new(BoostQuery::new(Box::new(title), q.title_boost)),
                ));
            }
            let body = TermQuery::new(
                Term::from_field_text(f.body, term),
                IndexRecordOption::WithFreqs,
            );
            should.push((Occur::Should, Box::new(body)));
            if has_names {
                let name = TermQuery::new(
                    Term::from_field_text(f.name, term),
                    IndexRecordOption::WithFreqs,
                );
                should.push((
                    Occur::Should,
                    Box::new(BoostQuery::new(Box::new(name), WHOLE_DOCUMENT_TITLE_BOOST)),
                ));
            }
        }
        // The filters make every query an intersection of the keyword union with three filter
        // postings; they are left out when every chunk passes them anyway (the scores are the
        // same: the filters score 0). The union stays wrapped in a `Must` clause: as a bare
        // should-only query tantivy would score it with block-max WAND, measured slower here on
        // long keyword lists.
        let query: Box<dyn Query> = if pass_all {
            Box::new(BooleanQuery::new(vec![(
                Occur::Must,
                Box::new(BooleanQuery::new(should)) as Box<dyn Query>,
            )]))
        } else {
            self.filtered(should, q)
        };
        let collector = TopDocs::with_limit(q.limit + TIE_SLACK).order_by_score();
        if index_wide {
            searcher.search(&query, &collector)
        } else {
            let stats = ScopeStats::new(searcher, f, self.scope_query(q), memo)?;
            searcher.search_with_statistics_provider(&query, &collector, &stats)
        }
    }

    /// Whether every chunk in the index (deleted ones included, so the answer is never wrong)
    /// belongs to the query's tenant, is readable by everyone in it, and is not superseded
    /// unless superseded chunks are asked for.
    fn filters_pass_all(
        &self,
        searcher: &tantivy::Searcher,
        q: &Bm25Query<'_>,
    ) -> Result<bool, IndexError> {
        let f = self.fields;
        let all: u64 = searcher
            .segment_readers()
            .iter()
            .map(|r| u64::from(r.max_doc()))
            .sum();
        let df = |field: Field, text: &str| {
            searcher
                .doc_freq(&Term::from_field_text(field, text))
                .map_err(|e| self.err(e))
        };
        Ok(df(f.tenant, &q.access.tenant)? == all
            && df(f.roles, PUBLIC_ROLE)? == all
            && (q.include_superseded || df(f.status, DocStatus::Superseded.as_str())? == 0))
    }

    /// The keyword clauses under the access and status filters.
    fn filtered(&self, should: Vec<(Occur, Box<dyn Query>)>, q: &Bm25Query<'_>) -> Box<dyn Query> {
        let mut clauses: Vec<(Occur, Box<dyn Query>)> =
            vec![(Occur::Must, Box::new(BooleanQuery::new(should)))];
        clauses.extend(self.filter_clauses(q));
        Box::new(BooleanQuery::new(clauses))
    }

    /// The counts already made for `q`'s scope on `searcher` (new ones when the index changed).
    fn scope_memo(&self, searcher: &tantivy::Searcher, q: &Bm25Query<'_>) -> Arc<ScopeMemo> {
        let mut roles: Vec<String> = std::iter::once(PUBLIC_ROLE.to_string())
            .chain(q.access.roles.iter().cloned())
            .collect();
        roles.sort_unstable();
        roles.dedup();
        let key = (q.access.tenant.clone(), roles, q.include_superseded);
        let Ok(mut cache) = self.scope_cache.lock() else {
            // A thread panicked while holding it: count afresh, remember nothing.
            return Arc::default();
        };
        if cache.generation.as_ref() != Some(searcher.generation()) {
            cache.scopes.clear();
            cache.generation = Some(searcher.generation().clone());
        }
        if cache.scopes.len() >= MAX_CACHED_SCOPES && !cache.scopes.contains_key(&key) {
            cache.scopes.clear();
        }
        cache.scopes.entry(key).or_default().clone()
    }

    /// The chunks a query may see: its access and status filters alone.
    fn scope_query(&self, q: &Bm25Query<'_>) -> BooleanQuery {
        BooleanQuery::new(self.filter_clauses(q))
    }

    /// Non-scoring clauses: the tenant, one of the roles (or public), and not superseded unless
    /// asked for.
    fn filter_clauses(&self, q: &Bm25Query<'_>) -> Vec<(Occur, Box<dyn Query>)> {
        let f = self.fields;
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![(
            Occur::Must,
            filter(TermQuery::new(
                Term::from_field_text(f.tenant, &q.access.tenant),
                IndexRecordOption::Basic,
            )),
        )];
        let mut role_names: Vec<&str> = std::iter::once(PUBLIC_ROLE)
            .chain(q.access.roles.iter().map(String::as_str))
            .collect();
        role_names.sort_unstable();
        role_names.dedup();
        let roles: Vec<(Occur, Box<dyn Query>)> = role_names
            .into_iter()
            .map(|r| {
                let t: Box<dyn Query> = Box::new(TermQuery::new(
                    Term::from_field_text(f.roles, r),
                    IndexRecordOption::Basic,
                ));
                (Occur::Should, t)
            })
            .collect();
        clauses.push((Occur::Must, filter(BooleanQuery::new(roles))));
        if !q.include_superseded {
            clauses.push((
                Occur::MustNot,
                Box::new(TermQuery::new(
                    Term::from_field_text(f.status, DocStatus::Superseded.as_str()),
                    IndexRecordOption::Basic,
                )),
            ));
        }
        clauses
    }
}

/// Term counts over the chunks one reader may see ([`Bm25Index::scoped_counts`]).
pub struct ScopedCounts {
    searcher: tantivy::Searcher,
    fields: Fields,
    /// `None` when every chunk is in scope (one tenant, nothing restricted or superseded: the
    /// common case, counted from the index's own statistics); else the scope's query and the
    /// counts already made over it.
    scope: Option<(BooleanQuery, Arc<ScopeMemo>)>,
    num_chunks: u64,
}

impl ScopedCounts {
    /// Chunks in scope.
    pub fn num_chunks(&self) -> u64 {
        self.num_chunks
    }

    /// In how many chunks in scope `term` (an analysed term) occurs in the body, or the
    /// heading path when that is more (headings are short and carry the topic).
    pub fn doc_freq(&self, term: &str) -> u64 {
        let count = |field| {
            let term = Term::from_field_text(field, term);
            match &self.scope {
                None => self.searcher.doc_freq(&term).unwrap_or(0),
                Some((scope, memo)) => memo.in_scope(&self.searcher, scope, &term).unwrap_or(0),
            }
        };
        count(self.fields.body).max(count(self.fields.title))
    }
}

/// BM25 statistics over one scope (the chunks a query may see): the number of live chunks, the
/// tokens of their title and body (from the field norms), and per keyword term the live chunks
/// of the scope containing it. Deleted chunks never count, so the figures depend on the scope's
/// content alone, whatever else the index holds or how its segments were merged.
struct ScopeStats<'a> {
    searcher: &'a tantivy::Searcher,
    fields: Fields,
    scope: BooleanQuery,
    memo: Arc<ScopeMemo>,
    totals: ScopeTotals,
}

/// A scope's live chunks and the tokens of their scored fields (from the field norms).
#[derive(Debug, Clone, Copy)]
struct ScopeTotals {
    num_docs: u64,
    title_tokens: u64,
    body_tokens: u64,
    name_tokens: u64,
}

impl<'a> ScopeStats<'a> {
    fn new(
        searcher: &'a tantivy::Searcher,
        fields: Fields,
        scope: BooleanQuery,
        memo: Arc<ScopeMemo>,
    ) -> tantivy::Result<Self> {
        let totals = match memo.totals.get() {
            Some(&totals) => totals,
            None => {
                let totals = Self::totals(searcher, fields, &scope)?;
                let _ = memo.totals.set(totals);
                totals
            }
        };
        Ok(Self {
            searcher,
            fields,
            scope,
            memo,
            totals,
        })
    }

    /// The scope's live chunks, and the tokens of their scored fields.
    fn totals(
        searcher: &tantivy::Searcher,
        fields: Fields,
        scope: &BooleanQuery,
    ) -> tantivy::Result<ScopeTotals> {
        let docs = searcher.search(scope, &tantivy::collector::DocSetCollector)?;
        let mut readers = HashMap::new();
        let mut totals = ScopeTotals {
            num_docs: docs.len() as u64,
            title_tokens: 0,
            body_tokens: 0,
            name_tokens: 0,
        };
        for addr in &docs {
            let (title, body, name) = match readers.entry(addr.segment_ord) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    let segment = searcher.segment_reader(addr.segment_ord);
                    let norms = |field| segment.get_fieldnorms_reader(field);
                    v.insert((
                        norms(fields.title)?,
                        norms(fields.body)?,
                        norms(fields.name)?,
                    ))
                }
            };
            totals.title_tokens += u64::from(title.fieldnorm(addr.doc_id));
            totals.body_tokens += u64::from(body.fieldnorm(addr.doc_id));
            totals.name_tokens += u64::from(name.fieldnorm(addr.doc_id));
        }
        Ok(totals)
    }

    /// Whether BM25 scores `field` (the others are filters).
    fn scored(&self, field: Field) -> bool {
        field == self.fields.title || field == self.fields.body || field == self.fields.name
    }
}

impl tantivy::query::Bm25StatisticsProvider for ScopeStats<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        Ok(if field == self.fields.title {
            self.totals.title_tokens
        } else if field == self.fields.body {
            self.totals.body_tokens
        } else if field == self.fields.name {
            self.totals.name_tokens
        } else {
            self.searcher.total_num_tokens(field)?
        })
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        // Never 0: BM25 divides by it (an empty scope has no hits to score anyway).
        Ok(self.totals.num_docs.max(1))
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        if !self.scored(term.field()) {
            // A filter term (tenant, roles, status): never scored, but BM25 still requires
            // it to occur in no more documents than the scope has.
            return Ok(self.searcher.doc_freq(term)?.min(self.total_num_docs()?));
        }
        self.memo.in_scope(self.searcher, &self.scope, term)
    }
}

fn filter(q: impl Query) -> Box<dyn Query> {
    Box::new(ConstScoreQuery::new(Box::new(q), 0.0))
}

/// A batch of index changes, committed at once (a crash before commit leaves the old index).
/// It owns what it needs, so an engine can hold one while it changes its other parts.
pub struct IndexUpdate {
    path: PathBuf,
    fields: Fields,
    /// The index's reader (shared), reloaded at commit.
    reader: IndexReader,
    writer: IndexWriter,
}

impl IndexUpdate {
    fn err(&self, source: tantivy::TantivyError) -> IndexError {
        IndexError::Tantivy {
            path: self.path.display().to_string(),
            source,
        }
    }

    /// Removes every chunk of a source document.
    pub fn delete_source(&mut self, source: &str) {
        self.writer
            .delete_term(Term::from_field_text(self.fields.source, source));
    }

    pub fn delete_all(&mut self) -> Result<(), IndexError> {
        self.writer
            .delete_all_documents()
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Adds a chunk. The titlePath of a chunk that is its whole document (`whole_document`)
    /// is indexed as that document's name, with the text ([`WHOLE_DOCUMENT_TITLE_BOOST`]);
    /// any other chunk's, as the heading path of a section ([`DEFAULT_TITLE_BOOST`]).
    pub fn add_chunk(&mut self, chunk: &Chunk, whole_document: bool) -> Result<(), IndexError> {
        let f = self.fields;
        let Some(id64) = chunk_id_to_u64(&chunk.id) else {
            return Ok(()); // ids are produced by knowledge::chunk_id; anything else is not ours
        };
        let mut doc = TantivyDocument::default();
        doc.add_u64(f.id64, id64);
        doc.add_text(f.source, &chunk.source);
        if whole_document {
            doc.add_text(f.name, &chunk.title_path);
            doc.add_text(f.body, &chunk.title_path);
        } else {
            doc.add_text(f.title, &chunk.title_path);
        }
        doc.add_text(f.body, &chunk.text);
        doc.add_text(f.tenant, &chunk.tenant);
        if chunk.roles.is_empty() {
            doc.add_text(f.roles, PUBLIC_ROLE);
        }
        for role in &chunk.roles {
            doc.add_text(f.roles, role);
        }
        doc.add_text(f.status, chunk.status.as_str());
        self.writer.add_document(doc).map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Commits the batch, recording the store generation it reflects, and reloads the reader.
    pub fn commit(self, generation: u64) -> Result<(), IndexError> {
        self.commit_with_payload(&generation.to_string())
    }

    /// Commits the batch with a free-form payload (the Postgres backend records the database
    /// it was built from and the data version), and reloads the reader.
    pub fn commit_with_payload(mut self, payload: &str) -> Result<(), IndexError> {
        let path = self.path.display().to_string();
        let err = |source| IndexError::Tantivy {
            path: path.clone(),
            source,
        };
        let mut prepared = self.writer.prepare_commit().map_err(err)?;
        prepared.set_payload(payload);
        prepared.commit().map_err(err)?;
        self.writer.wait_merging_threads().map_err(err)?;
        self.reader.reload().map_err(err)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const WORDS: [&str; 6] = ["hotel", "taxi", "meal", "visa", "train", "receipt"];

    fn chunk(tenant: &str, n: usize, words: &[usize], roles: &[&str]) -> Chunk {
        let text: Vec<&str> = words.iter().map(|&w| WORDS[w % WORDS.len()]).collect();
        let source = format!("{tenant}/{n}.md");
        Chunk {
            id: crate::knowledge::chunk_id(&source, &[], 0),
            source: source.clone(),
            title_path: format!("{tenant} {}", WORDS[n % WORDS.len()]),
            headings: Vec::new(),
            source_uri: source,
            ordinal: 0,
            text: text.join(" "),
            content_hash: String::new(),
            tenant: tenant.to_string(),
            roles: roles.iter().map(|r| r.to_string()).collect(),
            version: None,
            updated: None,
            status: DocStatus::Active,
        }
    }

    /// An index of `chunks`, committed in two batches (so it has more than one segment).
    fn index_of(dir: &Path, chunks: &[Chunk]) -> Bm25Index {
        index_with_whole_documents(dir, chunks, |_| false)
    }

    /// [`index_of`], where `whole` says which chunks are their whole document.
    fn index_with_whole_documents(
        dir: &Path,
        chunks: &[Chunk],
        whole: impl Fn(&Chunk) -> bool,
    ) -> Bm25Index {
        let index = Bm25Index::open_or_create(dir).expect("index");
        let (first, second) = chunks.split_at(chunks.len() / 2);
        for (generation, batch) in [(1, first), (2, second)] {
            let mut update = index.update().expect("update");
            for c in batch {
                update.add_chunk(c, whole(c)).expect("add");
            }
            update.commit(generation).expect("commit");
        }
        index
    }

    fn search(index: &Bm25Index, keywords: &[String], access: &AccessContext) -> Vec<Bm25Match> {
        index
            .search(&Bm25Query {
                keywords,
                access,
                include_superseded: false,
                limit: 50,
                title_boost: DEFAULT_TITLE_BOOST,
            })
            .expect("search")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]

        /// Adding any documents of another tenant (or restricted to a role the caller lacks)
        /// changes neither the scores nor the order of a tenant's hits, for any query.
        #[test]
        fn other_tenants_documents_change_neither_scores_nor_order(
            own in prop::collection::vec(prop::collection::vec(0usize..6, 1..12), 1..10),
            others in prop::collection::vec(
                (prop::collection::vec(0usize..6, 1..12), 0usize..4), 1..30),
            query in prop::collection::vec(0usize..6, 1..4),
        ) {
            let acme = AccessContext::new("acme", Vec::<String>::new());
            let mine: Vec<Chunk> = own
                .iter()
                .enumerate()
                .map(|(i, w)| chunk("acme", i, w, &[]))
                .collect();
            let mut mixed = mine.clone();
            for (i, (words, kind)) in others.iter().enumerate() {
                let c = match kind {
                    0 => chunk("globex", i, words, &[]),
                    1 => chunk("initech", i, words, &[]),
                    // Same tenant, a role the caller does not hold: outside its scope too.
                    2 => chunk("acme", 100 + i, words, &["hr"]),
                    // Same tenant, superseded: hidden from this search.
                    _ => Chunk {
                        status: DocStatus::Superseded,
                        ..chunk("acme", 200 + i, words, &[])
                    },
                };
                // Interleaved, so the caller's chunks land in other segments and positions.
                mixed.insert((i * 7) % (mixed.len() + 1), c);
            }
            let keywords: Vec<String> = query.iter().map(|&w| WORDS[w].to_string()).collect();
            let (a, b) = (tempfile::tempdir().expect("dir"), tempfile::tempdir().expect("dir"));
            // Some chunks are whole documents (their title in the name field), decided by the
            // chunk itself so that it is the same chunk in both indexes.
            let whole = |c: &Chunk| c.text.len() % 2 == 1;
            let alone_index = index_with_whole_documents(a.path(), &mine, whole);
            let alone = search(&alone_index, &keywords, &acme);
            let mixed_index = index_with_whole_documents(b.path(), &mixed, whole);
            let beside = search(&mixed_index, &keywords, &acme);
            prop_assert_eq!(alone, beside);
            // The counts a planner weighs terms by do not move either.
            let (by_alone, by_mixed) = (
                alone_index.scoped_counts(&acme, false).expect("counts"),
                mixed_index.scoped_counts(&acme, false).expect("counts"),
            );
            prop_assert_eq!(by_alone.num_chunks(), by_mixed.num_chunks());
            for word in WORDS {
                prop_assert_eq!(by_alone.doc_freq(word), by_mixed.doc_freq(word), "{}", word);
            }
            // A tenant with no chunks at all: nothing, and no panic on an empty scope.
            let nobody = AccessContext::new("nobody", Vec::<String>::new());
            prop_assert!(search(&mixed_index, &keywords, &nobody).is_empty());
        }
    }

    proptest! {
        /// A numeric id is named as `c_` and its 16 lowercase hex digits, and parses back.
        #[test]
        fn every_numeric_id_is_named_in_sixteen_hex_digits(id64 in any::<u64>()) {
            let id = u64_to_chunk_id(id64);
            prop_assert_eq!(&id, &format!("c_{id64:016x}"));
            prop_assert_eq!(chunk_id_to_u64(&id), Some(id64));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// The BM25 leg's own scorer (every chunk in scope) gives exactly what tantivy's
        /// boolean query gives under the same statistics: the same chunks, in the same order,
        /// with bit-identical scores, ties cut at the same place; with headings and whole-
        /// document titles, several segments, deleted chunks, any title boost and any cut.
        /// Texts of up to 23 words of six repeat a word past the tabulated term frequencies,
        /// and up to 120 chunks fill the best list more than once before the cut.
        #[test]
        fn own_scorer_equals_the_boolean_query(
            docs in prop::collection::vec(
                (prop::collection::vec(0usize..6, 1..24), any::<bool>()), 1..120),
            query in prop::collection::vec(0usize..6, 1..5),
            deleted in prop::collection::vec(0usize..120, 0..4),
            boost in prop::sample::select(vec![0.0f32, 1.0, 1.5]),
            // The cut falls at `limit` + `TIE_SLACK`: within the matches, among tied scores.
            limit in 1usize..30,
        ) {
            let chunks: Vec<Chunk> = docs
                .iter()
                .enumerate()
                .map(|(i, (words, _))| chunk("acme", i, words, &[]))
                .collect();
            let whole: std::collections::HashSet<String> = docs
                .iter()
                .zip(&chunks)
                .filter(|((_, whole), _)| *whole)
                .map(|(_, c)| c.id.clone())
                .collect();
            let dir = tempfile::tempdir().expect("dir");
            let index = index_with_whole_documents(dir.path(), &chunks, |c| whole.contains(&c.id));
            if !deleted.is_empty() {
                let mut update = index.update().expect("update");
                for &d in &deleted {
                    if let Some(c) = chunks.get(d) {
                        update.delete_source(&c.source);
                    }
                }
                update.commit(3).expect("commit");
            }
            let acme = AccessContext::new("acme", Vec::<String>::new());
            let keywords: Vec<String> = query.iter().map(|&w| WORDS[w].to_string()).collect();
            let q = Bm25Query {
                keywords: &keywords,
                access: &acme,
                include_superseded: false,
                limit,
                title_boost: boost,
            };
            let searcher = index.reader.searcher();
            prop_assert!(index.filters_pass_all(&searcher, &q).expect("filters"));
            let terms = query_terms(&keywords);
            let memo = index.scope_memo(&searcher, &q);
            let ours = index
                .top_in_whole_scope(&searcher, &terms, &q, &memo)
                .expect("own scorer");
            let theirs = index
                .top_by_query(&searcher, &terms, &q, memo, true, false)
                .expect("boolean query");
            let bits = |top: &[(f32, tantivy::DocAddress)]| -> Vec<(u32, tantivy::DocAddress)> {
                top.iter().map(|(s, a)| (s.to_bits(), *a)).collect()
            };
            prop_assert_eq!(bits(&ours), bits(&theirs));
        }
    }

    /// Scoped counts are remembered per searcher: asked again they are the same, and after a
    /// commit that changes the scope they are counted afresh (never yesterday's figures), both
    /// the planner's term counts and the BM25 statistics a search scores with.
    #[test]
    fn remembered_scope_counts_follow_each_commit() {
        let dir = tempfile::tempdir().expect("dir");
        let acme = AccessContext::new("acme", Vec::<String>::new());
        // Another tenant's chunk makes the scope a real filter (not the whole index).
        let chunks = vec![
            chunk("acme", 0, &[0, 1], &[]),
            chunk("acme", 1, &[0], &[]),
            chunk("globex", 2, &[0, 0, 0], &[]),
        ];
        let index = index_of(dir.path(), &chunks);
        let keywords = vec!["hotel".to_string()];
        let counts = |index: &Bm25Index| {
            let c = index.scoped_counts(&acme, false).expect("counts");
            (c.num_chunks(), c.doc_freq("hotel"), c.doc_freq("taxi"))
        };
        assert_eq!(counts(&index), (2, 2, 1));
        let first = search(&index, &keywords, &acme);
        assert_eq!(
            (counts(&index), search(&index, &keywords, &acme)),
            ((2, 2, 1), first.clone())
        );

        let mut update = index.update().expect("update");
        update
            .add_chunk(&chunk("acme", 3, &[0, 1, 1], &[]), false)
            .expect("add");
        update.commit(3).expect("commit");
        assert_eq!(counts(&index), (3, 3, 2));
        let after = search(&index, &keywords, &acme);
        assert_eq!(after.len(), 3);
        // The same scores a freshly opened index (no remembered counts) gives.
        let fresh = Bm25Index::open_or_create(dir.path()).expect("reopen");
        assert_eq!(search(&fresh, &keywords, &acme), after);
        assert_ne!(
            first[0].score, after[0].score,
            "the statistics did not move"
        );
    }

    /// A whole-document chunk's title is indexed with its text and as its name, never as a
    /// heading; a section's heading path only as a heading.
    #[test]
    fn whole_document_titles_go_with_the_text_and_headings_apart() {
        let dir = tempfile::tempdir().expect("dir");
        let abstract_ = Chunk {
            title_path: "Solar panels on schools".to_string(),
            text: "Roofs face south.".to_string(),
            ..chunk("acme", 0, &[0], &[])
        };
        let section = Chunk {
            title_path: "Handbook / Meal allowance".to_string(),
            text: "Lunch is paid.".to_string(),
            ..chunk("acme", 1, &[0], &[])
        };
        let index = Bm25Index::open_or_create(dir.path()).expect("index");
        let mut update = index.update().expect("update");
        update.add_chunk(&abstract_, true).expect("add");
        update.add_chunk(&section, false).expect("add");
        update.commit(1).expect("commit");
        let f = index.fields;
        let searcher = index.reader.searcher();
        let in_field = |field, word: &str| {
            searcher
                .doc_freq(&Term::from_field_text(field, word))
                .expect("doc freq")
        };
        // (heading, text, name) per word.
        let fields = |word| {
            (
                in_field(f.title, word),
                in_field(f.body, word),
                in_field(f.name, word),
            )
        };
        assert_eq!(fields("solar"), (0, 1, 1));
        assert_eq!(fields("south"), (0, 1, 0));
        assert_eq!(fields("meal"), (1, 0, 0));
        assert_eq!(fields("lunch"), (0, 1, 0));
        // Both are found by their title words, and the counts a planner weighs see the title.
        let acme = AccessContext::new("acme", Vec::<String>::new());
        for (word, id) in [("solar", &abstract_.id), ("meal", &section.id)] {
            let hits = search(&index, &[word.to_string()], &acme);
            let ids: Vec<String> = hits.iter().map(|h| u64_to_chunk_id(h.id64)).collect();
            assert_eq!(ids, std::slice::from_ref(id), "{word}");
            let counts = index.scoped_counts(&acme, false).expect("counts");
            assert_eq!(counts.doc_freq(word), 1, "{word}");
        }
    }

    /// An index another version of ragtrail built with other fields opens empty and without a
    /// generation (the engine then rebuilds it from the store), instead of failing.
    #[test]
    fn an_index_of_other_fields_starts_afresh() {
        let dir = tempfile::tempdir().expect("dir");
        {
            let mut b = Schema::builder();
            let body = b.add_text_field("body", tantivy::schema::TEXT);
            let old = Index::create_in_dir(dir.path(), b.build()).expect("old index");
            let mut writer: IndexWriter =
                old.writer_with_num_threads(1, 15_000_000).expect("writer");
            let mut doc = TantivyDocument::default();
            doc.add_text(body, "hotel");
            writer.add_document(doc).expect("add");
            let mut prepared = writer.prepare_commit().expect("prepare");
            prepared.set_payload("7");
            prepared.commit().expect("commit");
        }
        let index = Bm25Index::open_or_create(dir.path()).expect("opens");
        assert_eq!(index.committed_generation().expect("generation"), None);
        assert_eq!(index.reader.searcher().num_docs(), 0);
        let mut update = index.update().expect("update");
        update
            .add_chunk(&chunk("acme", 0, &[0], &[]), false)
            .expect("add");
        update.commit(1).expect("commit");
        let acme = AccessContext::new("acme", Vec::<String>::new());
        assert_eq!(search(&index, &["hotel".to_string()], &acme).len(), 1);
        assert_eq!(index.committed_generation().expect("generation"), Some(1));
    }

    #[test]
    fn chunk_ids_round_trip_and_only_canonical_ones_parse() {
        let id = crate::knowledge::chunk_id("a.md", &["Heading".to_string()], 0);
        let n = chunk_id_to_u64(&id).expect("canonical");
        assert_eq!(u64_to_chunk_id(n), id);
        assert_eq!(u64_to_chunk_id(0), "c_0000000000000000");
        assert_eq!(chunk_id_to_u64("c_0000000000000000"), Some(0));
        for bad in [
            "c_1",
            "c_00000000000000001",
            "c_ABCDEF0123456789",
            "x_0123456789abcdef",
            "c_+123456789abcdef",
        ] {
            assert_eq!(chunk_id_to_u64(bad), None, "{bad}");
        }
    }
}
