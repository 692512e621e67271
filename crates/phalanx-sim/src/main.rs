//! `phalanx-sim`: predict cluster throughput per node count and dispatch
//! scheme from measured per-packet costs. See the `phalanx_sim` crate
//! documentation for the model.
#![forbid(unsafe_code)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let options = match phalanx_sim::args::parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let report = phalanx_sim::scenario::run(&options.scenario);
    if options.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    ExitCode::SUCCESS
}
