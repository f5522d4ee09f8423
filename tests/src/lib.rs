//! drover-tests: test support for drover's end-to-end suite. Starts the real CNCF
//! distribution registry (`docker-registry`) on a free loopback port, locates the built
//! binaries, and (in `fakekube`) provides a FAKE Kubernetes API server for tests.
//! Test support only: never shipped.

pub mod bins;
pub mod fakekube;
pub mod faults;
pub mod misbehave;
pub mod neighbour;
pub mod oracle;
pub mod proxy;
pub mod rawreg;
pub mod registry;
pub mod spawn;
pub mod tls;
pub mod token;

pub use bins::{bin, run, run_capped, run_ok, tool_ok, Out};
pub use registry::{Registry, RegistrySetup};

/// Writes `files` (relative path, content) under `root`, creating directories.
pub fn write_files(root: &std::path::Path, files: &[(&str, &str)]) {
    for (rel, text) in files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("a relative path has a parent")).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

/// A free TCP port on 127.0.0.1 (bound then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback").local_addr().expect("addr").port()
}
