//! `Reference::parse` and `RegistryRef::parse` (every reference a user or a config file
//! gives). Never panics; what parses prints back to the same reference.
#![no_main]

use drover_proto::{Reference, RegistryRef};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(r) = RegistryRef::parse(text) {
        let printed = r.to_string();
        let again = RegistryRef::parse(&printed).unwrap_or_else(|e| panic!("{printed:?} (from {text:?}) does not parse: {e}"));
        assert_eq!(again, r, "{text:?} prints as {printed:?}, which parses differently");
        let _ = (r.repository_url(), r.lookup(), r.to_oci());
    }
    if let Ok(r) = Reference::parse(text) {
        let printed = r.to_string();
        let again = Reference::parse(&printed).unwrap_or_else(|e| panic!("{printed:?} (from {text:?}) does not parse: {e}"));
        assert_eq!(again, r, "{text:?} prints as {printed:?}, which parses differently");
    }
});
