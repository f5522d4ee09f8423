//! API errors of the kube target: which are transient (retried with backoff) and how each
//! is reported (HTTP code, reason and the server's own message, per object).

use std::future::Future;
use std::time::Duration;

use rand::Rng;

/// How requests are retried.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in total (1 = no retry).
    pub attempts: u32,
    /// First backoff; doubled per attempt, with jitter, capped at `max_backoff`.
    pub base_backoff: Duration,
    /// Backoff cap.
    pub max_backoff: Duration,
    /// Bound of one request (a timeout is transient).
    pub request_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 5,
            base_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// A failed API call, ready to record: the HTTP code (0 when there was no answer) and
/// a message that carries the server's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiFailure {
    /// HTTP status, 0 for transport errors and timeouts.
    pub code: u16,
    /// `HTTP 422 Invalid: <server message>` or the transport error.
    pub message: String,
    /// Worth retrying (5xx, 429, timeouts, connection errors).
    pub transient: bool,
    /// Server-suggested delay (`Retry-After` / `details.retryAfterSeconds`).
    pub retry_after: Option<Duration>,
}

impl std::fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl ApiFailure {
    /// Classifies a kube client error.
    pub fn from_kube(e: &kube::Error) -> Self {
        match e {
            kube::Error::Api(s) => {
                let code = s.code;
                let transient = code == 429 || code >= 500;
                let reason = if s.reason.is_empty() { "Error" } else { s.reason.as_str() };
                let text = if s.message.is_empty() { "(no message)" } else { s.message.as_str() };
                let retry_after = s
                    .details
                    .as_ref()
                    .map(|d| d.retry_after_seconds)
                    .filter(|s| *s > 0)
                    .map(|s| Duration::from_secs(u64::from(s).min(30)));
                ApiFailure { code, message: format!("HTTP {code} {reason}: {text}"), transient, retry_after }
            }
            kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
                ApiFailure { code: 0, message: format!("connection error: {e}"), transient: true, retry_after: None }
            }
            other => ApiFailure { code: 0, message: other.to_string(), transient: false, retry_after: None },
        }
    }

    fn timeout(after: Duration) -> Self {
        ApiFailure { code: 0, message: format!("request timed out after {}", humantime::format_duration(after)), transient: true, retry_after: None }
    }

    /// True for a 404 (the object or its API is absent).
    pub fn not_found(&self) -> bool {
        self.code == 404
    }

    /// True for a 409.
    pub fn conflict(&self) -> bool {
        self.code == 409
    }
}

/// Runs `call` until it succeeds, fails permanently, or the attempts are used up.
/// Every attempt is bounded by `policy.request_timeout`. The final error says how many
/// attempts were made when it was transient.
pub async fn with_retry<T, F, Fut>(policy: &RetryPolicy, mut call: F) -> Result<T, ApiFailure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let attempts = policy.attempts.max(1);
    let mut backoff = policy.base_backoff;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let failure = match tokio::time::timeout(policy.request_timeout, call()).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) => ApiFailure::from_kube(&e),
            Err(_) => ApiFailure::timeout(policy.request_timeout),
        };
        if !failure.transient {
            return Err(failure);
        }
        if attempt >= attempts {
            let mut f = failure;
            f.message = format!("{} (gave up after {attempt} attempts)", f.message);
            return Err(f);
        }
        let jitter = rand::rng().random_range(0.5..1.0);
        let wait = failure.retry_after.unwrap_or_else(|| backoff.mul_f64(jitter));
        tracing::debug!(attempt, error = %failure, wait_ms = wait.as_millis() as u64, "transient API error, retrying");
        tokio::time::sleep(wait).await;
        backoff = (backoff * 2).min(policy.max_backoff);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn api(code: u16, reason: &str, msg: &str) -> kube::Error {
        let s = kube::core::Status { code, reason: reason.into(), message: msg.into(), ..Default::default() };
        kube::Error::Api(Box::new(s))
    }

    #[test]
    fn classification() {
        let f = ApiFailure::from_kube(&api(422, "Invalid", "spec.replicas: Invalid value"));
        assert!(!f.transient);
        assert_eq!(f.message, "HTTP 422 Invalid: spec.replicas: Invalid value");
        assert!(ApiFailure::from_kube(&api(503, "ServiceUnavailable", "x")).transient);
        assert!(ApiFailure::from_kube(&api(429, "TooManyRequests", "x")).transient);
        assert!(!ApiFailure::from_kube(&api(409, "Conflict", "x")).transient);
        assert!(!ApiFailure::from_kube(&api(403, "Forbidden", "x")).transient);
    }

    #[tokio::test]
    async fn retries_transient_then_succeeds() {
        let n = AtomicU32::new(0);
        let policy = RetryPolicy { base_backoff: Duration::from_millis(1), ..Default::default() };
        let r: Result<u32, _> = with_retry(&policy, || async {
            if n.fetch_add(1, Ordering::SeqCst) < 2 {
                Err(api(500, "InternalError", "boom"))
            } else {
                Ok(7)
            }
        })
        .await;
        assert_eq!(r.unwrap(), 7);
        assert_eq!(n.load(Ordering::SeqCst), 3);
        let n = AtomicU32::new(0);
        let r: Result<u32, _> = with_retry(&policy, || async {
            n.fetch_add(1, Ordering::SeqCst);
            Err(api(422, "Invalid", "bad"))
        })
        .await;
        assert_eq!(r.unwrap_err().code, 422);
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }
}
