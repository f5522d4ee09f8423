//! Signing keys (docs/design.md §4): cosign's encrypted private-key format and plain PKCS#8
//! PEM private keys, PEM SubjectPublicKeyInfo public keys, all ECDSA P-256, and the
//! key fingerprint (`sha256` of the DER SPKI, hex) used to name keys in reports.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use sigstore::crypto::signing_key::ecdsa::ec::EcdsaKeys;
use sigstore::crypto::signing_key::ecdsa::ECDSAKeys;
use sigstore::crypto::signing_key::{kdf, SigStoreKeyPair, SigStoreSigner};
use sigstore::crypto::{CosignVerificationKey, Signature, SigningScheme};
use sigstore::errors::SigstoreError;

/// PEM label cosign >= 2 writes for encrypted private keys (and `drover keygen` too).
pub const SIGSTORE_PRIVATE_LABEL: &str = "ENCRYPTED SIGSTORE PRIVATE KEY";
/// PEM label older cosign releases write for encrypted private keys.
pub const COSIGN_PRIVATE_LABEL: &str = "ENCRYPTED COSIGN PRIVATE KEY";
/// PEM label of an unencrypted PKCS#8 private key.
pub const PKCS8_PRIVATE_LABEL: &str = "PRIVATE KEY";
/// PEM label of a SubjectPublicKeyInfo public key.
pub const PUBLIC_LABEL: &str = "PUBLIC KEY";

/// Environment variable holding the private-key password (checked first).
pub const PASSWORD_ENV: &str = "DROVER_KEY_PASSWORD";
/// cosign's password variable, used when [`PASSWORD_ENV`] is not set.
pub const COSIGN_PASSWORD_ENV: &str = "COSIGN_PASSWORD";

/// Why a key could not be loaded or used. Every variant names the key's source.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file does not exist.
    #[error("key file {0} does not exist")]
    Missing(String),
    /// The file exists but cannot be read.
    #[error("key file {path} cannot be read: {message}")]
    Unreadable {
        /// The file.
        path: String,
        /// The OS error.
        message: String,
    },
    /// The file is not PEM or its content is damaged.
    #[error("key file {path} is not a usable key: {reason}")]
    Malformed {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A public key was given where a private key is needed.
    #[error("key file {0} is a public key; signing needs the private key (e.g. drover.key, cosign.key), not the .pub file")]
    PublicNotPrivate(String),
    /// A private key was given where a public key is expected.
    #[error("key file {0} is a private key; verification takes the public key (e.g. drover.pub, cosign.pub), never the private key")]
    PrivateNotPublic(String),
    /// Decryption failed: the password is wrong.
    #[error("wrong password for encrypted key file {0} (set DROVER_KEY_PASSWORD, or COSIGN_PASSWORD, to the password it was created with)")]
    WrongPassword(String),
    /// The key is not ECDSA P-256.
    #[error("key file {path}: {reason}; drover signs and verifies with ECDSA P-256 keys only (as `cosign generate-key-pair` and `drover keygen` create)")]
    Unsupported {
        /// The file.
        path: String,
        /// What kind of key it is.
        reason: String,
    },
    /// Signing or encoding failed inside the crypto library.
    #[error("key {path}: {message}")]
    Crypto {
        /// The file (or "generated key").
        path: String,
        /// The library error.
        message: String,
    },
}

/// The password rule of the CLI: `DROVER_KEY_PASSWORD`, else `COSIGN_PASSWORD`, else empty.
pub fn password_from_env() -> String {
    std::env::var(PASSWORD_ENV).or_else(|_| std::env::var(COSIGN_PASSWORD_ENV)).unwrap_or_default()
}

/// The fingerprint of a public key: lowercase hex sha256 of its DER SubjectPublicKeyInfo.
pub fn fingerprint(spki_der: &[u8]) -> String {
    crate::digest::sha256_hex(spki_der)
}

