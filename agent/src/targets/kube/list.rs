//! A paged LIST read one item at a time: each page's body is parsed as a stream, every
//! item is handed to the caller as soon as it is parsed and dropped after, so at most one
//! page body and one parsed object are in memory, never a page of parsed objects (500
//! parsed objects with their `managedFields` take several MiB; the body a fraction).
//! Items are read as [`Live`] objects (any depth a server stores, managed fields read
//! once); the caller reads a page where it wants ([`for_each_page`]: the apply does it on
//! a blocking thread, with the compares).

use std::fmt;

use kube::api::{DynamicObject, ListParams};
use kube::core::Request;
use kube::Resource;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use drover_ssa::live::Live;

use super::cluster::KubeTarget;
use super::discovery::Resolved;
use super::retry::{with_retry, ApiFailure};

/// Objects per page (what client-go pages by).
pub const PAGE: u32 = 500;

/// Reads every object of `res` in `namespace` (all namespaces, or a cluster-scoped kind,
/// when `None`) matching the label `selector`, page by page ([`PAGE`], `limit` and
/// `continue`), and hands each page's body to `page`, which reads it ([`read_page`]) and
/// returns its `metadata.continue`. Each page is retried as any request ([`with_retry`]);
/// on a failure the pages before it have been handed over already.
pub async fn for_each_page<F, Fut>(t: &KubeTarget, res: &Resolved, namespace: Option<&str>, selector: &str, mut page: F) -> Result<(), ApiFailure>
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = Result<Option<String>, String>>,
{
    let ns = if res.namespaced { namespace } else { None };
    let path = DynamicObject::url_path(&res.resource, ns);
    let mut params = ListParams::default().labels(selector).limit(PAGE);
    loop {
        let call = || {
            let request = Request::new(&path).list(&params).map_err(kube::Error::BuildRequest);
            async move { t.client.request_text(request?).await }
        };
        let body = with_retry(&t.opts.retry, call).await?;
        let next = page(body).await.map_err(|e| ApiFailure { code: 0, message: format!("reading the LIST of {}: {e}", path), transient: false, retry_after: None })?;
        match next.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(()),
        }
    }
}

/// Parses one list body, handing each of its `items` to `each`; returns
/// `metadata.continue`. Any depth a server stores is read (the stack grows onto the
/// heap); the error names the position, never the text.
pub fn read_page(body: &str, each: &mut impl FnMut(Live)) -> Result<Option<String>, String> {
    let mut de = serde_json::Deserializer::from_str(body);
    de.disable_recursion_limit();
    let position = |e: serde_json::Error| format!("not a list at line {}, column {}", e.line(), e.column());
    let next = PageSeed { each }.deserialize(serde_stacker::Deserializer::new(&mut de)).map_err(position)?;
    de.end().map_err(position)?;
    Ok(next)
}

/// The list object: `items` streamed, `metadata.continue` kept, the rest skipped.
struct PageSeed<'a, F> {
    each: &'a mut F,
}

impl<'de, F: FnMut(Live)> DeserializeSeed<'de> for PageSeed<'_, F> {
    type Value = Option<String>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_map(self)
    }
}

impl<'de, F: FnMut(Live)> Visitor<'de> for PageSeed<'_, F> {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes list object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        #[derive(serde::Deserialize)]
        struct ListMeta {
            #[serde(rename = "continue")]
            next: Option<String>,
        }
        let mut next = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "items" => map.next_value_seed(ItemsSeed { each: &mut *self.each })?,
                "metadata" => next = map.next_value::<ListMeta>()?.next,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(next)
    }
}

/// The `items` array (or `null`), one parsed item at a time.
struct ItemsSeed<'a, F> {
    each: &'a mut F,
}

impl<'de, F: FnMut(Live)> DeserializeSeed<'de> for ItemsSeed<'_, F> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de, F: FnMut(Live)> Visitor<'de> for ItemsSeed<'_, F> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of objects")
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(item) = seq.next_element_seed(LiveSeed)? {
            (self.each)(item);
        }
        Ok(())
    }
}

/// One item, read as a [`Live`] object.
struct LiveSeed;

impl<'de> DeserializeSeed<'de> for LiveSeed {
    type Value = Live;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Live, D::Error> {
        Live::read(de)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_streamed_and_continue_read() {
        let body = r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7","continue":"abc"},
            "items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#;
        let mut names = Vec::new();
        let next = read_page(body, &mut |v: Live| names.push(v.object["metadata"]["name"].as_str().unwrap().to_string())).unwrap();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(next.as_deref(), Some("abc"));
        let last = r#"{"metadata":{"resourceVersion":"7"},"items":null}"#;
        assert_eq!(read_page(last, &mut |_| panic!("no items")).unwrap(), None);
        assert!(read_page(r#"{"items":[{"a":1}"#, &mut |_| {}).is_err(), "a cut body is an error");
    }
}
