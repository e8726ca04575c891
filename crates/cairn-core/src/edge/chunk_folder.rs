//! The files of a repository's chunk folder (`.cairn/`, `.engram/`), opened so that nothing
//! committed to the repository makes sync read or write outside it, wait forever, or run out of
//! memory.
//!
//! git commits symbolic links, so a pulled folder can hold one where the folder, its manifest or
//! a chunk belongs (a link to `/dev/zero`, to a foreign `manifest.json`). Each step below the
//! repository is opened relative to its parent's descriptor with `O_NOFOLLOW` (the folder itself
//! included): no link is followed, and nothing can be swapped between a check and the open.
//! Files are opened with `O_NONBLOCK` (a FIFO would otherwise wait for a writer forever) and must
//! be regular files by `fstat` of what was opened; their size is checked against a cap before a
//! byte is read, and reads are bounded again, in case the file grows meanwhile.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{CairnError, ErrorCode, Result};

/// One folder of the repository's chunk folder tree, opened without following a link.
pub(crate) struct Folder {
    dir: sys::Dir,
    /// For messages only: every access goes through `dir`.
    path: PathBuf,
}

impl Folder {
    /// The folder `name` of the repository `repo`; `None` when there is none.
    pub(crate) fn open(repo: &Path, name: &str) -> Result<Option<Folder>> {
        let root = sys::Dir::open_root(repo).map_err(|e| io_error(repo, &e))?;
        Folder { dir: root, path: repo.to_owned() }.subfolder(name)
    }

    /// The folder `name` of the repository `repo`, made when missing.
    pub(crate) fn create(repo: &Path, name: &str) -> Result<Folder> {
        let root = sys::Dir::open_root(repo).map_err(|e| io_error(repo, &e))?;
        Folder { dir: root, path: repo.to_owned() }.create_subfolder(name)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The folder `name` in this one; `None` when there is none.
    pub(crate) fn subfolder(&self, name: &str) -> Result<Option<Folder>> {
        let path = self.path.join(name);
        match self.dir.open_dir(name) {
            Ok(dir) => Ok(Some(Folder { dir, path })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(refusal(&path, &e, self.dir.is_link(name), "a folder")),
        }
    }

    /// The folder `name` in this one, made when missing (a link there is refused, not
    /// followed).
    pub(crate) fn create_subfolder(&self, name: &str) -> Result<Folder> {
        let path = self.path.join(name);
        match self.dir.make_dir(name) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_error(&path, &e)),
        }
        self.subfolder(name)?.ok_or_else(|| io_error(&path, &io::Error::from(io::ErrorKind::NotFound)))
    }

    /// The regular file `name` of this folder, opened for reading, at most `cap` bytes long;
    /// `None` when there is none.
    pub(crate) fn open_file(&self, name: &str, cap: u64) -> Result<Option<File>> {
        let path = self.path.join(name);
        let file = match self.dir.open_file(name) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(refusal(&path, &e, self.dir.is_link(name), "a regular file")),
        };
        // The type and size of what was opened, not of what the name pointed to before.
        let meta = file.metadata().map_err(|e| io_error(&path, &e))?;
        if !meta.is_file() {
            return Err(not_regular(&path, meta.file_type(), "a regular file"));
        }
        if meta.len() > cap {
            return Err(too_large(&path, meta.len(), cap));
        }
        Ok(Some(file))
    }

    /// The content of the regular file `name`, at most `cap` bytes; `None` when there is none.
    pub(crate) fn read_file(&self, name: &str, cap: u64) -> Result<Option<Vec<u8>>> {
        let Some(file) = self.open_file(name, cap)? else { return Ok(None) };
        let path = self.path.join(name);
        let mut bytes = Vec::new();
        // The size was checked; a file growing since is cut at one byte past the cap.
        file.take(cap.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| io_error(&path, &e))?;
        if bytes.len() as u64 > cap {
            return Err(too_large(&path, bytes.len() as u64, cap));
        }
        Ok(Some(bytes))
    }

    /// Write `name` through a temporary file and a rename: a reader (or a crash) never sees half
    /// a file. The temporary file is made new (a link or file left under its name is removed,
    /// never written through); the rename replaces a link at `name` rather than follow it.
    pub(crate) fn write_atomically(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let tmp = Path::new(name).with_extension("tmp");
        let tmp = tmp.to_str().unwrap_or(name);
        let tmp_path = self.path.join(tmp);
        let mut file = match self.dir.create_new(tmp) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                self.dir.remove(tmp).map_err(|e| io_error(&tmp_path, &e))?;
                self.dir.create_new(tmp)
            }
            other => other,
        }
        .map_err(|e| io_error(&tmp_path, &e))?;
        file.write_all(bytes).map_err(|e| io_error(&tmp_path, &e))?;
        drop(file);
        self.dir.rename(tmp, name).map_err(|e| io_error(&self.path.join(name), &e))
    }
}

