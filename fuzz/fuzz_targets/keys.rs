//! The cosign key parser: `PublicKey::from_pem` (every `--trust-key`) and
//! `PrivateKey::from_pem` (every `--key`: cosign's encrypted envelope or PKCS#8). Never
//! panics; errors name the key's source; a key that loads signs and verifies.
#![no_main]

use drover_proto::keys::{PrivateKey, PublicKey};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match PublicKey::from_pem(data, "fuzz.pub") {
        Ok(k) => assert_eq!(PublicKey::from_pem(k.to_pem().as_bytes(), "again").unwrap().fingerprint(), k.fingerprint()),
        Err(e) => assert!(e.to_string().contains("fuzz.pub"), "{e}"),
    }
    match PrivateKey::from_pem(data, "", "fuzz.key") {
        Ok(k) => {
            let sig = k.sign(b"payload").unwrap();
            assert!(k.public_key().verify(b"payload", &sig));
        }
        Err(e) => assert!(e.to_string().contains("fuzz.key"), "{e}"),
    }
});
