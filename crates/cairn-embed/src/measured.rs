//! What each model of the catalogue was measured to find and to cost, for `cairn model list`:
//! the figures that cannot be measured when the command runs (recall needs the evaluation
//! sets, latency a store of 100,000 memories). Every figure comes from a run written up in
//! docs/BENCHMARKS.md ("Models side by side"), which gives the command that repeats it; a
//! figure not measured is `None`, never a guess. Size on disk is measured when the list is
//! shown.

/// Recall of hybrid search (the fusion and the shipped two-pass re-ranking, each model with its
/// own weights fitted on both dev halves) measured by `cairn-eval` on 2026-11-29, and the same
/// through the HTTP API (`scripts/eval-http.py`; docs/BENCHMARKS.md "A second pass").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recall {
    /// The coding set's test split (121 questions), R@5.
    pub coding_r5: Option<f64>,
    /// Its paraphrased questions, R@5.
    pub paraphrase_r5: Option<f64>,
    /// Its Spanish questions (memories in English), R@5.
    pub spanish_r5: Option<f64>,
    /// The held-out coding set (`eval/coding-heldout.json`, never fitted on), R@5.
    pub heldout_r5: Option<f64>,
    /// LoCoMo's test half (conversations 5–9, 775 questions), turn-level R@10.
    pub locomo_r10: Option<f64>,
}

/// The figures of one model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    pub model: &'static str,
    pub languages: &'static str,
    /// When and on what the figures were measured.
    pub measured_on: &'static str,
    /// Resident memory the loaded model adds to the daemon (MiB): `VmRSS` of a release `cairn
    /// serve` after a save, its embedding and two hybrid searches, less that of the same daemon
    /// without a model (29,684 kB). Measured 2026-11-28 15:25 UTC, after the allocator gave back
    /// the memory of the model's load (before, it kept it: e5 showed 1,080 MiB).
    pub rss_mib: Option<u32>,
    /// A hybrid search at 100,000 memories through the HTTP API, p50 (ms): `cairn serve` with
    /// the model, cairn-bench's generated questions (never seen before, so each is embedded;
    /// ~10 words), random stored vectors of the model's width (the scan costs the same
    /// whatever they say). `scripts/bench-models-http.py`, 2026-11-28 20:45–21:40 UTC, release
    /// build with the AVX-512 kernels, on a Xeon with AVX-512 in a quiet hour (`/bin/true` 0.7
    /// ms): the median of its runs. Most of it is the query's embedding. In a slow hour of the
    /// same day (`/bin/true` 1.8 ms, no AVX-512 kernels) e5 measured 17.4 ms.
    pub hybrid_ms_p50_100k: Option<f64>,
    pub recall: Recall,
}

/// RSS and latency measured on 2026-11-28 (EmbeddingGemma's on 2026-11-29), recall on 2026-11-29.
const MEASURED_ON: &str = "2026-11-28 to 2026-11-29 on a shared 2-core x86-64 VM (AVX-512)";

/// The figures of every catalogue model (docs/BENCHMARKS.md "Models side by side").
pub const MEASURED: &[Measured] = &[
    Measured {
        model: "multilingual-e5-small",
        languages: "~100 languages",
        measured_on: MEASURED_ON,
        // Re-measured 2026-12-03 10:30 UTC after its word table went to 4-bit blocks (was
        // 267 MiB in f16): VmRSS 171,192–174,656 kB against 33,424–34,048 kB without a model,
        // three pairs: 137 MiB. Then 2026-12-04 21:55 UTC, its products in 4 bits × int8 (AVX-512
        // VNNI): `scripts/bench-models-http.py` at 100k, this build alternated with the one
        // before, daemon VmRSS 182–184 against 219–221 MiB (−37: 100 MiB) and hybrid p50
        // 7.31–8.63 (median 8.3) against 11.75–13.59 ms (it was 11.3 ms on 2026-11-28). On a CPU
        // without VNNI the figures before these hold (the rest are from the dates above).
        rss_mib: Some(100),
        hybrid_ms_p50_100k: Some(8.3),
        recall: Recall {
            coding_r5: Some(0.975),
            paraphrase_r5: Some(0.938),
            spanish_r5: Some(0.935),
            heldout_r5: Some(0.967),
            locomo_r10: Some(0.781),
        },
    },
    Measured {
        model: "all-MiniLM-L6-v2",
        languages: "English",
        measured_on: MEASURED_ON,
        // VmRSS 130,280 kB.
        rss_mib: Some(98),
        hybrid_ms_p50_100k: Some(8.1),
        recall: Recall {
            coding_r5: Some(0.946),
            paraphrase_r5: Some(0.917),
            spanish_r5: Some(0.804),
            heldout_r5: Some(0.967),
            locomo_r10: Some(0.780),
        },
    },
    Measured {
        model: "nomic-embed-text-v1.5",
        languages: "English",
        measured_on: MEASURED_ON,
        // VmRSS 313,732 kB.
        rss_mib: Some(277),
        // Twice e5's width (768) and a larger network: the query's embedding is most of it.
        hybrid_ms_p50_100k: Some(34.7),
        recall: Recall {
            coding_r5: Some(0.959),
            paraphrase_r5: Some(0.917),
            spanish_r5: Some(0.913),
            heldout_r5: Some(1.0),
            locomo_r10: Some(0.812),
        },
    },
    Measured {
        model: "embeddinggemma-300m",
        languages: "100+ languages",
        measured_on: MEASURED_ON,
        // VmRSS 727,976 kB on 2026-11-29 03:55 UTC: the 262,144-token table in f16 (403 MB), the
        // layers in f16, the tokenizer. Loading it peaks at 1.9 GB (the file is read whole).
        rss_mib: Some(682),
        // 2026-11-29 03:53 UTC, in one run beside e5 (9.9 ms there): 3.2 times e5's, most of it
        // the query's embedding (24 layers of 768).
        hybrid_ms_p50_100k: Some(31.5),
        recall: Recall {
            coding_r5: Some(0.988),
            paraphrase_r5: Some(0.938),
            spanish_r5: Some(1.0),
            heldout_r5: Some(1.0),
            locomo_r10: Some(0.828),
        },
    },
];

/// The measured figures of the catalogue's model `id`.
pub fn measured(id: &str) -> Option<&'static Measured> {
    MEASURED.iter().find(|m| m.model.eq_ignore_ascii_case(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalogue_model_has_its_figures_and_no_others() {
        for spec in crate::install::CATALOGUE {
            assert!(measured(spec.id).is_some(), "{} has no measured figures", spec.id);
        }
        assert_eq!(MEASURED.len(), crate::install::CATALOGUE.len());
    }

    #[test]
    fn recall_figures_are_shares() {
        for m in MEASURED {
            let r = m.recall;
            for v in [r.coding_r5, r.paraphrase_r5, r.spanish_r5, r.heldout_r5, r.locomo_r10].into_iter().flatten() {
                assert!((0.0..=1.0).contains(&v), "{}: {v}", m.model);
            }
        }
    }
}
