//! End-to-end tests of the `dep` binary: one integration test binary, one module per feature.
//! Each test runs the real binary in a fresh temporary directory (see `util`).

mod util;

mod bad_input;
mod errors;
mod ranks;
mod repl;
mod run;
mod sim;
mod source_text;
mod traces;
mod views;
