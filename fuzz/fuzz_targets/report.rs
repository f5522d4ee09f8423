//! `Report::from_slice` (a fleet report: written by any agent with push rights to the
//! reports repository, read by `drover fleet status|wait|view` and `promote
//! --require-healthy`). Never panics; what parses names a usable report tag and re-encodes
//! to bytes that parse to the same report.
#![no_main]

use drover_proto::reference::valid_tag;
use drover_proto::report::Report;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = Report::from_slice(data) {
        assert!(valid_tag(&r.tag()), "{:?} is not a tag", r.tag());
        let again = Report::from_slice(&r.to_bytes()).expect("a re-encoded report parses");
        assert_eq!(again, r);
        let _ = r.fingerprint();
    }
});
