//! Bounded YAML parsing: every YAML text drover reads (build input, bundle content) is
//! parsed here, under an alias-expansion budget.
//!
//! serde_yaml_ng resolves an alias by replaying the anchored node, and by itself bounds
//! only the number of alias jumps (100 × the document's events). That stops the nested
//! "billion laughs" (each level multiplying the jumps) but not one large anchored node
//! referenced many times: a 1 MiB string aliased 2,000 times is a 1 MiB file that
//! expands to 2 GiB. So the values are built here, counting as they are built: every
//! node costs 1, every scalar its length in bytes. Without aliases a text never costs
//! more than about its own size; the budget of a text (all its documents together) is
//! [`EXPANSION_FACTOR`] × its size, at least [`MIN_EXPANSION_BUDGET`]. Over it, parsing
//! stops with an error (a clear message, at the line and column where it happened)
//! before the memory is taken.

use std::cell::Cell;
use std::fmt;

use serde::Deserialize as _;
use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};
use serde_yaml_ng::mapping::Entry;
use serde_yaml_ng::value::{Tag, TaggedValue};

/// How many times its own size a YAML text may expand to through aliases.
pub const EXPANSION_FACTOR: u64 = 2;
/// The budget of small texts (so that a few aliases in a short file always work).
pub const MIN_EXPANSION_BUDGET: u64 = 1 << 20;

/// The expansion budget of a text of `len` bytes (nodes plus scalar bytes).
pub fn budget_for(len: usize) -> u64 {
    (len as u64).saturating_mul(EXPANSION_FACTOR).max(MIN_EXPANSION_BUDGET)
}

/// What a text may still expand to, shared by all its documents.
struct Budget {
    left: Cell<u64>,
    limit: u64,
}

impl Budget {
    fn new(len: usize) -> Self {
        let limit = budget_for(len);
        Budget { left: Cell::new(limit), limit }
    }

    /// Takes `cost` from the budget, or fails (before anything is allocated for it).
    fn charge<E: de::Error>(&self, cost: usize) -> Result<(), E> {
        match self.left.get().checked_sub(cost as u64) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => Err(E::custom(format_args!(
                "YAML aliases expand this text beyond {} nodes and bytes ({EXPANSION_FACTOR}x its size, at least {} MiB); \
                 drover refuses alias expansion this large (a \"billion laughs\" document); write the repeated content out",
                self.limit,
                MIN_EXPANSION_BUDGET >> 20
            ))),
        }
    }
}

/// Parses every document of `text` into a [`serde_yaml_ng::Value`] (tags kept, merge
/// keys not applied), as `serde_yaml_ng::Value::deserialize` would, under one budget.
pub fn documents(text: &str) -> impl Iterator<Item = Result<serde_yaml_ng::Value, serde_yaml_ng::Error>> + '_ {
    let budget = Budget::new(text.len());
    serde_yaml_ng::Deserializer::from_str(text).map(move |doc| YamlSeed(&budget).deserialize(doc))
}

/// Parses every document of `text` into a [`serde_json::Value`], as
/// `serde_json::Value::deserialize` would (keys read as strings, tags refused), under one budget.
pub fn json_documents(text: &str) -> impl Iterator<Item = Result<serde_json::Value, serde_yaml_ng::Error>> + '_ {
    let budget = Budget::new(text.len());
    serde_yaml_ng::Deserializer::from_str(text).map(move |doc| JsonSeed(&budget).deserialize(doc))
}

#[derive(Clone, Copy)]
struct YamlSeed<'b>(&'b Budget);

