//! Stage 4, unpack: the content layer opened in memory with the `proto` codec and its
//! limits; every file must match its sha256 in the signed config index and hold exactly
//! one object whose identity matches the index.

use drover_proto::archive::UnpackLimits;
use drover_proto::bundle::{open_content_with, BundleObject};
use drover_proto::FetchedBundle;

use crate::stage::StageError;
use crate::verify::Verified;

/// The verified, unpacked bundle.
pub struct Unpacked {
    /// Manifest digest.
    pub digest: String,
    /// The signed config's sequence (the config itself is dropped once the objects are
    /// checked against its index: 10,000 entries take MiBs).
    pub sequence: u64,
    /// The objects, in index order (`value` is `Null`: parse `yaml` when needed).
    pub objects: Vec<BundleObject>,
}

/// Opens the content layer (the layer bytes are dropped afterwards). Each parsed object
/// is dropped once checked (`value` is `Null`): only the bytes are kept, and targets parse
/// one object at a time when they need it ([`crate::targets::PlannedObject::value`]).
pub fn unpack(v: Verified) -> Result<Unpacked, StageError> {
    // Only the config and the layer are needed; the other bytes go now.
    let FetchedBundle { digest, config, layer, .. } = v.bundle;
    let keep = |mut o: BundleObject| {
        o.value = serde_json::Value::Null;
        o.yaml.shrink_to_fit();
        o
    };
    let objects = open_content_with(&config, &layer, &UnpackLimits::default(), keep)
        .map_err(|e| StageError::Rejected { reason: "content", message: format!("{digest}: {e}") })?;
    Ok(Unpacked { digest, sequence: config.sequence, objects })
}
