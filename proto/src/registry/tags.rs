//! Reading one tag list page (`{"name": ..., "tags": [...]}`) into a list with a bound on
//! the number of tags: the page is parsed as it is read, and the tag past the bound stops
//! the parse, so a page of millions of one-letter tags never becomes millions of strings.

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Appends the tags of `page` to `out`; an error when `out` would hold more than `max`
/// tags, or when the page is not a tag list.
pub(crate) fn read_page(page: &[u8], out: &mut Vec<String>, max: usize) -> Result<(), String> {
    let mut de = serde_json::Deserializer::from_slice(page);
    Page { out, max }.deserialize(&mut de).map_err(|e| {
        let m = e.to_string();
        if m.starts_with(TOO_MANY) {
            m
        } else {
            format!("tag list is not JSON: {m}")
        }
    })?;
    de.end().map_err(|e| format!("tag list is not JSON: {e}"))
}

const TOO_MANY: &str = "more than";

struct Page<'a> {
    out: &'a mut Vec<String>,
    max: usize,
}

impl<'de> DeserializeSeed<'de> for Page<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Page<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tag list object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == "tags" {
                map.next_value_seed(Tags { out: &mut *self.out, max: self.max })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

struct Tags<'a> {
    out: &'a mut Vec<String>,
    max: usize,
}

impl<'de> DeserializeSeed<'de> for Tags<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Tags<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of tags or null")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(tag) = seq.next_element::<String>()? {
            if self.out.len() >= self.max {
                return Err(de::Error::custom(format!("{TOO_MANY} {} tags (the limit of tags read from one repository)", self.max)));
            }
            self.out.push(tag);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_add_up_to_the_bound() {
        let mut out = Vec::new();
        read_page(br#"{"name":"a","tags":["x","y"]}"#, &mut out, 3).unwrap();
        read_page(br#"{"name":"a","tags":null}"#, &mut out, 3).unwrap();
        assert_eq!(out, ["x", "y"]);
        let e = read_page(br#"{"tags":["z","w"]}"#, &mut out, 3).unwrap_err();
        assert!(e.contains("more than 3 tags"), "{e}");
        assert!(read_page(b"{\"tags\":[1]}", &mut Vec::new(), 3).unwrap_err().contains("not JSON"));
        assert!(read_page(b"<html>", &mut Vec::new(), 3).is_err());
    }
}
