//! The `karpenter` binary: the composition root of the controller and the user-facing
//! subcommands (`controller`, `crds`, `validate`, `plan`).

mod commands;

use std::process::ExitCode;

use clap::Parser;

/// jemalloc, not the C library's allocator. The controller's work is bursts of short-lived
/// objects (a scheduling pass over 20,000 pods, a `/metrics` page of several MB) between
/// long-lived caches; glibc's allocator kept the freed bursts as fragmented heap (the memory
/// benchmark's RSS grew to 1.1 GiB while the live heap stayed far below), and the image's musl
/// allocator is slow with several threads. jemalloc returns freed pages to the system on its
/// decay timer (`docs/controller.md`, "Memory benchmark").
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = commands::Cli::parse();
    commands::run(cli)
}
