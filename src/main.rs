fn main() {
    std::process::exit(helixflow::main());
}
