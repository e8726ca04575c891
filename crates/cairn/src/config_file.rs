//! Editing the data dir's `config.toml` from commands (`cairn model use`, `cairn remote add`):
//! read as a TOML document so comments and order stay, and written whole (a temporary file
//! renamed over) with mode 0600, since it may hold tokens (`http_token`, `embed_api_key`,
//! `[sync] token`).

use std::path::Path;

use anyhow::Result;
use cairn_core::{CairnError, ErrorCode};
use toml_edit::DocumentMut;

/// The file as a document; an empty one when it does not exist yet.
pub fn read(path: &Path) -> Result<DocumentMut> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(
                CairnError::new(ErrorCode::InvalidConfig, format!("cannot read {}: {e}", path.display())).into()
            );
        }
    };
    text.parse().map_err(|e: toml_edit::TomlError| {
        CairnError::new(ErrorCode::InvalidConfig, format!("{} is not valid TOML: {}", path.display(), e.message()))
            .with_hint("fix the file, then run the command again")
            .into()
    })
}

/// Write `doc` over the file, readable by its owner only, whole or not at all.
pub fn write(path: &Path, doc: &DocumentMut) -> Result<()> {
    let tmp = path.with_extension("toml.partial");
    let attempt = || -> std::io::Result<()> {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        std::io::Write::write_all(&mut options.open(&tmp)?, doc.to_string().as_bytes())?;
        // A partial file left by an older run keeps its mode: set it again.
        #[cfg(unix)]
        std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        std::fs::rename(&tmp, path)
    };
    attempt().map_err(|e| {
        CairnError::new(ErrorCode::DataDirNotWritable, format!("cannot write {}: {e}", path.display())).into()
    })
}
