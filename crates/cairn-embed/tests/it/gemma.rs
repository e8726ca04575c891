//! EmbeddingGemma-300m (`cairn_embed::gemma`), installed from a copy of the hub's folder,
//! against a second implementation: `scripts/embeddinggemma-reference.py` (a numpy forward pass
//! over the same f32 safetensors, which reproduces the model card's similarities) ran over
//! `tests/fixtures/gemma-texts.json` and wrote `tests/fixtures/gemma-reference.json` (token ids
//! and vectors).
//!
//! Needs the folder (`scripts/install-test-deps.sh gemma`:
//! `target/test-deps/embeddinggemma-300m-src`, or `CAIRN_TEST_GEMMA_DIR`). Without it these
//! tests pass with a note, unless `CAIRN_REQUIRE_GEMMA=1`.

use std::sync::OnceLock;

use cairn_embed::install::{EMBEDDINGGEMMA_300M, install_from_dir, test_gemma_dir};
use cairn_embed::{Embedder, dot};

use crate::reference::{Installed, assert_same_texts, install, lowest_cosine, skip};

/// The smallest cosine between cairn's vector (f32 sums over f16 weights) and the numpy
/// reference's (f32 weights).
const MIN_COSINE: f32 = 0.999;

const QUERY: &str = "task: search result | query: ";
const DOCUMENT: &str = "title: none | text: ";

fn fixture() -> Option<&'static Installed> {
    static FIXTURE: OnceLock<Option<Installed>> = OnceLock::new();
    FIXTURE
        .get_or_init(|| {
            let Some(source) = test_gemma_dir() else {
                skip("CAIRN_REQUIRE_GEMMA", "EmbeddingGemma folder", "scripts/install-test-deps.sh gemma");
                return None;
            };
            Some(install(&EMBEDDINGGEMMA_300M, &source, include_str!("../fixtures/gemma-reference.json")))
        })
        .as_ref()
}

fn prefix(case: &serde_json::Value) -> &'static str {
    if case["prompt"] == "query" { QUERY } else { DOCUMENT }
}

#[test]
fn the_reference_holds_the_fixture_texts() {
    assert_same_texts(
        include_str!("../fixtures/gemma-texts.json"),
        include_str!("../fixtures/gemma-reference.json"),
        "scripts/embeddinggemma-reference.py --fixture",
    );
}

#[test]
fn token_ids_equal_the_reference() {
    let Some(f) = fixture() else { return };
    for case in &f.cases {
        let text = case["text"].as_str().unwrap();
        let expected: Vec<u32> = serde_json::from_value(case["ids"].clone()).unwrap();
        assert_eq!(f.model.tokenize(&format!("{}{text}", prefix(case))).unwrap(), expected, "{text:?}");
    }
}

#[test]
fn vectors_are_within_a_cosine_of_the_reference() {
    let Some(f) = fixture() else { return };
    let worst = lowest_cosine(&f.cases, 768, |case| {
        let text = case["text"].as_str().unwrap();
        if case["prompt"] == "query" {
            let query = f.model.embed_queries(&[text]).unwrap().remove(0);
            // A short query's products are split across two threads: the same sums, the same bits.
            assert_eq!(query, f.model.embed_one(&format!("{QUERY}{text}")).unwrap(), "{text:?}");
            query
        } else {
            f.model.embed(&[text]).unwrap().remove(0)
        }
    });
    assert!(worst.0 >= MIN_COSINE, "cosine {} for {}", worst.0, worst.1);
}

#[test]
fn the_model_card_example_ranks_as_published() {
    let Some(f) = fixture() else { return };
    let query = f.model.embed_queries(&["Which planet is known as the Red Planet?"]).unwrap().remove(0);
    let documents = f
        .model
        .embed(&[
            "Venus is often called Earth's twin because of its similar size and proximity.",
            "Mars, known for its reddish appearance, is often referred to as the Red Planet.",
            "Jupiter, the largest planet in our solar system, has a prominent red spot.",
            "Saturn, famous for its rings, is sometimes mistaken for the Red Planet.",
        ])
        .unwrap();
    // The model card's published similarities (sentence-transformers on the same weights).
    let published = [0.3011, 0.6359, 0.4930, 0.4889];
    for (document, expected) in documents.iter().zip(published) {
        let got = f64::from(dot(&query, document));
        assert!((got - expected).abs() < 0.003, "similarity {got:.4}, published {expected}");
    }
}

#[test]
fn the_model_knows_its_prompts_and_length() {
    let Some(f) = fixture() else { return };
    assert_eq!(f.model.model_id(), "embeddinggemma-300m");
    assert_eq!(f.model.prefixes(), (Some(QUERY), Some(DOCUMENT)));
    assert_eq!(f.model.dims(), 768);
    let long = "word ".repeat(3_000);
    let ids = f.model.tokenize(&long).unwrap();
    assert_eq!(ids.len(), 512, "cut at the sliding window");
    assert_eq!((ids[0], ids[511]), (2, 1), "<bos> … <eos> kept when cut");
}

#[test]
fn a_copy_with_a_changed_file_is_refused_and_installs_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("copy");
    for file in EMBEDDINGGEMMA_300M.files {
        let path = copy.join(file.name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"{}").unwrap();
    }
    let dest = tmp.path().join("models/embeddinggemma-300m");
    let err = install_from_dir(&EMBEDDINGGEMMA_300M, &copy, &dest, &mut |_, _, _| {}).unwrap_err();
    assert!(matches!(err, cairn_embed::EmbedError::ChecksumMismatch { .. }), "{err}");
    assert!(!dest.exists());
    // A folder without the dense layers says what is missing.
    std::fs::remove_dir_all(copy.join("3_Dense")).unwrap();
    let err = install_from_dir(&EMBEDDINGGEMMA_300M, &copy, &dest, &mut |_, _, _| {}).unwrap_err().to_string();
    assert!(err.contains("3_Dense/model.safetensors"), "{err}");
}
