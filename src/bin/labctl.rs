//! labctl: lab from the terminal.

fn main() -> std::process::ExitCode {
    lab::cli::main()
}
