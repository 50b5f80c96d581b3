use std::process::ExitCode;

fn main() -> ExitCode {
    parley_worker::process::main()
}
