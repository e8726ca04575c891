//! The local model against an independent reference: `tests/fixtures/reference.py` runs Hugging
//! Face's `tokenizers` library and a float64 numpy BERT over the same files
//! (`python reference.py MODEL_DIR sentences.json minilm-reference.json`).
//!
//! Needs the model files: `CAIRN_TEST_MODEL_DIR`, else `target/test-deps/all-MiniLM-L6-v2`
//! (`scripts/install-test-deps.sh` puts them there). Without them these tests pass with a
//! note, unless `CAIRN_REQUIRE_MODEL=1` (set by `scripts/test`), where that is a failure.

use std::path::PathBuf;
use std::sync::OnceLock;

use cairn_embed::{Embedder, LocalModel, dot};

fn model_dir() -> Option<PathBuf> {
    let dir = cairn_embed::install::test_model_dir();
    if cairn_embed::is_model_dir(&dir) {
        return Some(dir);
    }
    assert!(
        std::env::var_os("CAIRN_REQUIRE_MODEL").is_none(),
        "CAIRN_REQUIRE_MODEL is set but there is no model in {} (run scripts/install-test-deps.sh)",
        dir.display()
    );
    #[allow(clippy::print_stderr)] // a test saying why it did not run
    {
        eprintln!("note: no model in {}; skipping (scripts/install-test-deps.sh installs it)", dir.display());
    }
    None
}

fn model() -> Option<&'static LocalModel> {
    static MODEL: OnceLock<Option<LocalModel>> = OnceLock::new();
    MODEL.get_or_init(|| model_dir().map(|d| LocalModel::load(&d).expect("the test model loads"))).as_ref()
}

fn reference() -> serde_json::Value {
    serde_json::from_str(include_str!("../fixtures/minilm-reference.json")).unwrap()
}

#[test]
fn tokens_match_the_tokenizers_library() {
    let Some(model) = model() else { return };
    for case in reference()["tokens"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let expected: Vec<u32> = serde_json::from_value(case["ids"].clone()).unwrap();
        assert_eq!(model.tokenize(text).unwrap(), expected, "tokens of {text:?}");
    }
}

#[test]
fn vectors_match_the_numpy_reference() {
    let Some(model) = model() else { return };
    let (mut lowest, mut largest) = (1f32, 0f32);
    for case in reference()["sentences"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let expected: Vec<f32> = serde_json::from_value(case["vector"].clone()).unwrap();
        let got = model.embed(&[text]).unwrap().remove(0);
        assert_eq!(got.len(), 384);
        let cosine = dot(&got, &expected);
        assert!(cosine > 1.0 - 1e-4, "{text:?}: cosine with the reference {cosine}");
        let worst = got.iter().zip(&expected).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst < 1e-4, "{text:?}: largest difference {worst}");
        // A query (MiniLM has no prompt) takes the two-thread path: the same sums, the same bits.
        assert_eq!(model.embed_queries(&[text]).unwrap().remove(0), got, "{text:?} as a query");
        (lowest, largest) = (lowest.min(cosine), largest.max(worst));
    }
    #[allow(clippy::print_stderr)] // the margin, for whoever changes the encoder
    {
        eprintln!("lowest cosine with the reference {lowest:.7}, largest difference {largest:.2e}");
    }
}

#[test]
fn similar_sentences_score_higher_than_unrelated_ones() {
    let Some(model) = model() else { return };
    let v = model
        .embed(&["How do I run the test suite?", "Use cargo nextest to execute all tests.", "The cat sat on the mat."])
        .unwrap();
    let (related, unrelated) = (dot(&v[0], &v[1]), dot(&v[0], &v[2]));
    assert!((related - 0.530).abs() < 1e-3, "{related}");
    assert!(unrelated < 0.1, "{unrelated}");
    assert!((dot(&v[0], &v[0]) - 1.0).abs() < 1e-5);
}

#[test]
fn long_and_empty_texts_embed_without_error() {
    let Some(model) = model() else { return };
    let long = "word ".repeat(20_000);
    let v = model.embed(&[&long, "", "!!!"]).unwrap();
    assert!(v.iter().all(|x| x.len() == 384 && x.iter().all(|f| f.is_finite())));
}

#[test]
fn model_id_comes_from_the_directory() {
    let Some(model) = model() else { return };
    assert!(!model.model_id().is_empty());
}

#[test]
fn a_missing_or_broken_model_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let err = LocalModel::load(tmp.path()).unwrap_err();
    assert!(err.to_string().contains("config.json is missing"), "{err}");
    std::fs::write(tmp.path().join("config.json"), b"{\"hidden_size\": 4}").unwrap();
    let err = LocalModel::load(tmp.path()).unwrap_err();
    assert!(err.to_string().contains("config.json"), "{err}");
    let Some(dir) = model_dir() else { return };
    std::fs::copy(dir.join("config.json"), tmp.path().join("config.json")).unwrap();
    // A tokenizer.json of another program.
    std::fs::write(tmp.path().join("tokenizer.json"), b"{\"model\": {\"type\": \"Mystery\"}}").unwrap();
    let err = LocalModel::load(tmp.path()).unwrap_err();
    assert!(err.to_string().contains("unusable: tokenizer.json:"), "{err}");
    std::fs::copy(dir.join("tokenizer.json"), tmp.path().join("tokenizer.json")).unwrap();
    // A truncated weights file.
    let weights = std::fs::read(dir.join("model.safetensors")).unwrap();
    std::fs::write(tmp.path().join("model.safetensors"), &weights[..weights.len() / 2]).unwrap();
    let err = LocalModel::load(tmp.path()).unwrap_err();
    assert!(err.to_string().contains("truncated"), "{err}");
}
