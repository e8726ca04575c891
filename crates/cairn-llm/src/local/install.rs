//! Installing a local model's GGUF into the models dir: copied from a file the user has, or
//! downloaded, streamed through sha256 into `<file>.partial` and renamed into place only when the
//! checksum matches. A file under its final name is therefore always a verified one; an
//! interrupted or refused install leaves at most a `.partial`, which the next install replaces.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::catalogue::LocalModelSpec;
use crate::LlmError;

/// Where `spec` is installed in `models_dir`, when it is (present under its name, with its size:
/// only a checked file is ever renamed to that name).
pub fn installed_path(spec: &LocalModelSpec, models_dir: &Path) -> Option<PathBuf> {
    let path = models_dir.join(spec.file_name);
    let size = std::fs::metadata(&path).ok()?.len();
    (size == spec.bytes).then_some(path)
}

/// Install `spec` from a copy the user has (`cairn llm use local --from FILE`): the copy is
/// checked against the pinned sha256 while it is copied; any other file is refused and nothing
/// is installed.
pub fn install_from_file(spec: &LocalModelSpec, file: &Path, models_dir: &Path) -> Result<PathBuf, LlmError> {
    let source =
        std::fs::File::open(file).map_err(|e| LlmError::ModelFile(format!("cannot read {}: {e}", file.display())))?;
    let origin = file.display().to_string();
    install_from_reader(spec, Box::new(source), &origin, models_dir, &|_, _| {})
}

/// Download `spec` from its URL into `models_dir`, reporting `(bytes so far, total)`.
#[cfg(feature = "remote")]
pub fn install_download(
    spec: &LocalModelSpec,
    models_dir: &Path,
    progress: &dyn Fn(u64, u64),
) -> Result<PathBuf, LlmError> {
    if spec.url.is_empty() {
        return Err(LlmError::ModelFile(format!(
            "cairn knows no download of {} ({}); get the file ({}) and install it with: \
             cairn llm use local --model {} --from FILE",
            spec.name, spec.file_name, spec.also_from, spec.name
        )));
    }
    let agent = ureq::Agent::config_builder()
        .timeout_global(Some(std::time::Duration::from_secs(3600)))
        .user_agent(concat!("cairn/", env!("CARGO_PKG_VERSION")))
        .tls_config(ureq::tls::TlsConfig::builder().root_certs(ureq::tls::RootCerts::PlatformVerifier).build())
        .build()
        .new_agent();
    let response = agent.get(spec.url).call().map_err(|e| {
        LlmError::Unavailable(format!(
            "GET {}: {e}; or install from a copy: cairn llm use local --model {} --from FILE",
            spec.url, spec.name
        ))
    })?;
    install_from_reader(spec, Box::new(response.into_body().into_reader()), spec.url, models_dir, progress)
}

/// Stream `reader` into `<models_dir>/<file>.partial` through sha256, then rename it into place.
/// On any failure the partial file is removed and an installed copy is left as it was.
pub(crate) fn install_from_reader(
    spec: &LocalModelSpec,
    reader: Box<dyn Read + '_>,
    origin: &str,
    models_dir: &Path,
    progress: &dyn Fn(u64, u64),
) -> Result<PathBuf, LlmError> {
    std::fs::create_dir_all(models_dir)
        .map_err(|e| LlmError::ModelFile(format!("cannot create {}: {e}", models_dir.display())))?;
    let path = models_dir.join(spec.file_name);
    let partial = models_dir.join(format!("{}.partial", spec.file_name));
    let result = copy_hashed(reader, &partial, spec.bytes, progress).and_then(|actual| {
        if actual == spec.sha256 {
            Ok(())
        } else {
            Err(LlmError::ModelFile(format!(
                "{origin} is not {} ({}): its sha256 is {actual}, the pinned one is {}; nothing was installed. \
                 Download the file again, or name the right one: cairn llm use local --model {} --from FILE",
                spec.name, spec.file_name, spec.sha256, spec.name
            )))
        }
    });
    if let Err(e) = result {
        let _ = std::fs::remove_file(&partial);
        return Err(e);
    }
    std::fs::rename(&partial, &path).map_err(|e| {
        let _ = std::fs::remove_file(&partial);
        LlmError::ModelFile(format!("cannot move the model into {}: {e}", path.display()))
    })?;
    Ok(path)
}

/// Copy `reader` into `to` (synced to disk), returning the sha256 of what was copied.
fn copy_hashed(
    mut reader: Box<dyn Read + '_>,
    to: &Path,
    total: u64,
    progress: &dyn Fn(u64, u64),
) -> Result<String, LlmError> {
    let write_error = |e: std::io::Error| LlmError::ModelFile(format!("cannot write {}: {e}", to.display()));
    let mut out = std::fs::File::create(to).map_err(write_error)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut copied = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(LlmError::ModelFile(format!("reading the model: {e}"))),
        };
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(write_error)?;
        copied += n as u64;
        progress(copied, total);
    }
    out.sync_all().map_err(write_error)?;
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_of(content: &[u8]) -> LocalModelSpec {
        let sha256: String = Sha256::digest(content).iter().map(|b| format!("{b:02x}")).collect();
        LocalModelSpec {
            sha256: Box::leak(sha256.into_boxed_str()),
            bytes: content.len() as u64,
            file_name: "tiny.gguf",
            ..super::super::catalogue::SMOLLM2_135M
        }
    }

    #[test]
    fn a_matching_file_is_installed_under_its_name_and_found() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("download.gguf");
        std::fs::write(&source, b"GGUF weights").unwrap();
        let spec = spec_of(b"GGUF weights");
        let models = dir.path().join("models");
        assert_eq!(installed_path(&spec, &models), None);
        let path = install_from_file(&spec, &source, &models).unwrap();
        assert_eq!(path, models.join("tiny.gguf"));
        assert_eq!(std::fs::read(&path).unwrap(), b"GGUF weights");
        assert_eq!(installed_path(&spec, &models), Some(path));
        assert!(!models.join("tiny.gguf.partial").exists());
    }

    #[test]
    fn a_file_with_another_checksum_is_refused_and_the_installed_copy_kept() {
        let dir = tempfile::tempdir().unwrap();
        let models = dir.path().join("models");
        let spec = spec_of(b"GGUF weights");
        let good = dir.path().join("good.gguf");
        std::fs::write(&good, b"GGUF weights").unwrap();
        install_from_file(&spec, &good, &models).unwrap();
        let bad = dir.path().join("bad.gguf");
        std::fs::write(&bad, b"GGUF weightz").unwrap();
        let err = install_from_file(&spec, &bad, &models).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, LlmError::ModelFile(_)), "{text}");
        assert!(text.contains(spec.sha256) && text.contains("--from FILE"), "{text}");
        assert_eq!(std::fs::read(models.join("tiny.gguf")).unwrap(), b"GGUF weights");
        assert!(!models.join("tiny.gguf.partial").exists());
    }

    #[test]
    fn a_missing_source_says_which_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = install_from_file(&spec_of(b"x"), &dir.path().join("nope.gguf"), dir.path()).unwrap_err();
        assert!(err.to_string().contains("nope.gguf"), "{err}");
    }
}
