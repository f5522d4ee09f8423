//! Shared fixtures of the transport tests: keys, tiny bundle inputs, Docker configs and
//! the expected `Authorization` header values.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use base64::Engine as _;
use drover_tests::run_ok;

/// `DROVER_KEY_PASSWORD` for keys made by [`keygen`].
pub const KEY_ENV: (&str, &str) = ("DROVER_KEY_PASSWORD", "");

/// `drover keygen` into `dir/keys`; returns (private key, public key).
pub fn keygen(dir: &Path) -> (String, String) {
    let k = dir.join("keys");
    run_ok("drover", &["keygen", "--out-dir", k.to_str().unwrap()], &[KEY_ENV]);
    (k.join("drover.key").display().to_string(), k.join("drover.pub").display().to_string())
}

/// The flags of `drover-agent run --once` for an agent in `dir` (its own key pair, state
/// and `dir:` target) polling `REGISTRY/fleet/edge:prod` over plain HTTP; and its state
/// directory (for `drover-agent status --state-dir`).
pub fn agent_once(dir: &Path, registry: &str) -> (Vec<String>, String) {
    let (_, public) = keygen(dir);
    let state = dir.join("state").display().to_string();
    let args = [
        "run".to_string(),
        "--once".into(),
        "--source".into(),
        format!("{registry}/fleet/edge:prod"),
        "--plain-http".into(),
        "--trust-key".into(),
        public,
        "--target".into(),
        format!("dir:{}", dir.join("out").display()),
        "--state-dir".into(),
        state.clone(),
        "--listen".into(),
        format!("127.0.0.1:{}", drover_tests::free_port()),
    ];
    (args.to_vec(), state)
}

/// A bundle input directory with one ConfigMap whose data is `value`.
pub fn input(dir: &Path, name: &str, value: &str) -> String {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("cm.yaml"),
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: app\ndata:\n  v: {value:?}\n"),
    )
    .unwrap();
    d.display().to_string()
}

/// The flag that names a trusted public key for verify/promote/import (`--trust-key`
/// in the flag vocabulary; older builds said `--key`).
pub fn trust_flag(command: &str) -> &'static str {
    let help = drover_tests::run("drover", &[command, "--help"], &[]).stdout;
    if help.contains("--trust-key") {
        "--trust-key"
    } else {
        "--key"
    }
}

/// Writes a Docker config (`DIR/config.json`) with `auths` for (host, user, password)
/// and returns DIR (the value of `DOCKER_CONFIG`).
pub fn docker_config(dir: &Path, auths: &[(&str, &str, &str)]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let mut map = serde_json::Map::new();
    for (host, user, pw) in auths {
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pw}"));
        map.insert(host.to_string(), serde_json::json!({ "auth": auth }));
    }
    std::fs::write(dir.join("config.json"), serde_json::json!({ "auths": map }).to_string()).unwrap();
    dir.to_path_buf()
}

/// The `Authorization` header value of HTTP basic auth for `user`/`password`.
pub fn basic(user: &str, password: &str) -> String {
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")))
}

/// Status of a running agent through its HTTP endpoint.
pub fn agent_status(listen: &str, state: &str) -> serde_json::Value {
    run_ok("drover-agent", &["status", "-o", "json", "--endpoint", &format!("http://{listen}"), "--state-dir", state], &[]).json()
}