impl<'de> DeserializeSeed<'de> for YamlSeed<'_> {
    type Value = serde_yaml_ng::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for YamlSeed<'_> {
    type Value = serde_yaml_ng::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Self::Value, E> {
        self.0.charge(1).map(|()| b.into())
    }
    fn visit_i64<E: de::Error>(self, i: i64) -> Result<Self::Value, E> {
        self.0.charge(1).map(|()| i.into())
    }
    fn visit_u64<E: de::Error>(self, u: u64) -> Result<Self::Value, E> {
        self.0.charge(1).map(|()| u.into())
    }
    fn visit_f64<E: de::Error>(self, f: f64) -> Result<Self::Value, E> {
        self.0.charge(1).map(|()| f.into())
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        self.0.charge(1 + s.len()).map(|()| serde_yaml_ng::Value::String(s.to_owned()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.0.charge(1).map(|()| serde_yaml_ng::Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        self.0.charge(1)?;
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(self)? {
            out.push(v);
        }
        Ok(serde_yaml_ng::Value::Sequence(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        self.0.charge(1)?;
        let mut out = serde_yaml_ng::Mapping::new();
        while let Some(key) = map.next_key_seed(self)? {
            match out.entry(key) {
                Entry::Occupied(e) => return Err(de::Error::custom(format_args!("duplicate entry with key {}", key_text(e.key())))),
                Entry::Vacant(e) => {
                    e.insert(map.next_value_seed(self)?);
                }
            }
        }
        Ok(serde_yaml_ng::Value::Mapping(out))
    }
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        let (tag, contents) = data.variant::<String>()?;
        if tag.is_empty() {
            return Err(de::Error::custom("empty YAML tag is not allowed"));
        }
        self.0.charge(1 + tag.len())?;
        let value = contents.newtype_variant_seed(self)?;
        Ok(serde_yaml_ng::Value::Tagged(Box::new(TaggedValue { tag: Tag::new(tag), value })))
    }
}

/// A mapping key as serde_yaml_ng names it in its duplicate-key error.
fn key_text(k: &serde_yaml_ng::Value) -> String {
    match k {
        serde_yaml_ng::Value::String(s) => format!("{s:?}"),
        serde_yaml_ng::Value::Null => "null".into(),
        serde_yaml_ng::Value::Bool(b) => format!("`{b}`"),
        serde_yaml_ng::Value::Number(n) => n.to_string(),
        _ => "(a collection)".into(),
    }
}

#[derive(Clone, Copy)]
struct JsonSeed<'b>(&'b Budget);

impl<'de> DeserializeSeed<'de> for JsonSeed<'_> {
    type Value = serde_json::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// A mapping key, read as a string (what `serde_json::Value` asks for), charged.
struct KeySeed<'b>(&'b Budget);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        let s = String::deserialize(d)?;
        self.0.charge(1 + s.len())?;
        Ok(s)
    }
}

