//! The compact index ranks exactly as the plainest BM25F scorer over the same memories:
//! every memory tokenised again per query, no posting lists at all. Same float operations in
//! the same order, so scores must agree bit for bit, and so must the order of ties.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;

/// A few words, some sharing a stem (`cache`, `caches`, `caching`), some accented.
const WORDS: &[&str] = &[
    "cache",
    "caches",
    "caching",
    "kafka",
    "lag",
    "rebalance",
    "storm",
    "tabs",
    "zebra",
    "configuración",
    "deploy",
    "deploys",
    "alpha",
    "beta",
    "token",
    "index",
    "indexes",
    "search",
    "fix",
    "bug",
];
const KINDS: &[&str] = &["bugfix", "decision", "pattern"];
const PROJECTS: &[&str] = &["p", "q", "r"];

fn text(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(WORDS), 0..max).prop_map(|w| w.join(" "))
}

fn row() -> impl Strategy<Value = Row> {
    (
        text(6),
        text(40),
        prop::sample::select(KINDS),
        prop::sample::select(PROJECTS),
        any::<bool>(),
        prop::option::of(text(3)),
        prop::option::of(prop::sample::select(WORDS)),
        0i64..5,
    )
        .prop_map(|(title, content, kind, project, personal, topic, tool, minute)| Row {
            id: 0,
            title,
            content,
            kind: kind.into(),
            project: project.into(),
            scope: if personal { "personal" } else { "project" }.into(),
            topic_key: topic,
            tool_name: tool.map(str::to_owned),
            // Few distinct times: ties on score fall through to time, then to id.
            updated_at: format!("2026-01-01T00:0{minute}:00.000Z"),
        })
}

/// One memory as the reference sees it: weighted frequency per stem, and its length.
struct Plain {
    id: i64,
    project: String,
    kind: String,
    personal: bool,
    updated_at: String,
    tf: HashMap<String, f32>,
    len: f32,
}

fn plain(row: &Row, stemmer: &Stemmer) -> Plain {
    let mut tf: HashMap<String, f32> = HashMap::new();
    let mut len = 0.0f32;
    let fields = [
        (row.title.as_str(), W_TITLE),
        (row.content.as_str(), W_CONTENT),
        (row.kind.as_str(), W_TYPE),
        (row.topic_key.as_deref().unwrap_or_default(), W_TOPIC),
        (row.tool_name.as_deref().unwrap_or_default(), W_TOOL),
    ];
    for (text, weight) in fields {
        for token in tokenize(text) {
            *tf.entry(stemmer.stem(&token).into_owned()).or_default() += weight;
            len += weight;
        }
    }
    Plain {
        id: row.id,
        project: row.project.clone(),
        kind: row.kind.clone(),
        personal: row.scope == "personal",
        updated_at: row.updated_at.clone(),
        tf,
        len,
    }
}

