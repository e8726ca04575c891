//! Link flags for the `cairn` binary.

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
    }
    println!("cargo:rerun-if-changed=build.rs");
}