impl<'de> Visitor<'de> for JsonSeed<'_> {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any valid JSON value")
    }
    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Self::Value, E> {
        self.0.charge(1).map(|()| b.into())
    }
    fn visit_i64<E: de::Error>(self, i: i64) -> Result<Self::Value, E> {
        self.0.charge(1).map(|()| i.into())
    }
    fn visit_u64<E: de::Error>(self, u: u64) -> Result<Self::Value, E> {
        self.0.charge(1).map(|()| u.into())
    }
    fn visit_f64<E: de::Error>(self, f: f64) -> Result<Self::Value, E> {
        self.0.charge(1).map(|()| serde_json::Number::from_f64(f).map_or(serde_json::Value::Null, serde_json::Value::Number))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        self.0.charge(1 + s.len()).map(|()| serde_json::Value::String(s.to_owned()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.0.charge(1).map(|()| serde_json::Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        self.0.charge(1)?;
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(self)? {
            out.push(v);
        }
        Ok(serde_json::Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        self.0.charge(1)?;
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key_seed(KeySeed(self.0))? {
            out.insert(key, map.next_value_seed(self)?);
        }
        Ok(serde_json::Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml_all(text: &str) -> Result<Vec<serde_yaml_ng::Value>, String> {
        documents(text).collect::<Result<_, _>>().map_err(|e| e.to_string())
    }

    fn json_all(text: &str) -> Result<Vec<serde_json::Value>, String> {
        json_documents(text).collect::<Result<_, _>>().map_err(|e| e.to_string())
    }

    /// A 64 KiB string anchored once and aliased `n` times.
    fn fan_out(n: usize) -> String {
        let mut s = format!("a: &a \"{}\"\nb: [", "x".repeat(64 << 10));
        s.push_str(&vec!["*a"; n].join(", "));
        s.push_str("]\n");
        s
    }

    #[test]
    fn same_values_as_serde_yaml_ng_and_serde_json() {
        let text = "a: &x {k: [1, -2, 3.5, true, null, ~, 'q']}\nb: *x\nc: !tag {z: 1}\n1: one\n---\n- x\n---\n";
        let theirs: Vec<serde_yaml_ng::Value> = serde_yaml_ng::Deserializer::from_str(text)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect();
        assert_eq!(yaml_all(text).unwrap(), theirs);
        let text = "a: &x {k: [1, -2, 3.5, true, null, ~, 'q', .nan]}\nb: *x\n1: one\n---\n- x\n";
        let theirs: Vec<serde_json::Value> = serde_yaml_ng::Deserializer::from_str(text)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect();
        assert_eq!(json_all(text).unwrap(), theirs);
        // serde_json refuses tags, and so does this.
        assert!(json_all("a: !tag {z: 1}\n").unwrap_err().contains("enum"));
        assert!(yaml_all("a: 1\na: 2\n").unwrap_err().contains("duplicate entry with key \"a\""));
    }

    #[test]
    fn linear_alias_fan_out_hits_the_budget() {
        // 40 aliases of 64 KiB: 2.5 MiB from a 64 KiB text, over 1 MiB.
        let bomb = fan_out(40);
        for e in [yaml_all(&bomb).unwrap_err(), json_all(&bomb).unwrap_err()] {
            assert!(e.contains("YAML aliases expand this text beyond 1048576"), "{e}");
            assert!(e.starts_with("b[14]: "), "the error names where the budget ran out: {e}");
        }
        // A few aliases are fine.
        assert!(yaml_all(&fan_out(8)).is_ok());
    }

    #[test]
    fn nested_billion_laughs_is_stopped_by_serde_yaml_ng_itself() {
        let mut s = String::from("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
        for (prev, cur) in ["a", "b", "c", "d", "e", "f", "g", "h"].iter().zip(["b", "c", "d", "e", "f", "g", "h", "i"]) {
            s.push_str(&format!("{cur}: &{cur} [{}]\n", vec![format!("*{prev}"); 9].join(",")));
        }
        let e = yaml_all(&s).unwrap_err();
        assert!(e.contains("repetition limit exceeded") || e.contains("YAML aliases expand"), "{e}");
    }

    #[test]
    fn text_without_aliases_stays_within_the_budget() {
        // The densest shapes (most nodes per byte), each just over the size where the
        // factor (not the 1 MiB floor) sets the budget.
        let size = (MIN_EXPANSION_BUDGET / EXPANSION_FACTOR) as usize + 4096;
        let unit = |f: &dyn Fn(usize) -> String| {
            let mut s = String::new();
            let mut i = 0;
            while s.len() < size {
                s.push_str(&f(i));
                i += 1;
            }
            s
        };
        let shapes = [
            format!("[{}a]\n", unit(&|_| "a,".into())),
            format!("[{}[]]\n", unit(&|_| "[],".into())),
            unit(&|_| "-\n".into()),
            unit(&|_| "- a\n".into()),
            unit(&|_| "---\n".into()),
            unit(&|i| format!("{i}:\n")),
            unit(&|i| format!("? {i}\n")),
        ];
        for text in &shapes {
            assert!(budget_for(text.len()) > MIN_EXPANSION_BUDGET, "the shape is large enough to test the factor");
            yaml_all(text).unwrap_or_else(|e| panic!("{}...: {e}", &text[..20]));
            json_all(text).unwrap_or_else(|e| panic!("{}...: {e}", &text[..20]));
        }
    }

    #[test]
    fn the_budget_is_shared_by_the_documents_of_a_text() {
        // Each document alone is under 1 MiB expanded; twenty of them are not.
        let doc = format!("a: &a \"{}\"\nb: [*a, *a]\n", "x".repeat(20 << 10));
        let text = vec![doc.as_str(); 20].join("---\n");
        assert!(yaml_all(&doc).is_ok());
        assert!(yaml_all(&text).unwrap_err().contains("YAML aliases expand"));
    }
}
