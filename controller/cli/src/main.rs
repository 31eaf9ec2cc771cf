//! The `karpenter` binary: the composition root of the controller and the user-facing
//! subcommands (`controller`, `crds`, `validate`, `plan`).

mod commands;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = commands::Cli::parse();
    commands::run(cli)
}
