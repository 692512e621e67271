//! Fuzz target: phalanxd's configuration parser and validator
//! (`Config::parse`), which reads files an operator (or a converter) wrote.
//! Property: no input panics; a refusal names a line within the file (or
//! line 0 for the whole file) and a field, in one line of text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use phalanxd::config::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = Config::parse("fuzz.toml", text) {
        let lines = text.lines().count() + 1;
        assert!(e.line <= lines, "line {} of a {}-line file: {e}", e.line, lines);
        assert!(!e.to_string().contains('\n') || e.message.contains('\n'), "{e}");
    }
});
