//! Word lists the workload is built from: real technical terms, English glue, error messages,
//! and twenty projects, each with its language, domain nouns and (generated) identifiers,
//! paths and error codes. Together several thousand distinct search-worthy words.

use crate::rng::{Rng, Zipf};

/// Real technical terms, roughly most common first (ranks are shuffled a little per seed).
pub const TERMS: &[&str] = &[
    "test",
    "cache",
    "migration",
    "index",
    "config",
    "timeout",
    "retry",
    "query",
    "schema",
    "deploy",
    "build",
    "request",
    "response",
    "session",
    "token",
    "auth",
    "logging",
    "lock",
    "transaction",
    "connection",
    "pool",
    "worker",
    "queue",
    "handler",
    "middleware",
    "endpoint",
    "router",
    "client",
    "server",
    "database",
    "sqlite",
    "postgres",
    "redis",
    "kafka",
    "docker",
    "kubernetes",
    "helm",
    "terraform",
    "nginx",
    "webpack",
    "vite",
    "eslint",
    "prettier",
    "clippy",
    "rustfmt",
    "cargo",
    "npm",
    "pnpm",
    "yarn",
    "pip",
    "poetry",
    "tokio",
    "axum",
    "serde",
    "hyper",
    "reqwest",
    "diesel",
    "sqlx",
    "rusqlite",
    "react",
    "nextjs",
    "svelte",
    "vue",
    "typescript",
    "javascript",
    "python",
    "golang",
    "rust",
    "java",
    "kotlin",
    "swift",
    "graphql",
    "grpc",
    "protobuf",
    "rest",
    "websocket",
    "sse",
    "http2",
    "tls",
    "certificate",
    "oauth",
    "jwt",
    "cookie",
    "csrf",
    "cors",
    "xss",
    "ratelimit",
    "throttling",
    "backoff",
    "jitter",
    "idempotency",
    "deadlock",
    "mutex",
    "semaphore",
    "channel",
    "async",
    "await",
    "future",
    "thread",
    "goroutine",
    "closure",
    "lifetime",
    "borrow",
    "ownership",
    "generic",
    "trait",
    "interface",
    "enum",
    "struct",
    "macro",
    "decorator",
    "fixture",
    "mock",
    "stub",
    "snapshot",
    "benchmark",
    "profiling",
    "flamegraph",
    "heap",
    "allocation",
    "memory",
    "leak",
    "gc",
    "latency",
    "throughput",
    "p99",
    "histogram",
    "metrics",
    "prometheus",
    "grafana",
    "tracing",
    "opentelemetry",
    "span",
    "sentry",
    "alerting",
    "pagerduty",
    "oncall",
    "incident",
    "postmortem",
    "rollback",
    "canary",
    "feature",
    "flag",
    "toggle",
    "rollout",
    "pipeline",
    "ci",
    "github",
    "actions",
    "workflow",
    "runner",
    "artifact",
    "release",
    "semver",
    "changelog",
    "tag",
    "branch",
    "rebase",
    "merge",
    "conflict",
    "commit",
    "hook",
    "precommit",
    "lint",
    "formatter",
    "typecheck",
    "mypy",
    "pytest",
    "jest",
    "vitest",
    "playwright",
    "cypress",
    "selenium",
    "e2e",
    "integration",
    "unit",
    "flaky",
    "timeout",
    "race",
    "condition",
    "ordering",
    "wal",
    "vacuum",
    "fts5",
    "bm25",
    "tokenizer",
    "stemming",
    "embedding",
    "vector",
    "cosine",
    "ann",
    "hnsw",
    "faiss",
    "pgvector",
    "elasticsearch",
    "opensearch",
    "meilisearch",
    "s3",
    "bucket",
    "presigned",
    "cdn",
    "cloudfront",
    "lambda",
    "serverless",
    "cron",
    "scheduler",
    "batch",
    "stream",
    "backpressure",
    "buffer",
    "chunk",
    "pagination",
    "cursor",
    "offset",
    "sorting",
    "filtering",
    "validation",
    "sanitization",
    "encoding",
    "utf8",
    "base64",
    "json",
    "yaml",
    "toml",
    "csv",
    "parquet",
    "compression",
    "gzip",
    "zstd",
    "checksum",
    "sha256",
    "hmac",
    "signature",
    "encryption",
    "aes",
    "keyring",
    "secret",
    "vault",
    "env",
    "dotenv",
    "container",
    "image",
    "registry",
    "volume",
    "mount",
    "permission",
    "chmod",
    "uid",
    "sandbox",
    "seccomp",
    "namespace",
    "cgroup",
    "oom",
    "swap",
    "cpu",
    "simd",
    "inline",
    "lto",
    "linker",
    "musl",
    "glibc",
    "wasm",
    "ffi",
    "bindgen",
    "unsafe",
    "panic",
    "unwrap",
    "error",
    "exception",
    "stacktrace",
    "backtrace",
    "debugger",
    "breakpoint",
    "repl",
    "notebook",
    "dataframe",
    "pandas",
    "numpy",
    "regex",
    "glob",
    "symlink",
    "inode",
    "fsync",
    "mmap",
    "epoll",
    "socket",
    "port",
    "dns",
    "proxy",
    "loadbalancer",
    "healthcheck",
    "readiness",
    "liveness",
    "sidecar",
    "daemon",
    "systemd",
    "launchd",
    "supervisor",
    "signal",
    "sigterm",
    "shutdown",
    "graceful",
    "restart",
    "upgrade",
    "downgrade",
    "compatibility",
    "deprecation",
    "polyfill",
    "shim",
    "adapter",
    "facade",
    "repository",
    "dependency",
    "injection",
    "singleton",
    "factory",
    "builder",
    "visitor",
    "observer",
    "eventbus",
    "pubsub",
    "webhook",
    "callback",
    "promise",
    "debounce",
    "memoization",
    "hydration",
    "ssr",
    "csr",
    "bundle",
    "treeshaking",
    "sourcemap",
    "minify",
    "locale",
    "i18n",
    "timezone",
    "utc",
    "timestamp",
    "clock",
    "monotonic",
    "uuid",
    "ulid",
    "snowflake",
    "sequence",
    "autoincrement",
    "foreignkey",
    "constraint",
    "trigger",
    "view",
    "materialized",
    "replica",
    "sharding",
    "partition",
    "consensus",
    "raft",
];

