//! OCI manifest and descriptor types with a deterministic JSON encoding.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::media;

/// An OCI content descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Media type of the referenced content.
    pub media_type: String,
    /// `sha256:<hex>` of the referenced content.
    pub digest: String,
    /// Size in bytes.
    pub size: u64,
    /// Artifact type (index entries only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// The content itself, base64 (OCI 1.1 `data`: a reader of a small config needs no
    /// second request). Written only for drover's small signed documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
}

impl Descriptor {
    /// A descriptor for `data` with `media_type` and no annotations.
    pub fn of(media_type: &str, data: &[u8]) -> Self {
        Descriptor {
            media_type: media_type.to_string(),
            digest: crate::digest::sha256_digest(data),
            size: data.len() as u64,
            artifact_type: None,
            annotations: BTreeMap::new(),
            data: None,
        }
    }
}

/// An OCI image manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always 2.
    pub schema_version: u32,
    /// `application/vnd.oci.image.manifest.v1+json` (or Docker's, when read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// Artifact type (drover bundles: [`media::BUNDLE_ARTIFACT_TYPE`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    /// The config blob.
    pub config: Descriptor,
    /// The layers.
    pub layers: Vec<Descriptor>,
    /// Manifest annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Manifest {
    /// Serializes to the canonical bytes that are pushed and digested.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("manifest serializes")
    }

    /// Parses manifest bytes.
    pub fn from_slice(data: &[u8]) -> Result<Self, String> {
        let m: Manifest = serde_json::from_slice(data).map_err(|e| format!("manifest is not a valid OCI image manifest: {e}"))?;
        if m.schema_version != 2 {
            return Err(format!("manifest schemaVersion {} is not 2", m.schema_version));
        }
        Ok(m)
    }

    /// True when this manifest is a drover bundle (by artifact type or config media type).
    pub fn is_bundle(&self) -> bool {
        self.artifact_type.as_deref() == Some(media::BUNDLE_ARTIFACT_TYPE) || self.config.media_type == media::BUNDLE_CONFIG
    }

    /// Checks the bundle shape: bundle config media type, exactly one tar+gzip layer.
    /// Returns the content layer descriptor.
    pub fn bundle_layer(&self) -> Result<&Descriptor, String> {
        if self.config.media_type != media::BUNDLE_CONFIG {
            return Err(format!(
                "not a drover bundle: config media type is {:?}, expected {:?}",
                self.config.media_type,
                media::BUNDLE_CONFIG
            ));
        }
        match self.layers.as_slice() {
            [layer] if layer.media_type == media::BUNDLE_LAYER => Ok(layer),
            [layer] => Err(format!("bundle layer has media type {:?}, expected {:?}", layer.media_type, media::BUNDLE_LAYER)),
            layers => Err(format!("a bundle has exactly one layer, this manifest has {}", layers.len())),
        }
    }
}

/// An OCI image index (`index.json` of a layout).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    /// Always 2.
    pub schema_version: u32,
    /// `application/vnd.oci.image.index.v1+json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The manifests.
    pub manifests: Vec<Descriptor>,
}

impl Default for Index {
    fn default() -> Self {
        Index { schema_version: 2, media_type: Some(media::OCI_INDEX.to_string()), manifests: vec![] }
    }
}
