//! Media types and annotation keys of the drover bundle contract (docs/design.md §3, §4).

/// OCI image manifest media type used for bundles and signature manifests.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// OCI image index media type (layout `index.json`).
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// Docker schema 2 manifest media type (accepted when reading signature manifests).
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// `artifactType` of a drover bundle manifest.
pub const BUNDLE_ARTIFACT_TYPE: &str = "application/vnd.drover.bundle.v1";
/// Media type of the bundle config blob.
pub const BUNDLE_CONFIG: &str = "application/vnd.drover.bundle.config.v1+json";
/// Media type of the single content layer (the standard one, on purpose).
pub const BUNDLE_LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// Media type of a release record (docs/design.md §7).
pub const RELEASE_RECORD: &str = "application/vnd.drover.release.v1+json";
/// `artifactType` of a fleet report (docs/fleet.md).
pub const REPORT_ARTIFACT_TYPE: &str = "application/vnd.drover.report.v1";
/// Media type of a fleet report's config blob: the report document itself.
pub const REPORT_CONFIG: &str = "application/vnd.drover.report.v1+json";
/// `artifactType` of a channel statement (a signed bundle placement on a channel).
pub const STATEMENT_ARTIFACT_TYPE: &str = "application/vnd.drover.channel-statement.v1";
/// Media type of a channel statement document.
pub const STATEMENT: &str = "application/vnd.drover.channel-statement.v1+json";
/// `artifactType` of the fleet roster (the enrolled clusters' report keys).
pub const ROSTER_ARTIFACT_TYPE: &str = "application/vnd.drover.roster.v1";
/// Media type of the fleet roster document.
pub const ROSTER: &str = "application/vnd.drover.roster.v1+json";
/// Report manifest annotation: the cluster's report public key (base64 DER SPKI).
pub const ANN_REPORT_KEY: &str = "dev.drover.report.key";
/// Report manifest annotation: the ECDSA P-256 signature over the report document (base64 DER).
pub const ANN_REPORT_SIGNATURE: &str = "dev.drover.report.signature";
/// Media type of a cosign simple-signing layer.
pub const COSIGN_SIMPLESIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The empty OCI config descriptor media type.
pub const OCI_EMPTY: &str = "application/vnd.oci.empty.v1+json";

/// Layer annotation: the file name `oras pull` uses.
pub const ANN_TITLE: &str = "org.opencontainers.image.title";
/// Layer annotation: tells oras to unpack the tar.gz into a directory.
pub const ANN_ORAS_UNPACK: &str = "io.deis.oras.content.unpack";
/// Layer annotation: digest of the uncompressed tar, as oras expects it.
pub const ANN_ORAS_DIGEST: &str = "io.deis.oras.content.digest";
/// Manifest annotation: source repository.
pub const ANN_SOURCE: &str = "org.opencontainers.image.source";
/// Manifest annotation: source revision.
pub const ANN_REVISION: &str = "org.opencontainers.image.revision";
/// Manifest annotation: creation time (only when given).
pub const ANN_CREATED: &str = "org.opencontainers.image.created";
/// Manifest annotation: cluster type.
pub const ANN_CLUSTER_TYPE: &str = "dev.drover.cluster-type";
/// Manifest annotation: environment.
pub const ANN_ENVIRONMENT: &str = "dev.drover.environment";
/// Manifest annotation: sequence number.
pub const ANN_SEQUENCE: &str = "dev.drover.sequence";
/// Manifest annotation: the config's `minAgentVersion`, when it has one (docs/bundle.md,
/// "Compatibility"); `drover publish` tells from it, without reading the config, that a
/// channel's bundle carries more than its content.
pub const ANN_MIN_AGENT_VERSION: &str = "dev.drover.min-agent-version";
/// Index annotation naming a manifest in an OCI image layout.
pub const ANN_REF_NAME: &str = "org.opencontainers.image.ref.name";
/// Signature layer annotation holding the base64 signature.
pub const ANN_COSIGN_SIGNATURE: &str = "dev.cosignproject.cosign/signature";

/// Label every applied object carries.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Value of [`LABEL_MANAGED_BY`].
pub const MANAGED_BY_VALUE: &str = "drover";
/// Annotation naming the source (registry reference) an object came from.
pub const ANN_OBJ_SOURCE: &str = "drover.dev/source";
/// Annotation naming the bundle digest an object came from.
pub const ANN_OBJ_DIGEST: &str = "drover.dev/digest";
/// Annotation that keeps an object from being pruned when set to `disabled`.
pub const ANN_OBJ_PRUNE: &str = "drover.dev/prune";
