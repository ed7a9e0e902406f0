fn main() {
    limit_malloc_arenas();
    // The sandbox's network forwarder runs this binary inside the sandbox in a hidden mode.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some(code) = sortie::sandbox::forward::run_hidden(&args) {
        std::process::exit(code);
    }
    // An agent session run as a Kubernetes Job is stood for by this binary in a hidden mode.
    if let Some(code) = sortie::kube::relay::run_hidden(&args) {
        std::process::exit(code);
    }
    std::process::exit(sortie::cli::main());
}

/// glibc's allocator gives threads up to eight arenas per core, each keeping freed memory of
/// its own; a daemon with a thread per session and a large parsed backlog then holds far more
/// than it uses (scale bench, 100 sessions over 20,000 issues: 220 MiB resident with the
/// default, 192 MiB with two arenas). Two arenas are the default here; `MALLOC_ARENA_MAX` in
/// the environment, which glibc reads itself, still decides when set.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn limit_malloc_arenas() {
    const M_ARENA_MAX: i32 = -8;
    const ARENAS: i32 = 2;
    unsafe extern "C" {
        fn mallopt(param: i32, value: i32) -> i32;
    }
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: called first in `main`, before any other thread exists; `mallopt` only
        // sets an allocator parameter, and a refusal (0) leaves the default in place.
        unsafe {
            mallopt(M_ARENA_MAX, ARENAS);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_malloc_arenas() {}
