//! `parley-worker` exactly (its `main` is the same one call), built in this package so that its
//! process tests can run it: a package's tests only see the binaries of their own package, and
//! the worker's tests may not depend on the API (which this package's harness runs).

use std::process::ExitCode;

fn main() -> ExitCode {
    parley_worker::process::main()
}
