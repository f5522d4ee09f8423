//! A test certificate authority (generated in memory with `rcgen`, P-256) that issues
//! server certificates for loopback registries. Test support only.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// A CA certificate and its key.
pub struct TestCa {
    /// The CA certificate (PEM): what a client passes with `--ca-file`.
    pub cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A server certificate and its private key (PEM).
#[derive(Debug, Clone)]
pub struct ServerCert {
    /// Certificate chain (the leaf; the CA is the client's business).
    pub cert_pem: String,
    /// PKCS#8 private key.
    pub key_pem: String,
}

impl TestCa {
    /// A fresh CA named `name`.
    pub fn new(name: &str) -> TestCa {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let cert = params.self_signed(&key).expect("CA certificate");
        TestCa { cert_pem: cert.pem(), issuer: Issuer::new(params, key) }
    }

    /// A server certificate for `names` (DNS names or IP addresses), signed by this CA.
    pub fn issue(&self, names: &[&str]) -> ServerCert {
        let key = KeyPair::generate().expect("server key");
        let mut params = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).expect("server params");
        params.distinguished_name.push(DnType::CommonName, names.first().copied().unwrap_or("server"));
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &self.issuer).expect("server certificate");
        ServerCert { cert_pem: cert.pem(), key_pem: key.serialize_pem() }
    }

    /// Writes the CA certificate to `dir/name` and returns the path.
    pub fn write(&self, dir: &Path, name: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, &self.cert_pem).expect("write CA");
        p
    }
}
