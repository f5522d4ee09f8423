//! The README's first command, run as a newcomer runs it: `examples/quickstart.sh`
//! must publish the example platform and have one agent per cluster type apply it,
//! with a registry and (NO_REGISTRY=1) with an OCI layout instead.

use std::path::Path;
use std::process::Command;

fn run_quickstart(no_registry: bool) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root");
    let mut cmd = Command::new("bash");
    cmd.arg(root.join("examples/quickstart.sh")).current_dir(root);
    if no_registry {
        cmd.env("NO_REGISTRY", "1");
    }
    let out = cmd.output().expect("run quickstart");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "quickstart failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

fn cluster_types() -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/platform/cluster-types");
    std::fs::read_dir(dir).expect("cluster types").count()
}

fn assert_every_type_applied(stdout: &str) {
    let applied = stdout.lines().filter(|l| l.starts_with("last attempt:") && l.contains("Applied")).count();
    let healthy = stdout.lines().filter(|l| l.starts_with("health:") && l.contains("Healthy")).count();
    assert_eq!(applied, cluster_types(), "every cluster type's agent applies its bundle:\n{stdout}");
    assert_eq!(healthy, cluster_types(), "every cluster type is Healthy:\n{stdout}");
    assert!(stdout.contains("quickstart done"), "{stdout}");
}

#[test]
fn quickstart_with_registry() {
    let stdout = run_quickstart(false);
    assert_every_type_applied(&stdout);
    assert!(stdout.contains("release record"), "publish went through the registry:\n{stdout}");
}

#[test]
fn quickstart_with_oci_layout() {
    let stdout = run_quickstart(true);
    assert_every_type_applied(&stdout);
    assert!(stdout.contains("using an OCI layout"), "{stdout}");
}
