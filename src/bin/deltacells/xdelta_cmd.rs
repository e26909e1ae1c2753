//! `deltacells xdelta ...` (issue 6).

use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum Command {}

pub fn run(cmd: Command) -> deltacells::Result<()> {
    match cmd {}
}
