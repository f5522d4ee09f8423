//! The registry read and written with raw HTTP/1.1 on loopback, independent of drover's
//! own client: what an attacker who can write the registry does (move a tag to other
//! manifest bytes), and what an auditor checks (every tag names a manifest whose blobs
//! and signature exist). Plain HTTP, no authentication. Test support only.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One answer: status, headers (lower-case names) and body.
#[derive(Debug, Clone)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body (chunked encoding undone).
    pub body: Vec<u8>,
}

impl Answer {
    /// The first header called `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// Sends one request to `addr` (`HOST:PORT`) and reads the whole answer.
pub fn request(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> std::io::Result<Answer> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{method} {path}: {m}"));
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(|| bad("no end of head"))?;
    let text = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = text.split("\r\n");
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|c| c.parse().ok()).ok_or_else(|| bad("no status"))?;
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string())).collect();
    let mut body = raw[end + 4..].to_vec();
    if headers.iter().any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked")) {
        body = unchunk(&body).ok_or_else(|| bad("bad chunked body"))?;
    }
    if method == "HEAD" {
        body.clear();
    }
    Ok(Answer { status, headers, body })
}

fn unchunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let i = b.windows(2).position(|w| w == b"\r\n")?;
        let size = usize::from_str_radix(std::str::from_utf8(&b[..i]).ok()?.split(';').next()?.trim(), 16).ok()?;
        b = &b[i + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(b.get(..size)?);
        b = b.get(size + 2..)?;
    }
}

/// The media types a manifest GET accepts.
pub const ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.v2+json";

/// GET `repo`'s manifest `reference` (tag or digest): bytes and media type; None on 404.
pub fn manifest(addr: &str, repo: &str, reference: &str) -> Option<(Vec<u8>, String)> {
    let a = request(addr, "GET", &format!("/v2/{repo}/manifests/{reference}"), &[("Accept", ACCEPT)], b"").expect("registry answers");
    match a.status {
        200 => {
            let mt = a.header("content-type").unwrap_or("application/vnd.oci.image.manifest.v1+json").to_string();
            Some((a.body, mt))
        }
        404 => None,
        s => panic!("GET manifest {repo}:{reference}: HTTP {s}: {}", String::from_utf8_lossy(&a.body)),
    }
}

/// PUT `bytes` as `repo`'s manifest under `tag` (the attacker's tag move).
pub fn put_manifest(addr: &str, repo: &str, tag: &str, bytes: &[u8], media_type: &str) {
    let a = request(addr, "PUT", &format!("/v2/{repo}/manifests/{tag}"), &[("Content-Type", media_type)], bytes).expect("registry answers");
    assert_eq!(a.status, 201, "PUT manifest {repo}:{tag}: {}", String::from_utf8_lossy(&a.body));
}

/// True when `repo` holds blob `digest` (HEAD).
pub fn blob_exists(addr: &str, repo: &str, digest: &str) -> bool {
    let a = request(addr, "HEAD", &format!("/v2/{repo}/blobs/{digest}"), &[], b"").expect("registry answers");
    a.status == 200
}

/// The repositories of the registry (`/v2/_catalog`).
pub fn repositories(addr: &str) -> Vec<String> {
    let a = request(addr, "GET", "/v2/_catalog?n=1000", &[], b"").expect("registry answers");
    assert_eq!(a.status, 200, "catalog: {}", String::from_utf8_lossy(&a.body));
    names(&a.body, "repositories")
}

/// The tags of `repo` (empty when it has none).
pub fn tags(addr: &str, repo: &str) -> Vec<String> {
    let a = request(addr, "GET", &format!("/v2/{repo}/tags/list?n=10000"), &[], b"").expect("registry answers");
    if a.status == 404 {
        return Vec::new();
    }
    assert_eq!(a.status, 200, "tags of {repo}: {}", String::from_utf8_lossy(&a.body));
    names(&a.body, "tags")
}

fn names(body: &[u8], field: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_slice(body).expect("JSON");
    v[field].as_array().into_iter().flatten().filter_map(|t| t.as_str().map(str::to_string)).collect()
}

/// The `sha256:` digest of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// Uploads `data` as a blob of `repo` (one POST, one monolithic PUT); returns its digest.
pub fn put_blob(addr: &str, repo: &str, data: &[u8]) -> String {
    let digest = digest(data);
    let a = request(addr, "POST", &format!("/v2/{repo}/blobs/uploads/"), &[], b"").expect("registry answers");
    assert_eq!(a.status, 202, "POST upload {repo}: {}", String::from_utf8_lossy(&a.body));
    let location = a.header("location").expect("upload location").to_string();
    let path = match location.find("/v2/") {
        Some(i) => location[i..].to_string(),
        None => location,
    };
    let sep = if path.contains('?') { '&' } else { '?' };
    let a = request(addr, "PUT", &format!("{path}{sep}digest={digest}"), &[("Content-Type", "application/octet-stream")], data).expect("registry answers");
    assert_eq!(a.status, 201, "PUT blob {repo}: {}", String::from_utf8_lossy(&a.body));
    digest
}
