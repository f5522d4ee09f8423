//! The local channel between `drover-agent` commands and their own agent: HTTP/1.1 over a
//! Unix socket, `agent.sock` in the agent's state directory. The state directory is the
//! agent's and private (0700, [`crate::statedir`]), so only the agent's user (and root)
//! can reach the socket, and nobody else can put one there: a command that reaches it
//! talks to the agent of that directory, whatever happens on the agent's TCP port (after
//! a crash, anyone may bind the port the agent used).
//!
//! Requests go by path, as on the port (`GET /status`, `GET /history?limit=N`); the
//! server is [`crate::serve::serve`] with the same router (and the same bounds), so a
//! command that is local by nature (reconciling now, say) is one more route, served here
//! only. The client ([`ask`]) checks what it connects to — the directory writable by its
//! owner only, the socket that owner's, the peer process that owner's or root's — and
//! reads at most a given number of bytes within a deadline.

use std::path::Path;
use std::time::Duration;

use rustix::fs::FileType;

use crate::statedir::StateDir;

/// The socket's name in the state directory.
pub const SOCKET: &str = "agent.sock";
/// How long a command waits for its agent's whole answer.
const DEADLINE: Duration = Duration::from_secs(10);

/// Binds the local socket in `state` (a stale one, left by a killed agent, is replaced).
/// The socket is private (the agent's umask is 077).
pub fn listen(state: &StateDir) -> std::io::Result<tokio::net::UnixListener> {
    state.remove(SOCKET)?;
    tokio::net::UnixListener::bind(state.at(SOCKET))
}

/// Removes the local socket when the agent stops.
pub fn close(state: &StateDir) {
    let _ = state.remove(SOCKET);
}

/// What asking the agent of a state directory gave.
#[derive(Debug)]
pub enum Answer {
    /// The agent answered 2xx with this body.
    Body(String),
    /// No agent answers there (none runs, or it crashed): why.
    NoAgent(String),
    /// Something answered but not as the agent does (an error status, a body over the
    /// bound, a peer of another user): what.
    Failed(String),
}

/// Asks the agent of the state directory `dir` for `path`, reading at most `cap` bytes.
pub async fn ask(dir: &Path, path: &str, cap: usize) -> Answer {
    ask_with(dir, hyper::Method::GET, path, cap).await
}

/// [`ask`] with another method (`POST` for a command that changes what the agent does).
pub async fn ask_with(dir: &Path, method: hyper::Method, path: &str, cap: usize) -> Answer {
    let state = match StateDir::existing(dir) {
        Ok(s) => s,
        Err(e) => return Answer::NoAgent(format!("{}: {e}", dir.display())),
    };
    let owner = match trusted(&state) {
        Ok(o) => o,
        Err(why) => return Answer::NoAgent(why),
    };
    let stream = match tokio::net::UnixStream::connect(state.at(SOCKET)).await {
        Ok(s) => s,
        Err(e) => return Answer::NoAgent(format!("{}: {e}", dir.join(SOCKET).display())),
    };
    match stream.peer_cred() {
        Ok(c) if c.uid() == owner || c.uid() == 0 => {}
        Ok(c) => return Answer::Failed(format!("{} is served by a process of uid {}, not of the directory's owner (uid {owner})", dir.join(SOCKET).display(), c.uid())),
        Err(e) => return Answer::Failed(format!("{}: {e}", dir.join(SOCKET).display())),
    }
    match tokio::time::timeout(DEADLINE, send(stream, "localhost", method, path, cap)).await {
        Ok(Ok(body)) => Answer::Body(body),
        Ok(Err(e)) => Answer::Failed(format!("{}{path}: {e}", dir.join(SOCKET).display())),
        Err(_) => Answer::Failed(format!("{}{path}: no answer within {}s", dir.join(SOCKET).display(), DEADLINE.as_secs())),
    }
}

/// The owner of the directory when only it could have made the socket in it: the
/// directory not writable by group or others, the socket a socket of that owner.
fn trusted(state: &StateDir) -> Result<u32, String> {
    let dir = state.path().display();
    let (owner, mode) = state.owner_and_mode().map_err(|e| format!("{dir}: {e}"))?;
    if mode & 0o022 != 0 {
        return Err(format!("{dir} may be written by group or others (mode {mode:o}): a socket there could be anyone's, so it is not asked"));
    }
    match crate::fsat::entry(state.fd(), SOCKET).map_err(|e| format!("{dir}/{SOCKET}: {e}"))? {
        None => Err(format!("{dir}/{SOCKET} does not exist")),
        Some((FileType::Socket, uid)) if uid == owner || uid == 0 => Ok(owner),
        Some((FileType::Socket, uid)) => Err(format!("{dir}/{SOCKET} belongs to uid {uid}, not to the directory's owner (uid {owner})")),
        Some(_) => Err(format!("{dir}/{SOCKET} is not a socket")),
    }
}

/// One `GET path` over `io` (HTTP/1.1, `Host: host`): the body of a 2xx answer, read to
/// at most `cap` bytes; an error for another status or a longer body.
pub async fn get<I>(io: I, host: &str, path: &str, cap: usize) -> Result<String, String>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    send(io, host, hyper::Method::GET, path, cap).await
}

/// [`get`] with another method (no request body).
pub async fn send<I>(io: I, host: &str, method: hyper::Method, path: &str, cap: usize) -> Result<String, String>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io)).await.map_err(|e| e.to_string())?;
    let driver = tokio::spawn(conn);
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, host)
        .header(hyper::header::CONNECTION, "close")
        .body(axum::body::Body::empty())
        .map_err(|e| e.to_string())?;
    let res = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = res.status();
    let body = axum::body::to_bytes(axum::body::Body::new(res.into_body()), cap).await;
    driver.abort();
    let body = body.map_err(|e| format!("{e} (an answer is read to at most {cap} bytes)"))?;
    let text = String::from_utf8_lossy(&body).into_owned();
    if !status.is_success() {
        let first: String = text.chars().take(200).collect();
        return Err(format!("HTTP {status}: {}", first.trim()));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_or_stale_socket_is_no_agent() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::claim(&tmp.path().join("state"), false).unwrap();
        assert!(matches!(ask(state.path(), "/status", 1024).await, Answer::NoAgent(m) if m.contains("does not exist")));
        // A socket nobody accepts on (its agent was killed).
        drop(listen(&state).unwrap());
        assert!(matches!(ask(state.path(), "/status", 1024).await, Answer::NoAgent(_)));
        // A listener that answers: asked, bounded.
        let l = listen(&state).unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2048\r\n\r\n").await;
            let _ = s.write_all(&[b'a'; 2048]).await;
        });
        assert!(matches!(ask(state.path(), "/status", 1024).await, Answer::Failed(m) if m.contains("1024 bytes")));
    }
}
