//! nomic-embed-text-v1.5, installed from its f16 GGUF (`cairn_embed::nomic`), against a second
//! implementation: `scripts/nomic-reference.py` (its own WordPiece tokenizer and a float64
//! numpy forward pass over the same GGUF) ran over `tests/fixtures/nomic-texts.json` and
//! wrote `tests/fixtures/nomic-reference.json` (token ids and vectors).
//!
//! Needs the GGUF (`scripts/install-test-deps.sh nomic`: `target/test-deps/nomic-embed-text-v1.5`,
//! or `CAIRN_TEST_NOMIC_GGUF`). Without it these tests pass with a note, unless
//! `CAIRN_REQUIRE_NOMIC=1`.

use std::sync::OnceLock;

use cairn_embed::Embedder;
use cairn_embed::install::{NOMIC_EMBED_TEXT_V1_5, install_from_dir, test_nomic_gguf};

use crate::reference::{Installed, assert_same_texts, install, lowest_cosine, skip};

/// The smallest cosine between cairn's vector (f32 sums over f16 weights) and the float64
/// reference's.
const MIN_COSINE: f32 = 0.999;

fn fixture() -> Option<&'static Installed> {
    static FIXTURE: OnceLock<Option<Installed>> = OnceLock::new();
    FIXTURE
        .get_or_init(|| {
            let Some(gguf) = test_nomic_gguf() else {
                skip("CAIRN_REQUIRE_NOMIC", "nomic-embed-text GGUF", "scripts/install-test-deps.sh nomic");
                return None;
            };
            Some(install(&NOMIC_EMBED_TEXT_V1_5, &gguf, include_str!("../fixtures/nomic-reference.json")))
        })
        .as_ref()
}

#[test]
fn the_reference_holds_the_fixture_texts() {
    assert_same_texts(
        include_str!("../fixtures/nomic-texts.json"),
        include_str!("../fixtures/nomic-reference.json"),
        "scripts/nomic-reference.py",
    );
}

#[test]
fn token_ids_equal_the_reference() {
    let Some(f) = fixture() else { return };
    for case in &f.cases {
        let text = case["text"].as_str().unwrap();
        let prefix = if case["prompt"] == "query" { "search_query: " } else { "search_document: " };
        let expected: Vec<u32> = serde_json::from_value(case["ids"].clone()).unwrap();
        assert_eq!(f.model.tokenize(&format!("{prefix}{text}")).unwrap(), expected, "{text:?}");
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
            assert_eq!(query, f.model.embed_one(&format!("search_query: {text}")).unwrap(), "{text:?}");
            query
        } else {
            f.model.embed(&[text]).unwrap().remove(0)
        }
    });
    assert!(worst.0 >= MIN_COSINE, "cosine {} for {}", worst.0, worst.1);
}

#[test]
fn the_model_knows_its_prompts_and_length() {
    let Some(f) = fixture() else { return };
    assert_eq!(f.model.model_id(), "nomic-embed-text-v1.5");
    assert_eq!(f.model.prefixes(), (Some("search_query: "), Some("search_document: ")));
    assert_eq!(f.model.dims(), 768);
    let long = "word ".repeat(3_000);
    assert_eq!(f.model.tokenize(&long).unwrap().len(), 2_048);
}

#[test]
fn a_file_that_is_not_the_pinned_one_is_refused_and_installs_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = tmp.path().join("nomic-embed-text-v1.5.f16.gguf");
    std::fs::write(&fake, b"GGUF\x03\x00\x00\x00 not the model").unwrap();
    let dest = tmp.path().join("models/nomic");
    let err = install_from_dir(&NOMIC_EMBED_TEXT_V1_5, &fake, &dest, &mut |_, _, _| {}).unwrap_err();
    assert!(matches!(err, cairn_embed::EmbedError::ChecksumMismatch { .. }), "{err}");
    assert!(!dest.exists());
    // A directory without it says what it looked for.
    let err = install_from_dir(&NOMIC_EMBED_TEXT_V1_5, &tmp.path().join("models"), &dest, &mut |_, _, _| {});
    let err = err.unwrap_err().to_string();
    assert!(err.contains("nomic-embed-text-v1.5.f16.gguf"), "{err}");
    // Neither a GGUF nor a zip.
    let other = tmp.path().join("other.bin");
    std::fs::write(&other, b"\x00\x01 something else").unwrap();
    let err = install_from_dir(&NOMIC_EMBED_TEXT_V1_5, &other, &dest, &mut |_, _, _| {}).unwrap_err().to_string();
    assert!(err.contains("neither a GGUF file nor a zip"), "{err}");
}
