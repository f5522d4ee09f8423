//! Stage 4, unpack: the content layer opened in memory with the `proto` codec and its
//! limits; every file must match its sha256 in the signed config index and hold exactly
//! one object whose identity matches the index.

use drover_proto::archive::UnpackLimits;
use drover_proto::bundle::{open_content, BundleObject};
use drover_proto::config::BundleConfig;

use crate::pipeline::StageError;
use crate::verify::Verified;

/// The verified, unpacked bundle.
pub struct Unpacked {
    /// Manifest digest.
    pub digest: String,
    /// Signed config.
    pub config: BundleConfig,
    /// The objects, in index order.
    pub objects: Vec<BundleObject>,
}

/// Opens the content layer (the layer bytes are dropped afterwards).
pub fn unpack(v: Verified) -> Result<Unpacked, StageError> {
    let b = v.bundle;
    let objects = open_content(&b.config, &b.layer, &UnpackLimits::default())
        .map_err(|e| StageError::Rejected { reason: "content", message: format!("{}: {e}", b.digest) })?;
    Ok(Unpacked { digest: b.digest, config: b.config, objects })
}