/// English glue: the words between the technical ones (and most of a natural question).
pub const GLUE: &[&str] = &[
    "the", "a", "an", "we", "it", "is", "was", "were", "be", "to", "of", "in", "on", "for", "with", "and", "or", "but",
    "so", "because", "when", "after", "before", "while", "that", "this", "which", "now", "then", "still", "also",
    "only", "every", "each", "all", "some", "no", "not", "never", "always", "again", "instead", "first", "last", "by",
    "from", "into", "out", "up", "down", "over", "under", "about", "around", "until", "once", "twice", "more", "less",
    "too", "very", "just", "already",
];

pub const ADJECTIVES: &[&str] = &[
    "stale",
    "empty",
    "missing",
    "duplicated",
    "corrupted",
    "truncated",
    "expired",
    "locked",
    "closed",
    "unbounded",
    "nested",
    "detached",
    "uncommitted",
    "partial",
    "oversized",
    "misordered",
    "cold",
    "saturated",
];

pub const VERBS: &[&str] = &[
    "parse",
    "load",
    "save",
    "fetch",
    "build",
    "render",
    "validate",
    "resolve",
    "flush",
    "sync",
    "retry",
    "encode",
    "decode",
    "apply",
    "compute",
    "refresh",
    "emit",
    "handle",
    "dispatch",
    "schedule",
    "reconcile",
    "normalize",
    "serialize",
    "hydrate",
    "evict",
    "merge",
    "split",
    "index",
    "migrate",
    "spawn",
    "open",
    "close",
    "acquire",
    "release",
    "commit",
    "rollback",
    "publish",
    "subscribe",
    "verify",
    "sign",
];

