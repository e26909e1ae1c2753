//! The target triple as cargo spells it in `CARGO_TARGET_<TRIPLE>_RUNNER`, so
//! the tests that spawn the binary can run it through the same runner (the
//! NEON CI part runs an aarch64 build under qemu-user).

fn main() {
    let target = std::env::var("TARGET").unwrap_or_default();
    println!(
        "cargo:rustc-env=DELTACELLS_TARGET_ENV={}",
        target.to_uppercase().replace(['-', '.'], "_")
    );
    println!("cargo:rerun-if-changed=build.rs");
}
