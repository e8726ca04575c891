//! Link flags for the `cairn` binary.

fn main() {
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu {
        // Pack the ~30,000 relative relocations of the position-independent binary (DT_RELR,
        // glibc 2.36+, binutils 2.38+): the dynamic loader applied them one by one at every
        // start, about a tenth of `cairn serve`'s time to healthy.
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
