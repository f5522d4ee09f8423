//! The YAML input loader: what `drover build DIR` runs on each file (`Collector::
//! add_document_text`, then `finish`). Never panics, errors name the file; every object
//! it accepts is canonical YAML that the agent's reader (`bundle::parse_single_object`)
//! reads back to the same value; text without aliases never trips the alias budget.
#![no_main]

use drover_bundler::input::{canonical_yaml, Collector};
use drover_proto::bundle::parse_single_object;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut c = Collector::new(&["Gadget".to_string()]);
    let added = c.add_document_text("fuzz.yaml", text);
    if let Err(e) = &added {
        let msg = e.to_string();
        assert!(msg.contains("fuzz.yaml"), "error does not name the file: {msg}");
        assert!(text.contains('*') || !msg.contains("YAML aliases expand"), "alias budget tripped without aliases: {msg}");
        return;
    }
    let Ok(done) = c.finish_with_sources() else { return };
    for (id, obj) in &done.objects {
        assert_eq!(canonical_yaml(&obj.value), obj.yaml);
        let back = parse_single_object(&obj.yaml).unwrap_or_else(|e| panic!("{id}: canonical YAML does not read back: {e}\n{}", String::from_utf8_lossy(&obj.yaml)));
        assert_eq!(back, obj.value, "{id}: canonical YAML reads back differently:\n{}", String::from_utf8_lossy(&obj.yaml));
    }
});
