//! References (docs/design.md §2): registry references, `oci:DIR[:REF]` and `oci-archive:FILE[:REF]`.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::digest::is_valid_digest;

/// Why a reference string was rejected.
#[derive(Debug, thiserror::Error)]
#[error("invalid reference {input:?}: {reason}")]
pub struct ReferenceError {
    /// The text that was parsed.
    pub input: String,
    /// What is wrong with it and what to write instead.
    pub reason: String,
}

/// A parsed reference: where a bundle lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference {
    /// `HOST[:PORT]/REPO[:TAG][@sha256:HEX]`.
    Registry(RegistryRef),
    /// `oci:DIR[:REF]`: an OCI image layout directory.
    Layout {
        /// The layout directory.
        dir: PathBuf,
        /// The `org.opencontainers.image.ref.name` (a tag, or `<repository>:<tag>`).
        name: Option<String>,
    },
    /// `oci-archive:FILE[:REF]`: a tar of an OCI image layout.
    Archive {
        /// The archive file.
        file: PathBuf,
        /// The `org.opencontainers.image.ref.name` (a tag, or `<repository>:<tag>`).
        name: Option<String>,
    },
}

/// A reference into a registry repository.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RegistryRef {
    /// `HOST[:PORT]`.
    pub registry: String,
    /// Repository path, e.g. `fleet/edge-small`.
    pub repository: String,
    /// Tag, if given.
    pub tag: Option<String>,
    /// Digest (`sha256:<hex>`), if given.
    pub digest: Option<String>,
}

impl RegistryRef {
    /// Parses `HOST[:PORT]/REPO[:TAG][@sha256:HEX]`.
    pub fn parse(input: &str) -> Result<Self, ReferenceError> {
        let err = |reason: &str| ReferenceError { input: input.to_string(), reason: reason.to_string() };
        let (rest, digest) = match input.split_once('@') {
            Some((r, d)) => {
                if !is_valid_digest(d) {
                    return Err(err("the digest after '@' must be sha256:<64 lowercase hex digits>"));
                }
                (r, Some(d.to_string()))
            }
            None => (input, None),
        };
        let (host, path) = rest
            .split_once('/')
            .ok_or_else(|| err("expected HOST[:PORT]/REPOSITORY[:TAG][@sha256:HEX], e.g. registry.example.com/fleet/edge:prod"))?;
        if !(host.contains('.') || host.contains(':') || host == "localhost") {
            return Err(err("the first path component must be a registry host (with a '.' or ':PORT', or 'localhost'); drover has no default registry"));
        }
        let (repository, tag) = match path.rfind(':') {
            Some(i) if !path[i..].contains('/') => (&path[..i], Some(path[i + 1..].to_string())),
            _ => (path, None),
        };
        if repository.is_empty() || !repository.split('/').all(valid_path_component) {
            return Err(err("repository path components must be lowercase letters, digits and single '.', '_', '__' or '-' separators"));
        }
        if let Some(t) = &tag {
            if !valid_tag(t) {
                return Err(err("a tag is 1-128 characters of letters, digits, '_', '.', '-' and must not start with '.' or '-'"));
            }
        }
        Ok(RegistryRef { registry: host.to_string(), repository: repository.to_string(), tag, digest })
    }

    /// The same repository with another tag and no digest.
    pub fn with_tag(&self, tag: &str) -> Self {
        RegistryRef { tag: Some(tag.to_string()), digest: None, ..self.clone() }
    }

    /// The same repository pinned to a digest (no tag).
    pub fn with_digest(&self, digest: &str) -> Self {
        RegistryRef { tag: None, digest: Some(digest.to_string()), ..self.clone() }
    }

