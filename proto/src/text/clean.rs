//! Untrusted text made safe for a terminal, a log line, the record or a page: bounded
//! and stripped of control characters (filled in by the rollout-trust work, issue 26).
