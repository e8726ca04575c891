//! What the tests of a model against a second implementation share: the fixture's texts checked
//! against the reference's, a skip that says why (or fails when the model is required), and
//! the lowest cosine over the reference's vectors.

use cairn_embed::install::{ModelSpec, install_from_dir};
use cairn_embed::{LocalModel, dot};

/// A model installed into a temp data dir from a local copy (the way `cairn model install
/// --from` does: every file checked, converted where the model is), loaded, with the
/// reference's cases.
pub struct Installed {
    pub model: LocalModel,
    pub cases: Vec<serde_json::Value>,
    _dir: tempfile::TempDir,
}

/// Install `spec` from `source`, load it, read the reference's cases (`reference`: its JSON).
pub fn install(spec: &ModelSpec, source: &std::path::Path, reference: &str) -> Installed {
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("models").join(spec.id);
    install_from_dir(spec, source, &dest, &mut |_, _, _| {}).expect("the local copy installs");
    let model = LocalModel::load(&dest).expect("the installed model loads");
    let json: serde_json::Value = serde_json::from_str(reference).unwrap();
    Installed { model, cases: json["cases"].as_array().unwrap().clone(), _dir: tmp }
}

/// `None` with a note when the model's files are absent, unless `require` (an env variable) is
/// set, which makes their absence a failure.
pub fn skip(require: &str, what: &str, install: &str) {
    assert!(std::env::var_os(require).is_none(), "{require} is set but there is no {what} (run {install})");
    #[allow(clippy::print_stderr)] // a test saying why it did not run
    {
        eprintln!("note: no {what} in target/test-deps; skipping ({install})");
    }
}

/// The reference was computed over exactly the fixture's texts, in order.
pub fn assert_same_texts(texts: &str, reference: &str, script: &str) {
    let texts: serde_json::Value = serde_json::from_str(texts).unwrap();
    let reference: serde_json::Value = serde_json::from_str(reference).unwrap();
    let (texts, cases) = (texts["texts"].as_array().unwrap(), reference["cases"].as_array().unwrap());
    assert_eq!(texts.len(), cases.len(), "re-run {script}");
    for (text, case) in texts.iter().zip(cases) {
        assert_eq!((&text["text"], &text["prompt"]), (&case["text"], &case["prompt"]), "re-run {script}");
    }
}

/// The lowest cosine between `embed(case)` and each case's reference vector (all `dims` long),
/// printed for the record, with the text it was found for.
pub fn lowest_cosine(
    cases: &[serde_json::Value],
    dims: usize,
    embed: impl Fn(&serde_json::Value) -> Vec<f32>,
) -> (f32, String) {
    let mut worst = (1f32, String::new());
    for case in cases {
        let got = embed(case);
        let expected: Vec<f32> = serde_json::from_value(case["vector"].clone()).unwrap();
        assert_eq!(got.len(), dims);
        let cosine = dot(&got, &expected);
        if cosine < worst.0 {
            worst = (cosine, format!("{:?}", case["text"].as_str().unwrap_or_default()));
        }
    }
    #[allow(clippy::print_stderr)] // the margin, for the record
    {
        eprintln!("lowest cosine with the reference: {:.6} ({})", worst.0, worst.1);
    }
    worst
}