pub const SHARED_NOUNS: &[&str] = &[
    "config",
    "client",
    "request",
    "response",
    "token",
    "session",
    "cache",
    "queue",
    "worker",
    "handler",
    "buffer",
    "header",
    "payload",
    "batch",
    "entry",
    "record",
    "state",
    "store",
    "pool",
    "stream",
    "event",
    "job",
    "task",
    "schema",
    "row",
    "key",
    "snapshot",
    "cursor",
    "page",
    "query",
    "filter",
    "route",
    "context",
    "error",
    "retry",
    "timeout",
    "limit",
    "checkpoint",
    "manifest",
    "registry",
];

/// Error messages agents paste into memories and queries.
pub const ERROR_MESSAGES: &[&str] = &[
    "connection reset by peer",
    "connection refused",
    "database is locked",
    "deadline exceeded",
    "too many open files",
    "no space left on device",
    "broken pipe",
    "address already in use",
    "permission denied",
    "cannot borrow as mutable",
    "borrow of moved value",
    "use of moved value",
    "lifetime may not live long enough",
    "mismatched types",
    "trait bound is not satisfied",
    "undefined is not a function",
    "cannot read properties of undefined",
    "maximum call stack size exceeded",
    "unexpected token in json",
    "module not found",
    "hydration mismatch",
    "network request failed",
    "certificate has expired",
    "unable to verify the first certificate",
    "nil pointer dereference",
    "index out of range",
    "context canceled",
    "i/o timeout",
    "unique constraint failed",
    "foreign key constraint failed",
    "serialization failure",
    "relation does not exist",
    "could not obtain lock",
    "out of memory",
    "killed by signal 9",
    "segmentation fault",
    "stack overflow",
    "thread panicked",
    "called unwrap on a none value",
    "keyerror",
    "attributeerror",
    "importerror",
    "recursionerror",
    "assertion failed",
    "test timed out",
    "port is already allocated",
    "image pull backoff",
    "crashloopbackoff",
    "too many requests",
    "gateway timeout",
    "bad gateway",
];

const ERRNO: &[&str] = &[
    "ECONNRESET",
    "ECONNREFUSED",
    "ETIMEDOUT",
    "EADDRINUSE",
    "ENOENT",
    "EACCES",
    "EPIPE",
    "EMFILE",
    "ENOSPC",
    "EAGAIN",
    "EEXIST",
    "ENOTDIR",
    "EISDIR",
    "EINVAL",
    "EBUSY",
    "EHOSTUNREACH",
    "ENETUNREACH",
    "EPERM",
    "EROFS",
    "EXDEV",
    "SQLITE_BUSY",
    "SQLITE_LOCKED",
    "SQLITE_CORRUPT",
    "SQLITE_FULL",
];

const SQLSTATES: &[&str] =
    &["40001", "40P01", "23505", "23503", "57014", "42P01", "42703", "53300", "55P03", "08006", "22001", "25P02"];

const HTTP_STATUSES: &[&str] = &[
    "400", "401", "403", "404", "405", "409", "410", "412", "413", "415", "422", "425", "429", "431", "500", "501",
    "502", "503", "504", "507",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Rust,
    Go,
    TypeScript,
    Python,
}

