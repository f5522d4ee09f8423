//! The real distribution registry (`docker-registry serve CONFIG`) on a free loopback
//! port with a temporary storage directory; killed when dropped.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running registry process.
pub struct Registry {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    child: Option<Child>,
    dir: tempfile::TempDir,
}

impl Registry {
    /// Starts a registry and waits until `/v2/` answers.
    pub fn start() -> Registry {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = crate::free_port();
        Self::start_at(dir, port)
    }

    fn start_at(dir: tempfile::TempDir, port: u16) -> Registry {
        let addr = format!("127.0.0.1:{port}");
        let storage = dir.path().join("storage");
        std::fs::create_dir_all(&storage).unwrap();
        let cfg = dir.path().join("config.yml");
        let mut f = std::fs::File::create(&cfg).unwrap();
        write!(
            f,
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n",
            storage.display()
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("docker-registry must be installed (tests/run.sh installs it)");
        let reg = Registry { addr, child: Some(child), dir };
        reg.wait_ready();
        reg
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(mut s) = std::net::TcpStream::connect(&self.addr) {
                let _ = s.write_all(format!("GET /v2/ HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr).as_bytes());
                let mut buf = [0u8; 12];
                if std::io::Read::read(&mut s, &mut buf).map(|n| n >= 12 && &buf[9..12] == b"200").unwrap_or(false) {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("docker-registry did not become ready on {}; log: {}", self.addr, self.log());
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

    /// Starts the registry again on the same port with the same storage.
    pub fn restart(&mut self) {
        self.stop();
        let port: u16 = self.addr.rsplit(':').next().unwrap().parse().unwrap();
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap());
        let fresh = Self::start_at(dir, port);
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