/// Why `path` could not be opened as `expected`: a link or another kind of file is refused with
/// its own code, anything else is an I/O failure. (`is_link` only words the refusal: the open
/// itself followed nothing.)
fn refusal(path: &Path, e: &io::Error, is_link: bool, expected: &str) -> CairnError {
    if sys::is_symlink_refusal(e) || is_link {
        return CairnError::new(
            ErrorCode::SyncSymlinkRefused,
            format!("{} is a symbolic link; sync follows no link in a chunk folder", path.display()),
        )
        .with_hint("git commits links as they are: replace it with the real file or folder, or remove it");
    }
    if sys::is_not_a_directory(e) {
        return CairnError::new(
            ErrorCode::SyncFileNotRegular,
            format!("{} is not {expected}: sync reads only folders and regular files there", path.display()),
        );
    }
    io_error(path, e)
}

fn not_regular(path: &Path, kind: std::fs::FileType, expected: &str) -> CairnError {
    CairnError::new(
        ErrorCode::SyncFileNotRegular,
        format!("{} is {}, not {expected}: sync reads only regular files there", path.display(), describe(kind)),
    )
    .with_hint("a chunk folder holds manifest.json and chunks/*.jsonl.gz as plain files")
}

/// What kind of file it is, for people.
fn describe(kind: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_block_device() || kind.is_char_device() {
            return "a device";
        }
    }
    if kind.is_dir() {
        "a folder"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else {
        "a special file"
    }
}

pub(crate) fn too_large(path: &Path, size: u64, cap: u64) -> CairnError {
    CairnError::new(
        ErrorCode::SyncFileTooLarge,
        format!("{} is {} bytes or more; sync reads at most {cap} bytes there", path.display(), size),
    )
    .with_hint("it is not a file cairn or engram wrote: remove it from the manifest and the folder")
}

fn io_error(path: &Path, e: &io::Error) -> CairnError {
    CairnError::internal(format!("{}: {e}", path.display()))
}

#[cfg(unix)]
mod sys {
    //! Every open relative to the parent folder's descriptor, `O_NOFOLLOW`, `O_NONBLOCK`.

    use std::fs::File;
    use std::io;
    use std::os::fd::OwnedFd;
    use std::path::Path;

    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    use rustix::io::Errno;

    pub(super) struct Dir(OwnedFd);

    impl Dir {
        /// The repository itself: the caller's path, links in it followed as anywhere else.
        pub(super) fn open_root(path: &Path) -> io::Result<Dir> {
            Ok(Dir(rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?))
        }

        pub(super) fn open_dir(&self, name: &str) -> io::Result<Dir> {
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
            Ok(Dir(rustix::fs::openat(&self.0, name, flags, Mode::empty())?))
        }

        pub(super) fn open_file(&self, name: &str) -> io::Result<File> {
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
            let fd = rustix::fs::openat(&self.0, name, flags, Mode::empty())?;
            Ok(File::from(fd))
        }

        pub(super) fn make_dir(&self, name: &str) -> io::Result<()> {
            Ok(rustix::fs::mkdirat(&self.0, name, Mode::from_raw_mode(0o755))?)
        }

        /// A new file (never an existing one, never through a link), for writing.
        pub(super) fn create_new(&self, name: &str) -> io::Result<File> {
            let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd = rustix::fs::openat(&self.0, name, flags, Mode::from_raw_mode(0o644))?;
            Ok(File::from(fd))
        }

