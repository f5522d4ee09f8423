//! The real distribution registry (`docker-registry serve CONFIG`) on a free loopback
//! port with a temporary storage directory; killed when dropped. [`RegistrySetup`] adds
//! TLS (a certificate from a [`crate::tls::TestCa`]), htpasswd basic auth (bcrypt) or
//! token auth (a [`crate::token::TokenServer`]).

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::tls::ServerCert;
use crate::token::TokenServer;

/// How a registry is started: plain HTTP and anonymous unless told otherwise.
#[derive(Debug, Clone, Default)]
pub struct RegistrySetup {
    /// Serve HTTPS with this certificate.
    pub tls: Option<ServerCert>,
    /// Require HTTP basic auth for these users (name, password).
    pub htpasswd: Vec<(String, String)>,
    /// Require bearer tokens from a token server: (realm, service, issuer, root certificate PEM).
    pub token: Option<(String, String, String, String)>,
}

impl RegistrySetup {
    /// Serve HTTPS with `cert`.
    pub fn tls(mut self, cert: ServerCert) -> Self {
        self.tls = Some(cert);
        self
    }

    /// Require basic auth for `user` with `password` (repeatable).
    pub fn user(mut self, user: &str, password: &str) -> Self {
        self.htpasswd.push((user.into(), password.into()));
        self
    }

    /// Require tokens issued by `server`.
    pub fn token(mut self, server: &TokenServer) -> Self {
        self.token = Some((server.realm(), server.service.clone(), server.issuer.clone(), server.cert_pem.clone()));
        self
    }
}

/// A running registry process.
pub struct Registry {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    setup: RegistrySetup,
    child: Option<Child>,
    dir: tempfile::TempDir,
}

impl Registry {
    /// Starts a plain HTTP, anonymous registry and waits until it answers.
    pub fn start() -> Registry {
        Self::start_with(RegistrySetup::default())
    }

    /// Starts a registry as `setup` says and waits until it answers.
    pub fn start_with(setup: RegistrySetup) -> Registry {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = crate::free_port();
        Self::start_at(dir, port, setup)
    }

    fn start_at(dir: tempfile::TempDir, port: u16, setup: RegistrySetup) -> Registry {
        let addr = format!("127.0.0.1:{port}");
        let cfg = dir.path().join("config.yml");
        std::fs::write(&cfg, config_yaml(dir.path(), &addr, &setup)).unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("docker-registry must be installed (tests/run.sh installs it)");
        let reg = Registry { addr, setup, child: Some(child), dir };
        reg.wait_ready();
        reg
    }

    /// Waits until the port answers HTTP (any status: a TLS port answers a plain request
    /// with 400, an authenticating one with 401).
    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(mut s) = std::net::TcpStream::connect(&self.addr) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let _ = s.write_all(format!("GET /v2/ HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr).as_bytes());
                let mut buf = [0u8; 12];
                let ok = std::io::Read::read(&mut s, &mut buf).map(|n| n >= 12 && buf.starts_with(b"HTTP/1.")).unwrap_or(false);
                let plain_ok = self.setup.tls.is_some() || self.auth_required() || &buf[9..12] == b"200";
                if ok && plain_ok {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("docker-registry did not become ready on {}; log: {}", self.addr, self.log());
    }

    fn auth_required(&self) -> bool {
        !self.setup.htpasswd.is_empty() || self.setup.token.is_some()
    }

    /// The registry's own log (errors only).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// Stops the registry process, keeping its storage.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the registry again on the same port with the same storage and setup.
    pub fn restart(&mut self) {
        self.stop();
        let port: u16 = self.addr.rsplit(':').next().unwrap().parse().unwrap();
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap());
        let fresh = Self::start_at(dir, port, self.setup.clone());
        *self = fresh;
    }

    /// `127.0.0.1:PORT/<repo>` — a reference prefix for this registry.
    pub fn reference(&self, repo_and_tag: &str) -> String {
        format!("{}/{}", self.addr, repo_and_tag)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The registry configuration for `setup`, writing its certificate, htpasswd and token
/// root bundle files into `dir`.
fn config_yaml(dir: &std::path::Path, addr: &str, setup: &RegistrySetup) -> String {
    let storage = dir.join("storage");
    std::fs::create_dir_all(&storage).unwrap();
    let mut y = format!(
        "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n",
        storage.display()
    );
    if let Some(tls) = &setup.tls {
        let (cert, key) = (dir.join("server.pem"), dir.join("server.key"));
        std::fs::write(&cert, &tls.cert_pem).unwrap();
        std::fs::write(&key, &tls.key_pem).unwrap();
        y += &format!("  tls:\n    certificate: {}\n    key: {}\n", cert.display(), key.display());
    }
    if !setup.htpasswd.is_empty() {
        let path = dir.join("htpasswd");
        let mut f = std::fs::File::create(&path).unwrap();
        for (user, pw) in &setup.htpasswd {
            let hash = bcrypt::hash_with_result(pw, 4).expect("bcrypt").format_for_version(bcrypt::Version::TwoY);
            writeln!(f, "{user}:{hash}").unwrap();
        }
        y += &format!("auth:\n  htpasswd:\n    realm: drover-test\n    path: {}\n", path.display());
    } else if let Some((realm, service, issuer, root_pem)) = &setup.token {
        let bundle = dir.join("token-root.pem");
        std::fs::write(&bundle, root_pem).unwrap();
        y += &format!(
            "auth:\n  token:\n    realm: {realm}\n    service: {service}\n    issuer: {issuer}\n    rootcertbundle: {}\n",
            bundle.display()
        );
    }
    y
}