/// Twenty projects: name, language, relative size, domain nouns.
pub const PROJECTS: &[(&str, Lang, f64, &[&str])] = &[
    (
        "ferrite",
        Lang::Rust,
        1.0,
        &["allocator", "arena", "slab", "page", "region", "heap", "pointer", "block", "frame", "pin"],
    ),
    (
        "shopfront",
        Lang::TypeScript,
        0.9,
        &["cart", "checkout", "product", "catalog", "coupon", "basket", "storefront", "wishlist", "variant", "price"],
    ),
    (
        "ledgerd",
        Lang::Go,
        0.85,
        &[
            "ledger",
            "posting",
            "journal",
            "invoice",
            "settlement",
            "balance",
            "account",
            "currency",
            "reconciliation",
            "payout",
        ],
    ),
    (
        "quillmark",
        Lang::TypeScript,
        0.6,
        &[
            "document",
            "paragraph",
            "cursor",
            "selection",
            "markdown",
            "toolbar",
            "footnote",
            "outline",
            "draft",
            "revision",
        ],
    ),
    (
        "tidepool",
        Lang::Python,
        0.55,
        &["sensor", "reading", "station", "forecast", "sample", "buoy", "tide", "salinity", "dataset", "calibration"],
    ),
    (
        "harborctl",
        Lang::Go,
        0.5,
        &["cluster", "node", "manifest", "release", "chart", "namespace", "deployment", "rollout", "pod", "ingress"],
    ),
    (
        "lumenql",
        Lang::Rust,
        0.45,
        &[
            "planner",
            "operator",
            "predicate",
            "tuple",
            "relation",
            "optimizer",
            "join",
            "projection",
            "aggregate",
            "catalog",
        ],
    ),
    (
        "orchard",
        Lang::Python,
        0.4,
        &["tree", "orchard", "harvest", "grower", "plot", "yield", "irrigation", "season", "crop", "soil"],
    ),
    (
        "brightwire",
        Lang::TypeScript,
        0.38,
        &[
            "message",
            "thread",
            "channel",
            "mention",
            "reaction",
            "notification",
            "presence",
            "inbox",
            "attachment",
            "emoji",
        ],
    ),
    (
        "cobaltdb",
        Lang::Rust,
        0.36,
        &["btree", "pager", "wal", "compaction", "sstable", "memtable", "tombstone", "segment", "bloom", "manifest"],
    ),
    (
        "skiff",
        Lang::Go,
        0.33,
        &["container", "sandbox", "layer", "overlay", "image", "rootfs", "seccomp", "mount", "snapshotter", "shim"],
    ),
    (
        "meridian",
        Lang::Python,
        0.3,
        &["route", "waypoint", "itinerary", "booking", "flight", "fare", "passenger", "seat", "carrier", "timetable"],
    ),
    (
        "pinecast",
        Lang::TypeScript,
        0.28,
        &[
            "episode",
            "podcast",
            "feed",
            "subscriber",
            "transcript",
            "chapter",
            "player",
            "playlist",
            "enclosure",
            "rss",
        ],
    ),
    (
        "rustle",
        Lang::Rust,
        0.26,
        &["widget", "layout", "glyph", "font", "shader", "texture", "surface", "viewport", "theme", "palette"],
    ),
    (
        "vantage",
        Lang::Go,
        0.24,
        &["dashboard", "panel", "alert", "metric", "series", "scrape", "target", "rule", "silence", "receiver"],
    ),
    (
        "kestrel",
        Lang::Python,
        0.22,
        &[
            "model",
            "training",
            "epoch",
            "checkpoint",
            "tokenizer",
            "gradient",
            "optimizer",
            "dataloader",
            "eval",
            "finetune",
        ],
    ),
    (
        "atlaspay",
        Lang::Go,
        0.2,
        &[
            "payment",
            "refund",
            "chargeback",
            "merchant",
            "card",
            "authorization",
            "capture",
            "dispute",
            "fee",
            "webhook",
        ],
    ),
    (
        "gossamer",
        Lang::TypeScript,
        0.18,
        &["graph", "edge", "vertex", "layout", "canvas", "zoom", "tooltip", "legend", "cluster", "minimap"],
    ),
    (
        "nimbusfs",
        Lang::Rust,
        0.16,
        &["inode", "chunk", "replica", "volume", "extent", "journal", "lease", "placement", "scrub", "quota"],
    ),
    (
        "driftwood",
        Lang::Python,
        0.15,
        &[
            "recipe",
            "ingredient",
            "pantry",
            "meal",
            "nutrition",
            "serving",
            "shopping",
            "menu",
            "allergen",
            "substitution",
        ],
    ),
];