/// One PEM block: its label and decoded contents.
struct PemBlock {
    label: String,
    der: Vec<u8>,
}

/// Parses the first PEM block of `data` (other text around it is ignored).
fn parse_pem(data: &[u8], source: &str) -> Result<PemBlock, KeyError> {
    let malformed = |reason: &str| KeyError::Malformed { path: source.to_string(), reason: reason.to_string() };
    let text = std::str::from_utf8(data).map_err(|_| malformed("not a PEM text file (binary content)"))?;
    let mut lines = text.lines().map(str::trim);
    let label = loop {
        match lines.next() {
            None => return Err(malformed("no PEM block (-----BEGIN ...-----) found")),
            Some(l) => {
                if let Some(rest) = l.strip_prefix("-----BEGIN ") {
                    break rest.strip_suffix("-----").ok_or_else(|| malformed("broken PEM header line"))?.to_string();
                }
            }
        }
    };
    let end = format!("-----END {label}-----");
    let mut b64 = String::new();
    loop {
        match lines.next() {
            None => return Err(malformed(&format!("PEM block {label:?} has no END line"))),
            Some(l) if l == end => break,
            Some(l) if l.contains(':') => continue, // RFC 1421 headers (Proc-Type etc.)
            Some(l) => b64.push_str(l),
        }
    }
    let der = base64::engine::general_purpose::STANDARD
        .decode(b64.as_bytes())
        .map_err(|e| malformed(&format!("PEM block {label:?} is not valid base64: {e}")))?;
    Ok(PemBlock { label, der })
}

fn read_file(path: &Path) -> Result<Vec<u8>, KeyError> {
    std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => KeyError::Missing(path.display().to_string()),
        _ => KeyError::Unreadable { path: path.display().to_string(), message: e.to_string() },
    })
}

fn is_private_label(label: &str) -> bool {
    label.contains("PRIVATE KEY")
}

/// A trusted public key (ECDSA P-256), with where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    spki_der: Vec<u8>,
    fingerprint: String,
    source: String,
}

impl PublicKey {
    /// Loads a PEM SubjectPublicKeyInfo public key from a file.
    pub fn from_file(path: &Path) -> Result<Self, KeyError> {
        Self::from_pem(&read_file(path)?, &path.display().to_string())
    }

    /// Parses PEM SubjectPublicKeyInfo bytes; `source` names them in errors and reports.
    pub fn from_pem(data: &[u8], source: &str) -> Result<Self, KeyError> {
        let block = parse_pem(data, source)?;
        if block.label != PUBLIC_LABEL {
            if is_private_label(&block.label) {
                return Err(KeyError::PrivateNotPublic(source.to_string()));
            }
            return Err(KeyError::Malformed {
                path: source.to_string(),
                reason: format!("PEM block is {:?}, expected \"{PUBLIC_LABEL}\"", block.label),
            });
        }
        Self::from_spki_der(block.der, source)
    }

    /// Builds a public key from DER SubjectPublicKeyInfo bytes.
    pub fn from_spki_der(der: Vec<u8>, source: &str) -> Result<Self, KeyError> {
        match CosignVerificationKey::try_from_der(&der) {
            Ok(CosignVerificationKey::ECDSA_P256_SHA256_ASN1(_)) => {}
            Ok(other) => {
                let kind = format!("{other:?}");
                let kind = kind.split('(').next().unwrap_or("unknown").to_string();
                return Err(KeyError::Unsupported { path: source.into(), reason: format!("the key type is {kind}") });
            }
            Err(e) => return Err(KeyError::Malformed { path: source.into(), reason: format!("not a SubjectPublicKeyInfo: {e}") }),
        }
        Ok(PublicKey { fingerprint: fingerprint(&der), spki_der: der, source: source.to_string() })
    }

    /// The fingerprint (hex sha256 of the DER SPKI).
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Where the key came from (file path), for messages.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The DER SubjectPublicKeyInfo bytes.
    pub fn spki_der(&self) -> &[u8] {
        &self.spki_der
    }

