fn main() {
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
