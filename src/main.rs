fn main() {
    std::process::exit(helixflow::cli::main());
}