    /// The PEM encoding (what `drover keygen` writes to `drover.pub`).
    pub fn to_pem(&self) -> String {
        let b64 = base64::engine::general_purpose::STANDARD.encode(&self.spki_der);
        let mut out = format!("-----BEGIN {PUBLIC_LABEL}-----\n");
        for chunk in b64.as_bytes().chunks(64) {
            out.push_str(std::str::from_utf8(chunk).expect("base64 is ASCII"));
            out.push('\n');
        }
        out.push_str(&format!("-----END {PUBLIC_LABEL}-----\n"));
        out
    }

    /// Verifies an ASN.1 DER ECDSA-P256/SHA-256 signature over `message`.
    pub fn verify(&self, message: &[u8], signature_der: &[u8]) -> bool {
        let key = CosignVerificationKey::ECDSA_P256_SHA256_ASN1(self.spki_der.clone());
        key.verify_signature(Signature::Raw(signature_der), message).is_ok()
    }
}

/// A private signing key (ECDSA P-256) and its public half.
pub struct PrivateKey {
    keys: EcdsaKeys,
    signer: SigStoreSigner,
    public: PublicKey,
}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivateKey").field("public", &self.public).finish_non_exhaustive()
    }
}

impl PrivateKey {
    /// Generates a new random P-256 key.
    pub fn generate() -> Result<Self, KeyError> {
        let keys = EcdsaKeys::new(sigstore::crypto::signing_key::ecdsa::EllipticCurve::P256)
            .map_err(|e| KeyError::Crypto { path: "generated key".into(), message: e.to_string() })?;
        Self::from_keys(keys, "generated key")
    }

    /// Loads a private key file: cosign's encrypted format (decrypted with `password`) or
    /// unencrypted PKCS#8 PEM (password ignored).
    pub fn from_file(path: &Path, password: &str) -> Result<Self, KeyError> {
        Self::from_pem(&read_file(path)?, password, &path.display().to_string())
    }

    /// Parses private key PEM bytes; `source` names them in errors.
    pub fn from_pem(data: &[u8], password: &str, source: &str) -> Result<Self, KeyError> {
        let block = parse_pem(data, source)?;
        let der = match block.label.as_str() {
            SIGSTORE_PRIVATE_LABEL | COSIGN_PRIVATE_LABEL => match kdf::decrypt(&block.der, password.as_bytes()) {
                Ok(der) => der,
                Err(SigstoreError::PrivateKeyEncryptError(_)) => return Err(KeyError::WrongPassword(source.into())),
                Err(e) => {
                    return Err(KeyError::Malformed { path: source.into(), reason: format!("encrypted key envelope: {e}") })
                }
            },
            PKCS8_PRIVATE_LABEL => block.der,
            PUBLIC_LABEL => return Err(KeyError::PublicNotPrivate(source.into())),
            "EC PRIVATE KEY" => {
                return Err(KeyError::Malformed {
                    path: source.into(),
                    reason: "SEC1 \"EC PRIVATE KEY\" is not accepted; convert it with `openssl pkcs8 -topk8 -nocrypt -in KEY`".into(),
                })
            }
            l if is_private_label(l) => {
                return Err(KeyError::Unsupported { path: source.into(), reason: format!("PEM block {l:?}") })
            }
            l => {
                return Err(KeyError::Malformed {
                    path: source.into(),
                    reason: format!("PEM block is {l:?}, expected \"{SIGSTORE_PRIVATE_LABEL}\" or \"{PKCS8_PRIVATE_LABEL}\""),
                })
            }
        };
        let keys = EcdsaKeys::from_pkcs8_der(&der).map_err(|e| KeyError::Unsupported {
            path: source.into(),
            reason: format!("not an ECDSA PKCS#8 key ({e})"),
        })?;
        Self::from_keys(keys, source)
    }

