//! A small token server for docker-registry's `auth.token` scheme, on a free loopback
//! port: it checks HTTP basic credentials and issues ES256 JWTs (P-256 key; its
//! self-signed certificate is the registry's `rootcertbundle`, the token's `kid` is the
//! libtrust key ID the registry derives from it). Records every request. Test support only.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use p256::ecdsa::signature::Signer as _;
use p256::pkcs8::DecodePrivateKey as _;
use rcgen::PublicKeyData as _;
use sha2::Digest as _;

/// One request the token server answered.
#[derive(Debug, Clone)]
pub struct TokenRequest {
    /// The basic-auth user, when credentials were sent.
    pub user: Option<String>,
    /// The requested scopes (`repository:NAME:ACTIONS`).
    pub scopes: Vec<String>,
    /// True when a token was issued.
    pub granted: bool,
}

struct Inner {
    users: HashMap<String, String>,
    anonymous_pull: bool,
    service: String,
    issuer: String,
    kid: String,
    key: p256::ecdsa::SigningKey,
    requests: Mutex<Vec<TokenRequest>>,
}

/// A running token server; stopped when dropped.
pub struct TokenServer {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// The `service` (token audience) the registry is configured with.
    pub service: String,
    /// The token issuer the registry is configured with.
    pub issuer: String,
    /// The certificate of the signing key (PEM): the registry's `rootcertbundle`.
    pub cert_pem: String,
    inner: Arc<Inner>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TokenServer {
    /// Starts a token server that knows `users` (name, password); `anonymous_pull` also
    /// grants `pull` without credentials.
    pub fn start(users: &[(&str, &str)], anonymous_pull: bool) -> TokenServer {
        let kp = rcgen::KeyPair::generate().expect("token key");
        let key = p256::ecdsa::SigningKey::from_pkcs8_der(&kp.serialize_der()).expect("P-256 PKCS#8");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name.push(rcgen::DnType::CommonName, "drover test token issuer");
        let cert_pem = params.self_signed(&kp).expect("token certificate").pem();
        let inner = Arc::new(Inner {
            users: users.iter().map(|(u, p)| (u.to_string(), p.to_string())).collect(),
            anonymous_pull,
            service: "drover-test".into(),
            issuer: "drover-test-issuer".into(),
            kid: libtrust_key_id(&kp.subject_public_key_info()),
            key,
            requests: Mutex::new(Vec::new()),
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let app = axum::Router::new().route("/token", axum::routing::get(token)).with_state(inner.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(async move {
                let l = tokio::net::TcpListener::from_std(listener).expect("listener");
                let _ = axum::serve(l, app).with_graceful_shutdown(async move { rx.await.ok().unwrap_or(()) }).await;
            });
        });
        TokenServer {
            addr,
            service: inner.service.clone(),
            issuer: inner.issuer.clone(),
            cert_pem,
            inner,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    /// The realm URL the registry sends clients to.
    pub fn realm(&self) -> String {
        format!("http://{}/token", self.addr)
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<TokenRequest> {
        self.inner.requests.lock().unwrap().clone()
    }
}

impl Drop for TokenServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// libtrust's key ID: base32 of the first 240 bits of SHA-256(SPKI DER), in 12 groups of 4.
fn libtrust_key_id(spki_der: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let sum = sha2::Sha256::digest(spki_der);
    let mut bits = 0u64;
    let mut n = 0;
    let mut out = String::new();
    for b in &sum[..30] {
        bits = (bits << 8) | u64::from(*b);
        n += 8;
        while n >= 5 {
            n -= 5;
            out.push(ALPHABET[((bits >> n) & 31) as usize] as char);
        }
    }
    out.as_bytes().chunks(4).map(|c| std::str::from_utf8(c).unwrap()).collect::<Vec<_>>().join(":")
}

fn basic_user(headers: &HeaderMap) -> Option<(String, String)> {
    let v = headers.get("authorization")?.to_str().ok()?;
    let b64 = v.strip_prefix("Basic ")?;
    let raw = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    let (u, p) = std::str::from_utf8(&raw).ok()?.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

async fn token(State(s): State<Arc<Inner>>, headers: HeaderMap, Query(q): Query<Vec<(String, String)>>) -> Response {
    let scopes: Vec<String> = q.iter().filter(|(k, _)| k == "scope").map(|(_, v)| v.clone()).collect();
    let creds = basic_user(&headers);
    let user = creds.as_ref().map(|(u, _)| u.clone());
    let authenticated = match &creds {
        Some((u, p)) => s.users.get(u) == Some(p),
        None => false,
    };
    let record = |granted| s.requests.lock().unwrap().push(TokenRequest { user: user.clone(), scopes: scopes.clone(), granted });
    if creds.is_some() && !authenticated || creds.is_none() && !s.anonymous_pull {
        record(false);
        return (StatusCode::UNAUTHORIZED, axum::Json(serde_json::json!({"details": "bad or missing credentials"}))).into_response();
    }
    let access: Vec<serde_json::Value> = scopes
        .iter()
        .filter_map(|sc| {
            let rest = sc.strip_prefix("repository:")?;
            let (name, actions) = rest.rsplit_once(':')?;
            let actions: Vec<&str> = actions.split(',').filter(|a| authenticated || *a == "pull").collect();
            Some(serde_json::json!({"type": "repository", "name": name, "actions": actions}))
        })
        .collect();
    record(true);
    let jwt = sign_jwt(&s, user.as_deref().unwrap_or(""), access);
    axum::Json(serde_json::json!({"token": jwt, "access_token": jwt, "expires_in": 300})).into_response()
}

fn sign_jwt(s: &Inner, subject: &str, access: Vec<serde_json::Value>) -> String {
    let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let header = serde_json::json!({"typ": "JWT", "alg": "ES256", "kid": s.kid});
    let claims = serde_json::json!({
        "iss": s.issuer, "sub": subject, "aud": s.service, "exp": now + 300, "nbf": now - 10, "iat": now,
        "jti": format!("{now}-{}", rand_suffix()), "access": access,
    });
    let signing_input = format!("{}.{}", b64(header.to_string().as_bytes()), b64(claims.to_string().as_bytes()));
    let sig: p256::ecdsa::Signature = s.key.sign(signing_input.as_bytes());
    format!("{signing_input}.{}", b64(&sig.to_bytes()))
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}
