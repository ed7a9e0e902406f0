fn main() {
    std::process::exit(sortie::cli::main());
}
