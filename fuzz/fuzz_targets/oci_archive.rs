//! The `oci-archive:` extraction (`ocitar::extract_from`, what `drover import` and every
//! `oci-archive:FILE` reference run first), then the layout's `index.json`. Never panics;
//! whatever it extracts stays inside its temporary directory and holds only regular files
//! and directories.
#![no_main]

use std::path::Path;

use drover_proto::layout::Layout;
use drover_proto::ocitar;
use libfuzzer_sys::fuzz_target;

fn check_tree(root: &Path, dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let ft = entry.file_type().unwrap();
        assert!(ft.is_dir() || ft.is_file(), "{} is neither a file nor a directory", entry.path().display());
        assert!(entry.path().starts_with(root));
        if ft.is_dir() {
            check_tree(root, &entry.path());
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(tmp) = ocitar::extract_from(data, Path::new("fuzz.tar")) {
        check_tree(tmp.path(), tmp.path());
        let _ = Layout::open(tmp.path()).and_then(|l| l.resolve("fleet/edge:prod"));
    }
});
