//! Core's own edges: code that writes files outside the data dir, kept apart from the rules so
//! a reader of the rules meets no file I/O. [`obsidian`] writes the store as an Obsidian vault;
//! `chunk_folder` reads and writes git sync's chunk folders in a repository.

pub(crate) mod chunk_folder;
pub mod obsidian;
