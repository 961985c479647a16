//! The `sluice` binary's allocator: the system's by default, jemalloc with the `jemalloc`
//! feature (`scripts/test.sh` runs this file once more with it), with the options
//! `main.rs` compiles in. jemalloc also reads options from
//! `_RJEM_MALLOC_CONF` (tikv-jemalloc-sys prefixes its symbols) and prints its statistics,
//! options included, at exit when asked to; the system allocator ignores that variable.

use std::process::Command;

/// The stderr of `sluice --version` run with jemalloc asked to print its statistics at exit.
fn version_stderr_with_jemalloc_statistics() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("--version")
        .env("_RJEM_MALLOC_CONF", "stats_print:true")
        .output()
        .expect("run sluice --version");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[test]
fn the_sluice_binary_allocates_with_jemalloc_without_an_arena_for_oversize_allocations() {
    let stderr = version_stderr_with_jemalloc_statistics();
    assert!(
        stderr.contains("Begin jemalloc statistics"),
        "no jemalloc statistics on stderr: {stderr}"
    );
    // The compiled-in option holds; jemalloc's own default is 8 MiB.
    assert!(
        stderr
            .lines()
            .any(|l| l.trim() == "opt.oversize_threshold: 0"),
        "the compiled-in options were not read: {stderr}"
    );
}

#[cfg(not(all(feature = "jemalloc", not(target_env = "msvc"))))]
#[test]
fn by_default_the_binary_allocates_with_the_system_allocator() {
    let stderr = version_stderr_with_jemalloc_statistics();
    assert!(!stderr.contains("jemalloc"), "{stderr}");
}
