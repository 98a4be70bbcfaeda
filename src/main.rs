use std::process::ExitCode;

fn main() -> ExitCode {
    match dialect_proxy::cli::main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // For an operator: the message and its causes, never a backtrace.
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