    fn from_keys(keys: EcdsaKeys, source: &str) -> Result<Self, KeyError> {
        let wrapped = keys.to_wrapped_ecdsa_keys().map_err(|e| KeyError::Crypto { path: source.into(), message: e.to_string() })?;
        if !matches!(wrapped, ECDSAKeys::P256(_)) {
            return Err(KeyError::Unsupported { path: source.into(), reason: format!("the key is {wrapped}") });
        }
        let pair = SigStoreKeyPair::ECDSA(wrapped);
        let signer = pair
            .to_sigstore_signer(&SigningScheme::ECDSA_P256_SHA256_ASN1)
            .map_err(|e| KeyError::Unsupported { path: source.into(), reason: e.to_string() })?;
        let spki = pair.public_key_to_der().map_err(|e| KeyError::Crypto { path: source.into(), message: e.to_string() })?;
        let public = PublicKey::from_spki_der(spki, source)?;
        Ok(PrivateKey { keys, signer, public })
    }

    /// The public half.
    pub fn public_key(&self) -> &PublicKey {
        &self.public
    }

    /// Signs `message` with ECDSA-P256/SHA-256; returns the ASN.1 DER signature.
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        self.signer.sign(message).map_err(|e| KeyError::Crypto { path: self.public.source.clone(), message: e.to_string() })
    }

    /// cosign's encrypted private-key PEM (`ENCRYPTED SIGSTORE PRIVATE KEY`, scrypt +
    /// nacl/secretbox), as `cosign generate-key-pair` writes it.
    pub fn to_encrypted_pem(&self, password: &str) -> Result<String, KeyError> {
        use sigstore::crypto::signing_key::KeyPair as _;
        self.keys
            .private_key_to_encrypted_pem(password.as_bytes())
            .map(|z| z.to_string())
            .map_err(|e| KeyError::Crypto { path: self.public.source.clone(), message: e.to_string() })
    }

    /// Unencrypted PKCS#8 PEM (`PRIVATE KEY`).
    pub fn to_pkcs8_pem(&self) -> Result<String, KeyError> {
        use sigstore::crypto::signing_key::KeyPair as _;
        self.keys
            .private_key_to_pem()
            .map(|z| z.to_string())
            .map_err(|e| KeyError::Crypto { path: self.public.source.clone(), message: e.to_string() })
    }
}

/// Loads public keys from files, in order.
pub fn load_public_keys(paths: &[PathBuf]) -> Result<Vec<PublicKey>, KeyError> {
    paths.iter().map(|p| PublicKey::from_file(p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encrypted_roundtrip_and_errors() {
        let k = PrivateKey::generate().unwrap();
        let pem = k.to_encrypted_pem("pw").unwrap();
        assert!(pem.starts_with("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----"));
        let back = PrivateKey::from_pem(pem.as_bytes(), "pw", "k").unwrap();
        assert_eq!(back.public_key().fingerprint(), k.public_key().fingerprint());
        assert!(matches!(PrivateKey::from_pem(pem.as_bytes(), "no", "k"), Err(KeyError::WrongPassword(_))));
        let pubpem = k.public_key().to_pem();
        assert!(matches!(PrivateKey::from_pem(pubpem.as_bytes(), "", "p"), Err(KeyError::PublicNotPrivate(_))));
        assert!(matches!(PublicKey::from_pem(pem.as_bytes(), "k"), Err(KeyError::PrivateNotPublic(_))));
        let p = PublicKey::from_pem(pubpem.as_bytes(), "p").unwrap();
        let sig = k.sign(b"hello").unwrap();
        assert!(p.verify(b"hello", &sig));
        assert!(!p.verify(b"hellO", &sig));
        let plain = k.to_pkcs8_pem().unwrap();
        assert_eq!(PrivateKey::from_pem(plain.as_bytes(), "", "x").unwrap().public_key().fingerprint(), k.public_key().fingerprint());
    }
}
