//! Link flags for the `cairn` binary.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu {
        // A fixed-address executable: the dynamic loader then has none of the ~30,000 relative
        // relocations to apply, nor the ~200 pages of `.data.rel.ro` to copy on write, at every
        // start. `cairn hook` starts once per agent event, and this is a quarter of its CPU
        // (2.6 → 2.0 ms for a hook that does nothing; docs/BENCHMARKS.md). The cost is ASLR of
        // the binary's own code (libraries, stack and heap stay randomised); the daemon listens
        // on loopback only unless a token is set.
        println!("cargo:rustc-link-arg-bins=-no-pie");
        // Should a build turn PIE back on, keep the relocations packed (DT_RELR, glibc 2.36+).
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
        link_unwinder_statically();
    }
    println!("cargo:rerun-if-changed=build.rs");
}

/// The unwinder from GCC's static `libgcc_eh.a` instead of the shared `libgcc_s.so.1`: one
/// library less to find, map and bind at every start, and `libgcc_s`'s constructor probes the
/// CPU with a dozen `cpuid` instructions, each a trap to the hypervisor on a virtual machine
/// (~15 µs apiece measured here). Together ~0.2 ms of CPU per `cairn hook` (docs/BENCHMARKS.md).
/// Panics unwind as before: the same unwinder, linked in. A toolchain without `libgcc_eh.a`
/// (clang with compiler-rt) keeps the shared library.
fn link_unwinder_statically() {
    let Some(archive) = static_unwinder() else { return };
    if let Some(dir) = archive.parent() {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
    // Linked before std's `-lgcc_s`: with `--as-needed` the shared library is then not needed.
    println!("cargo:rustc-link-lib=static:-bundle=gcc_eh");
}

/// Where the C compiler that links the binary keeps `libgcc_eh.a`, if it has one.
fn static_unwinder() -> Option<PathBuf> {
    // A cross build links with another toolchain: not worth guessing its files.
    if std::env::var("TARGET").ok()? != std::env::var("HOST").ok()? {
        return None;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let out = Command::new(cc).arg("-print-file-name=libgcc_eh.a").output().ok()?;
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    // An unknown file is echoed back as its bare name.
    (out.status.success() && path.is_absolute() && path.is_file()).then_some(path)
}
