//! Stage 6, apply: hands the planned groups to the target; one outcome per object. What a
//! target says about a Secret (an API server's message) is recorded, logged and shown only
//! with the Secret's values masked ([`mask_secret_messages`]).

use drover_proto::object::ObjectRef;
use drover_proto::text::redact;

use crate::stage::StageError;
use crate::targets::{ApplyReport, ApplyRequest, Target};

/// Applies `req`. A report with failures is still `Ok` (the outcomes are recorded);
/// `Err` means the target could not be used at all.
pub async fn apply(target: &dyn Target, req: &ApplyRequest) -> Result<ApplyReport, StageError> {
    let mut report = target.apply(req).await.map_err(|e| StageError::Failed(format!("applying {} to {}: {e}", req.digest, target.describe())))?;
    for o in &mut report.outcomes {
        o.message = mask_secret_messages(req, &o.object, &o.message);
    }
    Ok(report)
}

/// `message` about `id` with the values of the bundle's Secret `id` (as written and
/// decoded) replaced by `***`: an API server's message may quote the value it refused, and
/// messages go to history, `/status`, logs and fleet reports. Other objects: unchanged.
pub fn mask_secret_messages(req: &ApplyRequest, id: &ObjectRef, message: &str) -> String {
    if message.is_empty() || id.kind != "Secret" {
        return message.to_string();
    }
    let values = req.objects().find(|o| &o.id == id).and_then(|o| o.value().ok()).map(|v| redact::secret_values(&v)).unwrap_or_default();
    redact::mask(message, &values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::{OrderGroup, PlannedObject};
    use std::sync::Arc;

    #[test]
    fn an_api_message_about_a_secret_loses_its_values() {
        let id = ObjectRef { api_version: "v1".into(), kind: "Secret".into(), namespace: Some("app".into()), name: "db".into() };
        let yaml = b"apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: app}\ndata: {password: aHVudGVyMg==}\n".to_vec();
        let obj = PlannedObject { id: id.clone(), path: "manifests/app/Secret.core.db.yaml".into(), yaml: Arc::new(yaml) };
        let req = ApplyRequest {
            source: "r/x:prod".into(),
            digest: "sha256:0".into(),
            sequence: 1,
            field_manager: "drover".into(),
            groups: vec![OrderGroup { stage: crate::order::ApplyStage::Config, objects: vec![obj] }],
            health: Default::default(),
        };
        let m = mask_secret_messages(&req, &id, "Secret \"db\" is invalid: data[password]: Invalid value: \"hunter2\" (aHVudGVyMg==)");
        assert!(!m.contains("hunter2") && !m.contains("aHVudGVyMg==") && m.contains("data[password]"), "{m}");
        let cm = ObjectRef { kind: "ConfigMap".into(), ..id };
        assert_eq!(mask_secret_messages(&req, &cm, "hunter2"), "hunter2", "other objects: unchanged");
    }
}
