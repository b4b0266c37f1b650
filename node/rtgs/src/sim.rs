//! `rtgs sim`: placeholder until the simulator lands.
use clap::Args;
use std::process::ExitCode;

#[derive(Args)]
pub struct SimArgs {}

pub fn run(_args: SimArgs) -> anyhow::Result<ExitCode> {
    Ok(ExitCode::SUCCESS)
}
