//! The `fake-apiserver` binary as a child process: spawned with `--kubeconfig-out`,
//! waited for until it prints `ready`, killed when dropped. Hooks are reachable over
//! HTTP at `url()/fake/...`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A running `fake-apiserver` process.
pub struct FakeApiProcess {
    child: Child,
    url: String,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl FakeApiProcess {
    /// Spawns the built binary on a free port and waits for `ready`; panics on failure.
    pub fn start(extra_args: &[&str]) -> FakeApiProcess {
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        let mut child = Command::new(crate::bin("fake-apiserver"))
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .args(extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn fake-apiserver");
        let mut line = String::new();
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        out.read_line(&mut line)
            .expect("read fake-apiserver stdout");
        assert_eq!(line.trim(), "ready", "fake-apiserver did not print ready");
        let text = std::fs::read_to_string(&kubeconfig).expect("kubeconfig written");
        let url = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("server: "))
            .expect("server in kubeconfig")
            .to_string();
        FakeApiProcess {
            child,
            url,
            kubeconfig,
            _dir: dir,
        }
    }

    /// Base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Path of the kubeconfig the process wrote.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }
}

impl Drop for FakeApiProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
