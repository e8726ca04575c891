//! The process's allocator, chosen once by what the process is: glibc's for `cairn hook`,
//! mimalloc for everything else.
//!
//! mimalloc keeps each size class on its own pages, so a short process touches a fresh page per
//! size class it uses: ~70 more page faults than glibc's one contiguous heap for a `cairn hook`,
//! which starts once per agent event and lives a few milliseconds (docs/BENCHMARKS.md, hook
//! speed). The daemon and the commands keep mimalloc: every save allocates and frees a few
//! hundred small blocks on the writer thread, and glibc's per-thread arenas grew and shrank
//! their heaps with an `mprotect` call each time (two per save, measured with strace).
//!
//! The choice is made at the first allocation, before any block exists, from the command line
//! in `/proc/self/cmdline` (read into a stack buffer: the check itself allocates nothing), and it
//! never changes, so every block is freed by the allocator that made it.
//!
//! mimalloc returns a freed block's memory to the system only when the thread that freed it
//! allocates again later. Loading an embedding model reads and converts ~870 MB on a thread of
//! its own that then ends: all of it stayed resident (the daemon with multilingual-e5-small held
//! 1,159 MB instead of ~290 MB). A free of a block this large asks mimalloc at once to give back
//! what its thread no longer uses ([`GIVE_BACK_ABOVE`]).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Read;
use std::sync::atomic::{AtomicU8, Ordering};

use mimalloc::MiMalloc;

/// glibc's allocator for a hook, mimalloc otherwise.
pub struct ByProcess;

const UNDECIDED: u8 = 0;
const SYSTEM: u8 = 1;
const MIMALLOC: u8 = 2;

static CHOICE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// Freeing a block of this size or more gives the thread's unused memory back at once. Only a
/// model's load frees blocks this large (its file, 90–470 MB, and e5's vocabulary table in f32,
/// 384 MB); the daemon's search index at 100,000 memories never holds one, so the save and
/// search paths never pay for a collection.
const GIVE_BACK_ABOVE: usize = 64 << 20;

unsafe extern "C" {
    /// mimalloc's own: free what this thread's heap holds unused and return it to the system
    /// (`force`: now, not after the purge delay). Linked in by the `mimalloc` crate.
    fn mi_collect(force: bool);
}

/// After a large block went back to mimalloc: return its memory to the system now.
#[inline]
fn give_back_if_large(size: usize) {
    if size >= GIVE_BACK_ABOVE {
        // SAFETY: a plain call into the allocator this process uses, with no pointer passed;
        // mimalloc allocates nothing through Rust's allocator, so this does not re-enter it.
        unsafe { mi_collect(true) }
    }
}

/// Whether this process allocates with mimalloc, deciding on the first call.
#[inline]
fn mimalloc() -> bool {
    match CHOICE.load(Ordering::Relaxed) {
        UNDECIDED => decide(),
        choice => choice == MIMALLOC,
    }
}

#[cold]
fn decide() -> bool {
    let choice = if is_hook(&command_line()) { SYSTEM } else { MIMALLOC };
    // The first allocation happens on the main thread before any other thread exists; should
    // two ever race, both read the same command line and agree.
    CHOICE.store(choice, Ordering::Relaxed);
    choice == MIMALLOC
}

/// The start of this process's NUL-separated arguments, read without allocating (a path this
/// short is made a C string on the stack); empty when `/proc` is not there.
fn command_line() -> CommandLine {
    let mut line = CommandLine { bytes: [0; 64], len: 0 };
    if let Ok(mut file) = std::fs::File::open("/proc/self/cmdline") {
        line.len = file.read(&mut line.bytes).unwrap_or(0);
    }
    line
}

struct CommandLine {
    bytes: [u8; 64],
    len: usize,
}

/// `cairn hook …`: the second argument is `hook`.
fn is_hook(line: &CommandLine) -> bool {
    line.bytes[..line.len].split(|b| *b == 0).nth(1) == Some(b"hook".as_slice())
}

// SAFETY: every call goes to one of two sound allocators, and always the same one for the life
// of the process (the choice above is made before the first block and never changes), so each
// block is freed or resized by the allocator that made it.
unsafe impl GlobalAlloc for ByProcess {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { if mimalloc() { MiMalloc.alloc(layout) } else { System.alloc(layout) } }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { if mimalloc() { MiMalloc.alloc_zeroed(layout) } else { System.alloc_zeroed(layout) } }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if mimalloc() {
            // SAFETY: `ptr` came from mimalloc (see above).
            unsafe { MiMalloc.dealloc(ptr, layout) };
            give_back_if_large(layout.size());
        } else {
            // SAFETY: `ptr` came from the system allocator (see above).
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if mimalloc() {
            // SAFETY: `ptr` came from mimalloc (see above).
            let moved = unsafe { MiMalloc.realloc(ptr, layout, new_size) };
            // A large block grown into a new place, or shrunk, left memory behind.
            give_back_if_large(layout.size());
            moved
        } else {
            // SAFETY: `ptr` came from the system allocator (see above).
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(args: &[&str]) -> CommandLine {
        let mut line = CommandLine { bytes: [0; 64], len: 0 };
        let joined: Vec<u8> = args.iter().flat_map(|a| a.bytes().chain([0])).collect();
        let n = joined.len().min(64);
        line.bytes[..n].copy_from_slice(&joined[..n]);
        line.len = n;
        line
    }

    #[test]
    fn only_cairn_hook_gets_the_system_allocator() {
        assert!(is_hook(&line(&["/usr/local/bin/cairn", "hook", "SessionStart"])));
        assert!(is_hook(&line(&["cairn", "hook"])));
        assert!(!is_hook(&line(&["cairn", "serve", "--port", "0"])));
        assert!(!is_hook(&line(&["cairn", "hooks"])));
        // a flag first: clap's path, with mimalloc, which serves a hook as well
        assert!(!is_hook(&line(&["cairn", "--json", "hook", "Stop"])));
        assert!(!is_hook(&line(&[])));
        assert!(!is_hook(&line(&["hook"])), "the program's own name is not an argument");
    }

    /// A large block freed on a thread that then ends is given back to the system: the
    /// process's resident memory falls back near where it was (without the collection, the
    /// 256 MiB stayed resident after the thread ended).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_large_block_freed_by_a_thread_that_ends_is_given_back() {
        if !mimalloc() {
            return; // the test binary's own name never makes it a hook; kept for clarity
        }
        let before = resident_kib();
        std::thread::spawn(|| {
            let mut block = vec![1u8; 256 << 20];
            std::hint::black_box(&mut block);
            drop(block);
        })
        .join()
        .unwrap();
        let after = resident_kib();
        assert!(after < before + (64 << 10), "resident {before} kB before, {after} kB after the thread ended");
    }

    #[cfg(target_os = "linux")]
    fn resident_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    #[test]
    fn the_choice_is_made_by_the_first_allocation_from_the_command_line() {
        let allocated = std::hint::black_box(Box::new([1u8; 10]));
        drop(allocated);
        let expected = if is_hook(&command_line()) { SYSTEM } else { MIMALLOC };
        assert_eq!(CHOICE.load(Ordering::Relaxed), expected);
    }
}
