//! Registry authorisation, learnt from the registry's own `401` challenges and reused:
//! the scheme per registry (anonymous, basic, bearer with realm and service), bearer
//! tokens per (registry, repository, scope) until they expire, and credential lookups per
//! registry. No `GET /v2/` probe: an anonymous registry costs nothing, an authenticating
//! one one challenge, then one token per repository and scope.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::header::HeaderValue;

use super::diagnose;
use crate::auth::{credentials_for, CredentialSource, Credentials, HostCredentials};
use crate::error::StoreError;

/// What a request needs from the repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Scope {
    /// Read.
    Pull,
    /// Read and write.
    Push,
}

impl Scope {
    fn actions(self) -> &'static str {
        match self {
            Scope::Pull => "pull",
            Scope::Push => "pull,push",
        }
    }
}

/// How a registry wants to be authenticated, from its `WWW-Authenticate` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scheme {
    /// It answered without asking.
    Anonymous,
    /// HTTP basic auth.
    Basic,
    /// Bearer tokens from `realm` for `service`.
    Bearer {
        /// Token endpoint URL.
        realm: String,
        /// The `service` parameter, if the challenge named one.
        service: Option<String>,
    },
}

impl Scheme {
    /// Parses a `WWW-Authenticate` header value; `None` when it is neither Basic nor a
    /// Bearer challenge with a realm.
    pub(crate) fn parse(header: &str) -> Option<Scheme> {
        let header = header.trim();
        let (word, rest) = header.split_once(char::is_whitespace).unwrap_or((header, ""));
        if word.eq_ignore_ascii_case("basic") {
            return Some(Scheme::Basic);
        }
        if !word.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let params = parse_params(rest);
        let realm = params.get("realm")?.clone();
        Some(Scheme::Bearer { realm, service: params.get("service").cloned() })
    }
}

/// `key="value", key=value` pairs (keys lower-cased, quotes and escapes removed).
fn parse_params(s: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
            chars.next();
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect::<String>().trim().to_ascii_lowercase();
        if key.is_empty() {
            return out;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            value = chars.by_ref().take_while(|c| *c != ',').collect::<String>().trim().to_string();
        }
        out.insert(key, value);
    }
}

/// Largest token service answer read: a token and its expiry, a few KiB in practice (an
/// endless answer is cut here instead of filling memory).
pub(crate) const MAX_TOKEN_ANSWER: u64 = 64 << 10;

type TokenKey = (String, String, Scope);
type TokenSlot = Arc<tokio::sync::Mutex<Option<(HeaderValue, Instant)>>>;

/// Everything learnt about authenticating to registries; shared by all clones of a client.
pub(crate) struct Authorizer {
    explicit: Option<HostCredentials>,
    how: Option<&'static str>,
    credentials: Mutex<HashMap<String, (Option<Credentials>, CredentialSource)>>,
    schemes: Mutex<HashMap<String, Scheme>>,
    gates: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    tokens: Mutex<HashMap<TokenKey, TokenSlot>>,
}

/// What fetching a token needs from the client.
pub(crate) struct TokenFetch<'a> {
    /// The HTTP client.
    pub http: &'a reqwest::Client,
    /// Registries are reached over plain HTTP (credentials may then go to an http:// realm).
    pub plain_http: bool,
    /// Messages about the token service.
    pub diag: diagnose::Context<'a>,
}

impl Authorizer {
    /// An authorizer with the explicit credentials (if any) bound to their host; `how`
    /// names the program's flags for them in messages.
    pub(crate) fn new(explicit: Option<HostCredentials>, how: Option<&'static str>) -> Self {
        Authorizer {
            explicit,
            how,
            credentials: Mutex::default(),
            schemes: Mutex::default(),
            gates: Mutex::default(),
            tokens: Mutex::default(),
        }
    }

    /// The credentials for `registry` and where they came from (looked up once).
    pub(crate) fn credentials(&self, registry: &str) -> Result<(Option<Credentials>, CredentialSource), StoreError> {
        if let Some(hit) = self.credentials.lock().expect("credentials lock").get(registry) {
            return Ok(hit.clone());
        }
        let found = credentials_for(registry, self.explicit.as_ref(), self.how).map_err(StoreError::Config)?;
        self.credentials.lock().expect("credentials lock").insert(registry.to_string(), found.clone());
        Ok(found)
    }

    /// The scheme learnt for `registry`, if any.
    pub(crate) fn scheme(&self, registry: &str) -> Option<Scheme> {
        self.schemes.lock().expect("schemes lock").get(registry).cloned()
    }

    /// Records the scheme of `registry`.
    pub(crate) fn learn(&self, registry: &str, scheme: Scheme) {
        self.schemes.lock().expect("schemes lock").insert(registry.to_string(), scheme);
    }

    /// The lock the first request to `registry` holds while the scheme is unknown, so
    /// that concurrent first requests do not all go out unauthenticated.
    pub(crate) fn gate(&self, registry: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.gates.lock().expect("gates lock").entry(registry.to_string()).or_default().clone()
    }

    fn slot(&self, key: TokenKey) -> TokenSlot {
        self.tokens.lock().expect("tokens lock").entry(key).or_default().clone()
    }

    fn cached(&self, key: &TokenKey) -> Option<TokenSlot> {
        self.tokens.lock().expect("tokens lock").get(key).cloned()
    }