/// BM25F over every memory, the query's stems taken in the index's term order (the order
/// its scores are summed in).
fn reference(docs: &[Plain], index: &MemoryIndex, query: &str, filter: &IndexFilter, limit: usize) -> Vec<(i64, f32)> {
    let stemmer = Stemmer::create(Algorithm::English);
    let mut stems: Vec<(u32, String)> = tokenize(query)
        .map(|t| stemmer.stem(&t).into_owned())
        .filter_map(|s| index.vocab.get(s.as_str()).map(|&id| (id, s)))
        .collect();
    stems.sort();
    stems.dedup();
    let accepted = |d: &Plain| {
        filter.project.as_deref().is_none_or(|p| d.project == p || d.personal)
            && filter.kind.as_deref().is_none_or(|k| d.kind == k)
            && filter.scope.is_none_or(|s| d.personal == (s == Scope::Personal))
    };
    // The collection: every memory, or those of the project and the personal ones.
    let (mut own, mut personal) = ((0u32, 0f64), (0u32, 0f64));
    for d in docs {
        let in_collection = filter.project.as_deref().is_none_or(|p| d.project == p && !d.personal);
        if d.personal && filter.project.is_some() {
            personal = (personal.0 + 1, personal.1 + f64::from(d.len));
        } else if in_collection {
            own = (own.0 + 1, own.1 + f64::from(d.len));
        }
    }
    let (n, total) = (own.0 + personal.0, own.1 + personal.1);
    if n == 0 || stems.is_empty() {
        return Vec::new();
    }
    let avg_len = (total / f64::from(n)).max(1.0) as f32;
    let mut scores: HashMap<usize, f32> = HashMap::new();
    for (_, stem) in &stems {
        let matched: Vec<(usize, f32)> = docs
            .iter()
            .enumerate()
            .filter(|(_, d)| accepted(d))
            .filter_map(|(i, d)| d.tf.get(stem).map(|&tf| (i, tf, d.len)))
            .map(|(i, tf, len)| (i, tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg_len))))
            .collect();
        if matched.is_empty() {
            continue;
        }
        let df = if filter.project.is_some() {
            matched.len()
        } else {
            docs.iter().filter(|d| d.tf.contains_key(stem)).count()
        };
        let df = df as f32;
        let idf = (1.0 + (n as f32 - df + 0.5) / (df + 0.5)).ln();
        for (i, weight) in matched {
            *scores.entry(i).or_default() += idf * weight;
        }
    }
    let mut ranked: Vec<(f32, &str, i64)> =
        scores.into_iter().map(|(i, s)| (s, docs[i].updated_at.as_str(), docs[i].id)).collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(a.1)).then(b.2.cmp(&a.2)));
    ranked.into_iter().take(limit).map(|(s, _, id)| (id, s)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn the_compact_index_ranks_as_the_reference(
        rows in prop::collection::vec(row(), 1..60),
        queries in prop::collection::vec((text(4), prop::option::of(prop::sample::select(PROJECTS)), prop::option::of(prop::sample::select(KINDS)), prop::option::of(prop::sample::select(&[Scope::Personal, Scope::Project][..]))), 1..8),
        limit in 1usize..12,
    ) {
        let stemmer = Stemmer::create(Algorithm::English);
        let mut index = MemoryIndex::empty();
        let mut docs = Vec::new();
        for (i, mut row) in rows.into_iter().enumerate() {
            row.id = i as i64 + 1;
            index.add(&row);
            docs.push(plain(&row, &stemmer));
        }
        index.shrink();
        for (query, project, kind, scope) in queries {
            let filter = IndexFilter { project: project.map(str::to_owned), kind: kind.map(str::to_owned), scope };
            let got = index.search(&cairn_base::query::parse(&query), &filter, limit);
            let want = reference(&docs, &index, &query, &filter, limit);
            let bits = |v: &[(i64, f32)]| v.iter().map(|&(id, s)| (id, s.to_bits())).collect::<Vec<_>>();
            prop_assert_eq!(bits(&got), bits(&want), "query {:?} filter {:?}", query, filter);
        }
    }
}

/// Saves, changes and deletes in any order: a search finds exactly the live memories, each
/// once, however their slots were found (the ordered run or the map).
#[derive(Debug, Clone)]
enum Op {
    Save,
    Change(usize),
    Delete(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![3 => Just(Op::Save), 1 => (0usize..64).prop_map(Op::Change), 1 => (0usize..64).prop_map(Op::Delete)]
}

fn memory(id: i64, version: u32) -> Row {
    Row {
        id,
        title: format!("note {version}"),
        content: "alpha".into(),
        kind: "bugfix".into(),
        project: "p".into(),
        scope: "project".into(),
        topic_key: None,
        tool_name: None,
        updated_at: "2026-01-01T00:00:00.000Z".into(),
    }
}

proptest! {
    #[test]
    fn changes_and_deletes_leave_each_live_memory_once(
        built in 0usize..20,
        ops in prop::collection::vec(op(), 0..80),
    ) {
        let mut index = MemoryIndex::empty();
        let mut live: Vec<i64> = Vec::new();
        let mut next_id = 1i64;
        for _ in 0..built {
            index.add(&memory(next_id, 0));
            live.push(next_id);
            next_id += 1;
        }
        index.shrink();
        for (n, op) in ops.into_iter().enumerate() {
            match op {
                Op::Save => {
                    index.add(&memory(next_id, 0));
                    live.push(next_id);
                    next_id += 1;
                }
                // As `apply_logged` does: removed, then added again if still live.
                Op::Change(i) => {
                    let id = i as i64 % next_id;
                    index.remove(id);
                    if live.contains(&id) {
                        index.add(&memory(id, n as u32 + 1));
                    }
                }
                Op::Delete(i) => {
                    let id = i as i64 % next_id;
                    index.remove(id);
                    live.retain(|&l| l != id);
                }
            }
        }
        let mut found: Vec<i64> = index
            .search(&cairn_base::query::parse("alpha"), &IndexFilter::default(), 10_000)
            .into_iter()
            .map(|h| h.0)
            .collect();
        found.sort_unstable();
        live.sort_unstable();
        prop_assert_eq!(index.len(), live.len());
        prop_assert_eq!(found, live);
    }
}