    /// `HOST/REPO` without tag or digest (what cosign puts in `docker-reference`).
    pub fn repository_url(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// The tag or digest to look up: the digest when given, else the tag.
    pub fn lookup(&self) -> Option<&str> {
        self.digest.as_deref().or(self.tag.as_deref())
    }

    /// Converts to an `oci_client` reference (tag `latest` never implied: callers pass one).
    pub fn to_oci(&self) -> oci_client::Reference {
        match (&self.tag, &self.digest) {
            (Some(t), Some(d)) => oci_client::Reference::with_tag_and_digest(
                self.registry.clone(),
                self.repository.clone(),
                t.clone(),
                d.clone(),
            ),
            (None, Some(d)) => oci_client::Reference::with_digest(self.registry.clone(), self.repository.clone(), d.clone()),
            (Some(t), None) => oci_client::Reference::with_tag(self.registry.clone(), self.repository.clone(), t.clone()),
            (None, None) => oci_client::Reference::with_tag(self.registry.clone(), self.repository.clone(), "latest".into()),
        }
    }
}

impl fmt::Display for RegistryRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

fn valid_path_component(c: &str) -> bool {
    // [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*
    !c.is_empty()
        && c.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
        && c.as_bytes()[0].is_ascii_alphanumeric()
        && c.as_bytes()[c.len() - 1].is_ascii_alphanumeric()
        && !c.contains("..")
}

/// True when `t` is a valid OCI tag.
pub fn valid_tag(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= 128
        && (t.as_bytes()[0].is_ascii_alphanumeric() || t.as_bytes()[0] == b'_')
        && t.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

impl Reference {
    /// Parses any reference form of docs/design.md §2.
    pub fn parse(input: &str) -> Result<Self, ReferenceError> {
        let split = |rest: &str| -> Result<(PathBuf, Option<String>), ReferenceError> {
            // `DIR@sha256:HEX` names a manifest by digest; otherwise `DIR[:REF]`.
            let by_digest = rest.rsplit_once('@').filter(|(p, d)| crate::digest::is_valid_digest(d) && !p.contains(':'));
            let (path, name) = match (by_digest, rest.split_once(':')) {
                (Some((p, d)), _) => (p, Some(d.to_string())),
                (None, Some((p, n))) => (p, Some(n.to_string())),
                (None, None) => (rest, None),
            };
            if path.is_empty() {
                return Err(ReferenceError { input: input.into(), reason: "the path after 'oci:' or 'oci-archive:' is empty".into() });
            }
            if matches!(&name, Some(n) if n.is_empty()) {
                return Err(ReferenceError { input: input.into(), reason: "the ref name after the path is empty".into() });
            }
            Ok((PathBuf::from(path), name))
        };
        if let Some(rest) = input.strip_prefix("oci-archive:") {
            let (file, name) = split(rest)?;
            Ok(Reference::Archive { file, name })
        } else if let Some(rest) = input.strip_prefix("oci:") {
            let (dir, name) = split(rest)?;
            Ok(Reference::Layout { dir, name })
        } else {
            RegistryRef::parse(input).map(Reference::Registry)
        }
    }

    /// The registry reference, if this is one.
    pub fn as_registry(&self) -> Option<&RegistryRef> {
        match self {
            Reference::Registry(r) => Some(r),
            _ => None,
        }
    }
}

impl FromStr for Reference {
    type Err = ReferenceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Reference::parse(s)
    }
}

impl FromStr for RegistryRef {
    type Err = ReferenceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RegistryRef::parse(s)
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reference::Registry(r) => r.fmt(f),
            Reference::Layout { dir, name } => write!(f, "oci:{}{}", dir.display(), name_suffix(name)),
            Reference::Archive { file, name } => write!(f, "oci-archive:{}{}", file.display(), name_suffix(name)),
        }
    }
}

/// `:REF`, or `@sha256:HEX` for a digest.
fn name_suffix(name: &Option<String>) -> String {
    match name {
        Some(n) if crate::digest::is_valid_digest(n) => format!("@{n}"),
        Some(n) => format!(":{n}"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_forms() {
        let r = RegistryRef::parse("127.0.0.1:5000/fleet/edge:prod").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "fleet/edge");
        assert_eq!(r.tag.as_deref(), Some("prod"));
        let d = format!("sha256:{}", "a".repeat(64));
        let r = RegistryRef::parse(&format!("reg.example.com/x@{d}")).unwrap();
        assert_eq!(r.tag, None);
        assert_eq!(r.digest.as_deref(), Some(d.as_str()));
        let r = RegistryRef::parse(&format!("localhost/x:t@{d}")).unwrap();
        assert_eq!((r.tag.as_deref(), r.digest.is_some()), (Some("t"), true));
        assert_eq!(r.to_string(), format!("localhost/x:t@{d}"));
        let r = RegistryRef::parse("localhost:5000/x").unwrap();
        assert_eq!((r.repository.as_str(), r.tag.clone()), ("x", None));
    }

    #[test]
    fn registry_errors() {
        for bad in ["edge:prod", "reg.io/UPPER:x", "reg.io/x:-bad", "reg.io/x@sha256:12", "reg.io/", "reg.io/a//b"] {
            assert!(RegistryRef::parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn layout_forms() {
        assert_eq!(
            Reference::parse("oci:/tmp/l:fleet/edge:prod").unwrap(),
            Reference::Layout { dir: "/tmp/l".into(), name: Some("fleet/edge:prod".into()) }
        );
        assert_eq!(
            Reference::parse("oci-archive:a.tar").unwrap(),
            Reference::Archive { file: "a.tar".into(), name: None }
        );
        assert!(Reference::parse("oci:").is_err());
        assert!(Reference::parse("oci:dir:").is_err());
        let d = format!("sha256:{}", "b".repeat(64));
        let r = Reference::parse(&format!("oci:lay2@{d}")).unwrap();
        assert_eq!(r, Reference::Layout { dir: "lay2".into(), name: Some(d.clone()) });
        assert_eq!(r.to_string(), format!("oci:lay2@{d}"));
    }
}