    /// The `Authorization` value for a request to `repository` in `registry` under
    /// `scheme`; `renew` fetches a new token even when one is cached (it was refused).
    /// `None`: send the request without one.
    pub(crate) async fn authorization(
        &self,
        fetch: &TokenFetch<'_>,
        registry: &str,
        repository: &str,
        scope: Scope,
        scheme: &Scheme,
        renew: bool,
    ) -> Result<Option<HeaderValue>, StoreError> {
        match scheme {
            Scheme::Anonymous => Ok(None),
            Scheme::Basic => Ok(self.credentials(registry)?.0.map(|c| basic(&c))),
            Scheme::Bearer { realm, service } => {
                if !renew {
                    // A push token also serves reads.
                    for s in [scope, Scope::Push] {
                        if let Some(slot) = self.cached(&(registry.into(), repository.into(), s)) {
                            if let Some((v, exp)) = &*slot.lock().await {
                                if Instant::now() < *exp {
                                    return Ok(Some(v.clone()));
                                }
                            }
                        }
                    }
                }
                let slot = self.slot((registry.into(), repository.into(), scope));
                let mut guard = slot.lock().await;
                if let (false, Some((v, exp))) = (renew, &*guard) {
                    if Instant::now() < *exp {
                        return Ok(Some(v.clone()));
                    }
                }
                let fresh = self.fetch_token(fetch, registry, repository, scope, realm, service.as_deref()).await?;
                *guard = Some(fresh.clone());
                Ok(Some(fresh.0))
            }
        }
    }

    async fn fetch_token(
        &self,
        fetch: &TokenFetch<'_>,
        registry: &str,
        repository: &str,
        scope: Scope,
        realm: &str,
        service: Option<&str>,
    ) -> Result<(HeaderValue, Instant), StoreError> {
        let what = format!("token for {registry}/{repository} ({}) from {realm}", scope.actions());
        let (creds, source) = self.credentials(registry)?;
        if creds.is_some() && realm.starts_with("http://") && !fetch.plain_http {
            return Err(StoreError::Auth {
                what,
                registry: registry.into(),
                detail: format!("its token service {realm} is plain HTTP; credentials are not sent over plain HTTP unless --plain-http is given"),
            });
        }
        let mut query = vec![("scope".to_string(), format!("repository:{repository}:{}", scope.actions()))];
        if let Some(s) = service {
            query.push(("service".into(), s.into()));
        }
        let mut req = fetch.http.get(realm).query(&query).timeout(fetch.diag.timeout);
        if let Some(c) = &creds {
            req = req.basic_auth(&c.username, Some(&c.password));
        }
        let realm_host = reqwest::Url::parse(realm).ok().and_then(|u| u.host_str().map(|h| format!("{h}{}", u.port().map(|p| format!(":{p}")).unwrap_or_default())));
        let diag = diagnose::Context { host: realm_host.as_deref().unwrap_or(realm), ..fetch.diag };
        let res = req.send().await.map_err(|e| StoreError::Transport { what: what.clone(), message: diagnose::send_error(&e, &diag) })?;
        let status = res.status().as_u16();
        if status == 401 || status == 403 {
            return Err(StoreError::Auth { what, registry: registry.into(), detail: format!("its token service {realm} answered HTTP {status}; {source}") });
        }
        let body = super::request::read_body(res, MAX_TOKEN_ANSWER, &what, fetch.diag.ca_file, fetch.diag.timeout).await?;
        if status != 200 {
            let text = crate::text::clean::bounded(String::from_utf8_lossy(&body[..body.len().min(512)]).trim(), 300);
            return Err(StoreError::Transport { what, message: format!("token service answered HTTP {status}: {text}") });
        }
        let doc: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| StoreError::Transport { what: what.clone(), message: format!("token service answer is not JSON: {e}") })?;
        let token = doc.get("token").or_else(|| doc.get("access_token")).and_then(|t| t.as_str()).unwrap_or("");
        let value = HeaderValue::from_str(&format!("Bearer {token}"))
            .ok()
            .filter(|_| !token.is_empty())
            .ok_or_else(|| StoreError::Transport { what, message: "token service answered without a usable token".into() })?;
        // Spec default: 60 s. Renew a little early; never cache for less than a second.
        let secs = doc.get("expires_in").and_then(|e| e.as_u64()).unwrap_or(60);
        let ttl = Duration::from_secs(secs.saturating_sub(10).max(1));
        Ok((value, Instant::now() + ttl))
    }
}

/// The basic-auth header value for `c`.
pub(crate) fn basic(c: &Credentials) -> HeaderValue {
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", c.username, c.password));
    let mut v = HeaderValue::from_str(&format!("Basic {raw}")).expect("base64 is a valid header value");
    v.set_sensitive(true);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_parse() {
        assert_eq!(Scheme::parse("Basic realm=\"drover-test\""), Some(Scheme::Basic));
        assert_eq!(
            Scheme::parse("Bearer realm=\"https://auth.example/token\",service=\"reg.example\",scope=\"repository:a/b:pull\""),
            Some(Scheme::Bearer { realm: "https://auth.example/token".into(), service: Some("reg.example".into()) })
        );
        assert_eq!(
            Scheme::parse("bearer service=x, realm=http://t/token"),
            Some(Scheme::Bearer { realm: "http://t/token".into(), service: Some("x".into()) })
        );
        assert_eq!(Scheme::parse("Bearer service=\"x\""), None, "a bearer challenge needs a realm");
        assert_eq!(Scheme::parse("Negotiate abc"), None);
    }
}