        pub(super) fn remove(&self, name: &str) -> io::Result<()> {
            Ok(rustix::fs::unlinkat(&self.0, name, AtFlags::empty())?)
        }

        pub(super) fn rename(&self, from: &str, to: &str) -> io::Result<()> {
            Ok(rustix::fs::renameat(&self.0, from, &self.0, to)?)
        }

        /// Whether `name` is a link (a folder opened with `O_NOFOLLOW` through a link fails
        /// with `ENOTDIR`, not `ELOOP`).
        pub(super) fn is_link(&self, name: &str) -> bool {
            rustix::fs::statat(&self.0, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
        }
    }

    /// `O_NOFOLLOW` met a link: `ELOOP` (`EMLINK` on FreeBSD).
    pub(super) fn is_symlink_refusal(e: &io::Error) -> bool {
        let raw = e.raw_os_error();
        raw == Some(Errno::LOOP.raw_os_error()) || raw == Some(Errno::MLINK.raw_os_error())
    }

    pub(super) fn is_not_a_directory(e: &io::Error) -> bool {
        e.raw_os_error() == Some(Errno::NOTDIR.raw_os_error())
    }
}

#[cfg(not(unix))]
mod sys {
    //! Without `openat`: each name is checked with `symlink_metadata` before it is opened. A link
    //! swapped in between is not caught here, as it is on unix.

    use std::fs::{File, OpenOptions};
    use std::io;
    use std::path::{Path, PathBuf};

    pub(super) struct Dir(PathBuf);

    /// A link met where none is followed.
    fn link_refused() -> io::Error {
        io::Error::other(LinkRefused)
    }

    #[derive(Debug)]
    struct LinkRefused;

    impl std::fmt::Display for LinkRefused {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a symbolic link")
        }
    }

    impl std::error::Error for LinkRefused {}

    impl Dir {
        pub(super) fn open_root(path: &Path) -> io::Result<Dir> {
            if std::fs::metadata(path)?.is_dir() { Ok(Dir(path.to_owned())) } else { Err(not_a_directory()) }
        }

        fn no_link(&self, name: &str) -> io::Result<PathBuf> {
            let path = self.0.join(name);
            if std::fs::symlink_metadata(&path)?.file_type().is_symlink() {
                return Err(link_refused());
            }
            Ok(path)
        }

        pub(super) fn open_dir(&self, name: &str) -> io::Result<Dir> {
            let path = self.no_link(name)?;
            if std::fs::symlink_metadata(&path)?.is_dir() { Ok(Dir(path)) } else { Err(not_a_directory()) }
        }

        pub(super) fn open_file(&self, name: &str) -> io::Result<File> {
            File::open(self.no_link(name)?)
        }

        pub(super) fn make_dir(&self, name: &str) -> io::Result<()> {
            std::fs::create_dir(self.0.join(name))
        }

        pub(super) fn create_new(&self, name: &str) -> io::Result<File> {
            OpenOptions::new().write(true).create_new(true).open(self.0.join(name))
        }

        pub(super) fn remove(&self, name: &str) -> io::Result<()> {
            std::fs::remove_file(self.0.join(name))
        }

        pub(super) fn rename(&self, from: &str, to: &str) -> io::Result<()> {
            std::fs::rename(self.0.join(from), self.0.join(to))
        }

        pub(super) fn is_link(&self, name: &str) -> bool {
            std::fs::symlink_metadata(self.0.join(name)).is_ok_and(|m| m.file_type().is_symlink())
        }
    }

    fn not_a_directory() -> io::Error {
        io::Error::other(NotADirectory)
    }

    #[derive(Debug)]
    struct NotADirectory;

    impl std::fmt::Display for NotADirectory {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("not a folder")
        }
    }

    impl std::error::Error for NotADirectory {}

    pub(super) fn is_symlink_refusal(e: &io::Error) -> bool {
        e.get_ref().is_some_and(|inner| inner.is::<LinkRefused>())
    }

    pub(super) fn is_not_a_directory(e: &io::Error) -> bool {
        e.get_ref().is_some_and(|inner| inner.is::<NotADirectory>())
    }
}
