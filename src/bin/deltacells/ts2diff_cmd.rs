//! `deltacells ts2diff ...` (issue 5).

use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum Command {}

pub fn run(cmd: Command) -> deltacells::Result<()> {
    match cmd {}
}