/// Vocabulary of one project: its domain nouns plus generated identifiers, paths, error codes,
/// each list ordered by how often it is used (Zipf rank order).
#[derive(Debug, Clone)]
pub struct ProjectVocab {
    pub name: &'static str,
    pub lang: Lang,
    pub weight: f64,
    pub domain: Vec<&'static str>,
    pub idents: Vec<String>,
    pub paths: Vec<String>,
    pub codes: Vec<String>,
    pub domain_zipf: Zipf,
    pub ident_zipf: Zipf,
    pub path_zipf: Zipf,
    pub code_zipf: Zipf,
}

/// The whole vocabulary for one seed.
#[derive(Debug, Clone)]
pub struct Vocab {
    /// Technical terms, in rank order for this seed.
    pub terms: Vec<&'static str>,
    pub term_zipf: Zipf,
    /// Global error codes (errno, rustc, HTTP, SQLSTATE) in rank order.
    pub codes: Vec<String>,
    pub code_zipf: Zipf,
    pub error_zipf: Zipf,
    pub projects: Vec<ProjectVocab>,
}

const IDENTS_PER_PROJECT: usize = 150;
const PATHS_PER_PROJECT: usize = 50;
const CODES_PER_PROJECT: usize = 12;

impl Vocab {
    pub fn new(seed: u64) -> Self {
        let mut rng = Rng::for_item(seed, 0x766f_6361, 0);
        // Keep the real order roughly (common words stay common) but let the seed move words a few places.
        let mut keyed: Vec<(f64, &'static str)> =
            TERMS.iter().enumerate().map(|(i, t)| (i as f64 + rng.f64() * 40.0, *t)).collect();
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut terms: Vec<&'static str> = Vec::with_capacity(keyed.len());
        for (_, t) in keyed {
            if !terms.contains(&t) {
                terms.push(t);
            }
        }

        let mut codes: Vec<String> = ERRNO.iter().map(|s| (*s).to_owned()).collect();
        for _ in 0..60 {
            codes.push(format!("E{:04}", rng.range(1, 799)));
        }
        codes.extend(HTTP_STATUSES.iter().map(|s| format!("HTTP {s}")));
        codes.extend(SQLSTATES.iter().map(|s| format!("SQLSTATE {s}")));
        for n in [1, 2, 101, 127, 137, 139, 143] {
            codes.push(format!("exit code {n}"));
        }
        let mut seen = std::collections::HashSet::new();
        codes.retain(|c| seen.insert(c.clone()));
        shuffle(&mut codes, &mut rng);

        let projects = PROJECTS
            .iter()
            .enumerate()
            .map(|(i, (name, lang, weight, domain))| {
                let mut prng = Rng::for_item(seed, 0x7072_6f6a, i as u64);
                let idents = make_idents(&mut prng, *lang, domain);
                let paths = make_paths(&mut prng, name, *lang, domain);
                let prefix: String = name.chars().filter(|c| !"aeiou".contains(*c)).take(3).collect();
                let codes = (0..CODES_PER_PROJECT)
                    .map(|_| format!("{}-{}", prefix.to_uppercase(), prng.range(1000, 9999)))
                    .collect::<Vec<_>>();
                ProjectVocab {
                    name,
                    lang: *lang,
                    weight: *weight,
                    domain_zipf: Zipf::new(domain.len(), 0.8),
                    ident_zipf: Zipf::new(idents.len(), 1.0),
                    path_zipf: Zipf::new(paths.len(), 0.9),
                    code_zipf: Zipf::new(codes.len(), 1.0),
                    domain: domain.to_vec(),
                    idents,
                    paths,
                    codes,
                }
            })
            .collect();

        Self {
            term_zipf: Zipf::new(terms.len(), 1.0),
            code_zipf: Zipf::new(codes.len(), 1.0),
            error_zipf: Zipf::new(ERROR_MESSAGES.len(), 0.9),
            terms,
            codes,
            projects,
        }
    }

    /// Distinct search-worthy entries (terms, domain nouns, identifiers, paths, codes, messages).
    pub fn distinct_words(&self) -> usize {
        let per_project: usize =
            self.projects.iter().map(|p| p.domain.len() + p.idents.len() + p.paths.len() + p.codes.len()).sum();
        self.terms.len() + self.codes.len() + ERROR_MESSAGES.len() + per_project
    }
}

fn shuffle<T>(items: &mut [T], rng: &mut Rng) {
    for i in (1..items.len()).rev() {
        let j = rng.below(i + 1);
        items.swap(i, j);
    }
}

fn camel(words: &[&str]) -> String {
    words
        .iter()
        .map(|w| {
            let mut c = w.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect()
}

fn lower_camel(words: &[&str]) -> String {
    let s = camel(words);
    let mut c = s.chars();
    c.next().map(|f| f.to_ascii_lowercase().to_string() + c.as_str()).unwrap_or_default()
}

fn make_idents(rng: &mut Rng, lang: Lang, domain: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(IDENTS_PER_PROJECT);
    let mut guard = 0;
    while out.len() < IDENTS_PER_PROJECT && guard < 100_000 {
        guard += 1;
        let verb = *rng.pick(VERBS);
        let noun = *rng.pick(domain);
        let noun2 = *rng.pick(SHARED_NOUNS);
        let style = rng.below(4);
        let ident = match (lang, style) {
            (Lang::Rust | Lang::Python, 0 | 1) => format!("{verb}_{noun}_{noun2}"),
            (Lang::Rust | Lang::Python, 2) => camel(&[noun, noun2]),
            (Lang::Rust, _) => format!("{}_{}", noun2.to_uppercase(), noun.to_uppercase()),
            (Lang::Python, _) => format!("{verb}_{noun}"),
            (Lang::Go, 0 | 1) => camel(&[verb, noun, noun2]),
            (Lang::Go, 2) => lower_camel(&[verb, noun]),
            (Lang::Go, _) => camel(&[noun, noun2]),
            (Lang::TypeScript, 0) => lower_camel(&[verb, noun, noun2]),
            (Lang::TypeScript, 1) => format!("use{}", camel(&[noun, noun2])),
            (Lang::TypeScript, 2) => camel(&[noun, noun2]),
            (Lang::TypeScript, _) => lower_camel(&[verb, noun]),
        };
        if !out.contains(&ident) {
            out.push(ident);
        }
    }
    out
}

fn make_paths(rng: &mut Rng, project: &str, lang: Lang, domain: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(PATHS_PER_PROJECT);
    let mut guard = 0;
    while out.len() < PATHS_PER_PROJECT && guard < 100_000 {
        guard += 1;
        let noun = *rng.pick(domain);
        let noun2 = *rng.pick(SHARED_NOUNS);
        let path = match (lang, rng.below(3)) {
            (Lang::Rust, 0) => format!("crates/{noun}/src/{noun2}.rs"),
            (Lang::Rust, 1) => format!("src/{noun}/{noun2}.rs"),
            (Lang::Rust, _) => format!("tests/{noun}_{noun2}.rs"),
            (Lang::Go, 0) => format!("internal/{noun}/{noun2}.go"),
            (Lang::Go, 1) => format!("pkg/{noun}/{noun2}_test.go"),
            (Lang::Go, _) => format!("cmd/{project}/{noun}.go"),
            (Lang::TypeScript, 0) => format!("src/components/{}.tsx", camel(&[noun, noun2])),
            (Lang::TypeScript, 1) => format!("src/lib/{noun}/{noun2}.ts"),
            (Lang::TypeScript, _) => format!("tests/{noun}.spec.ts"),
            (Lang::Python, 0) => format!("{project}/{noun}/{noun2}.py"),
            (Lang::Python, 1) => format!("tests/test_{noun}_{noun2}.py"),
            (Lang::Python, _) => format!("{project}/{noun}.py"),
        };
        if !out.contains(&path) {
            out.push(path);
        }
    }
    out
}
