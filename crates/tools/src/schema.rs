//! The schemas clients see: derived from a tool's argument and result types, then
//! compacted (docs/benchmarks.md, "The tool list").

use schemars::JsonSchema;
use serde_json::{Value, json};

/// Drops schemars' integer-width formats (`uint32`, `int64`, `double`, ...): not JSON
/// Schema formats, and validators such as ajv warn on every one.
fn strip_nonstandard_formats(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let nonstandard = map.get("format").and_then(Value::as_str).is_some_and(|f| {
                matches!(
                    f,
                    "int8"
                        | "int16"
                        | "int32"
                        | "int64"
                        | "uint"
                        | "uint8"
                        | "uint16"
                        | "uint32"
                        | "uint64"
                        | "float"
                        | "double"
                )
            });
            if nonstandard {
                map.remove("format");
            }
            map.values_mut().for_each(strip_nonstandard_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nonstandard_formats),
        _ => {}
    }
}

pub(crate) fn input_schema<T: JsonSchema>() -> Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_else(|_| json!({}));
    if let Some(obj) = schema.as_object_mut() {
        obj.insert("type".into(), json!("object"));
        obj.insert("additionalProperties".into(), json!(false));
        obj.entry("properties").or_insert_with(|| json!({}));
    }
    schema
}

pub(crate) fn output_schema<T: JsonSchema>() -> Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_else(|_| json!({}));
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("required");
        // The same object carries either the result (status ok) or an error.
        if let Some(props) = obj.get_mut("properties").and_then(Value::as_object_mut) {
            props.shift_insert(
                0,
                "status".into(),
                json!({"type": "string", "enum": ["ok", "error"]}),
            );
            props.insert(
                "error".into(),
                json!({
                    "type": "object",
                    "properties": {"code": {"type": "string"}, "message": {"type": "string"}, "hint": {"type": "string"}},
                    "required": ["code", "message", "hint"]
                }),
            );
        }
        obj.insert("required".into(), json!(["status"]));
    }
    schema
}

/// An output schema as `tools/list` serves it (docs/benchmarks.md, "The tool list"): the
/// same properties, types, enums, bounds and required lists, without the descriptions.
/// A client checks `structuredContent` against it (Claude Code and opencode do not show
/// it to the model), and docs/tools.md gives every result field's description.
pub fn without_descriptions(schema: &Value) -> Value {
    let mut out = schema.clone();
    strip_descriptions(&mut out);
    out
}

/// Drops the `description` keyword of a schema and of every schema inside it; a
/// property *named* `description` stays.
fn strip_descriptions(schema: &mut Value) {
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    map.remove("description");
    for (key, value) in map.iter_mut() {
        match (key.as_str(), value) {
            ("properties" | "patternProperties" | "$defs", Value::Object(named)) => {
                named.values_mut().for_each(strip_descriptions);
            }
            ("items" | "prefixItems" | "anyOf" | "oneOf" | "allOf", Value::Array(list)) => {
                list.iter_mut().for_each(strip_descriptions);
            }
            (
                "items" | "additionalProperties" | "not" | "if" | "then" | "else" | "contains",
                inner @ Value::Object(_),
            ) => strip_descriptions(inner),
            _ => {}
        }
    }
}

/// A schema as clients receive it (docs/benchmarks.md, "The tool list"): schemars'
/// output with every property, type, enum, required list and bound kept, and nothing
/// else. Integer-width formats go (not JSON Schema formats: validators such as ajv warn
/// on each), and so do the root's `$schema`, `title` and description (the tool's own
/// description says what it is for). A `$defs` entry is written in place wherever that
/// is no longer than referring to it, so an input schema has no `$ref` left; a property's
/// own description beats its type's, and a described list's does its entries'; `anyOf
/// [T, null]` becomes `"type": [T, "null"]`; doc-comment line breaks become spaces.
pub(crate) fn compact(schema: &mut Value, inline_all: bool) {
    strip_nonstandard_formats(schema);
    let Some(root) = schema.as_object_mut() else {
        return;
    };
    for key in ["$schema", "title", "description"] {
        root.remove(key);
    }
    let defs = match root.remove("$defs") {
        Some(Value::Object(defs)) => defs,
        _ => serde_json::Map::new(),
    };
    let mut uses = std::collections::BTreeMap::<String, usize>::new();
    count_refs(schema, &mut uses);
    defs.values().for_each(|d| count_refs(d, &mut uses));
    let inline: std::collections::BTreeSet<String> = defs
        .iter()
        .filter(|(name, body)| {
            let n = uses.get(name.as_str()).copied().unwrap_or(0);
            let body_len = body.to_string().len();
            let self_referencing = body.to_string().contains(&format!("\"#/$defs/{name}\""));
            // In place n times, against n references plus the entry itself.
            let kept =
                n * ("{\"$ref\":\"#/$defs/\"}".len() + name.len()) + name.len() + 3 + body_len;
            !self_referencing && (inline_all || n * body_len <= kept)
        })
        .map(|(name, _)| name.clone())
        .collect();
    expand(schema, &defs, &inline);
    let mut kept = serde_json::Map::new();
    for (name, mut body) in defs.clone() {
        if !inline.contains(&name) {
            expand(&mut body, &defs, &inline);
            kept.insert(name, body);
        }
    }
    if let (Some(root), false) = (schema.as_object_mut(), kept.is_empty()) {
        root.insert("$defs".into(), Value::Object(kept));
    }
}

fn count_refs(value: &Value, uses: &mut std::collections::BTreeMap<String, usize>) {
    match value {
        Value::Object(map) => {
            if let Some(name) = def_name(map) {
                *uses.entry(name.to_owned()).or_default() += 1;
            }
            map.values().for_each(|v| count_refs(v, uses));
        }
        Value::Array(items) => items.iter().for_each(|v| count_refs(v, uses)),
        _ => {}
    }
}

fn def_name(map: &serde_json::Map<String, Value>) -> Option<&str> {
    map.get("$ref")?.as_str()?.strip_prefix("#/$defs/")
}

/// Writes the `inline` definitions in place, then tidies each schema object.
fn expand(
    value: &mut Value,
    defs: &serde_json::Map<String, Value>,
    inline: &std::collections::BTreeSet<String>,
) {
    match value {
        Value::Object(map) => {
            map.values_mut().for_each(|v| expand(v, defs, inline));
            if let Some(name) = def_name(map)
                .filter(|n| inline.contains(*n))
                .map(str::to_owned)
                && let Some(mut body) = defs.get(&name).cloned()
            {
                expand(&mut body, defs, inline);
                map.remove("$ref");
                if let Value::Object(body) = body {
                    for (key, v) in body {
                        map.entry(key).or_insert(v);
                    }
                }
            }
            merge_nullable(map);
            if let Some(Value::String(text)) = map.get_mut("description") {
                *text = text.replace('\n', " ");
                // A described list says what its entries are.
                if let Some(Value::Object(item)) = map.get_mut("items") {
                    item.remove("description");
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| expand(v, defs, inline)),
        _ => {}
    }
}

/// `{"anyOf": [S, {"type": "null"}]}` as one schema: S's type with `"null"` beside it (and
/// `null` among its enum values), or S's alternatives with null among them.
fn merge_nullable(map: &mut serde_json::Map<String, Value>) {
    let null = json!({"type": "null"});
    let Some(Value::Array(alts)) = map.get("anyOf") else {
        return;
    };
    let [a, b] = alts.as_slice() else {
        return;
    };
    let other = match (a == &null, b == &null) {
        (true, false) => b,
        (false, true) => a,
        _ => return,
    };
    let Some(other) = other.as_object().cloned() else {
        return;
    };
    if other.contains_key("$ref") || other.contains_key("const") {
        return;
    }
    match other.get("type").cloned() {
        Some(Value::String(t)) => {
            map.remove("anyOf");
            for (key, mut v) in other {
                if key == "type" {
                    v = json!([t, "null"]);
                } else if key == "enum"
                    && let Value::Array(values) = &mut v
                {
                    values.push(Value::Null);
                }
                map.entry(key).or_insert(v);
            }
        }
        None if other.keys().all(|k| k == "anyOf" || k == "description") => {
            let Some(Value::Array(mut inner)) = other.get("anyOf").cloned() else {
                return;
            };
            inner.push(null);
            map.insert("anyOf".into(), Value::Array(inner));
            if let Some(d) = other.get("description") {
                map.entry("description").or_insert_with(|| d.clone());
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::registry::{raw_specs as build_specs, tools};

    /// What a client can tell about one place in a schema, descriptions aside: its JSON
    /// types, enum values, whether it is required, and every bound and format.
    type Inventory = BTreeMap<String, BTreeMap<&'static str, String>>;

    const FACTS: [&str; 8] = [
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
        "format",
        "additionalProperties",
    ];

    fn resolve<'a>(root: &'a Value, mut schema: &'a Value) -> &'a Value {
        while let Some(name) = schema.as_object().and_then(def_name) {
            schema = root.pointer(&format!("/$defs/{name}")).unwrap_or_else(|| {
                panic!("dangling $ref to {name}");
            });
        }
        schema
    }

    /// The alternatives of a schema with nested `anyOf`s, `$ref`s and `null` unfolded:
    /// (the non-null alternatives, whether null is allowed).
    fn alternatives<'a>(root: &'a Value, schema: &'a Value) -> (Vec<&'a Value>, bool) {
        let schema = resolve(root, schema);
        match schema.get("anyOf").and_then(Value::as_array) {
            None if schema == &json!({"type": "null"}) => (Vec::new(), true),
            None => (vec![schema], false),
            Some(alts) => {
                let mut out = Vec::new();
                let mut nullable = false;
                for alt in alts {
                    let (more, null) = alternatives(root, alt);
                    out.extend(more);
                    nullable |= null;
                }
                (out, nullable)
            }
        }
    }

    fn walk(root: &Value, schema: &Value, path: &str, required: bool, out: &mut Inventory) {
        let (alts, nullable) = alternatives(root, schema);
        let many = alts.len() > 1;
        for (i, alt) in alts.into_iter().enumerate() {
            let at = if many {
                format!("{path}|{i}")
            } else {
                path.to_owned()
            };
            let mut facts = BTreeMap::new();
            let mut types: BTreeSet<String> = match alt.get("type") {
                Some(Value::String(t)) => [t.clone()].into(),
                Some(Value::Array(ts)) => ts
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
                _ => BTreeSet::new(),
            };
            // What the place accepts: an enum value only when its type is allowed too.
            let own_types = types.clone();
            if nullable {
                types.insert("null".into());
            }
            if let Some(values) = alt.get("enum").and_then(Value::as_array) {
                let json_type = |v: &Value| match v {
                    Value::Null => "null",
                    Value::String(_) => "string",
                    Value::Bool(_) => "boolean",
                    Value::Number(_) => "number",
                    Value::Array(_) => "array",
                    Value::Object(_) => "object",
                };
                let mut set: BTreeSet<String> = values
                    .iter()
                    .filter(|v| own_types.is_empty() || own_types.contains(json_type(v)))
                    .map(Value::to_string)
                    .collect();
                if nullable {
                    set.insert("null".into());
                }
                types = values
                    .iter()
                    .filter(|v| set.contains(&v.to_string()))
                    .map(|v| json_type(v).to_owned())
                    .collect();
                if nullable {
                    types.insert("null".into());
                }
                facts.insert("enum", format!("{set:?}"));
            }
            facts.insert("type", format!("{types:?}"));
            facts.insert("required", required.to_string());
            for key in FACTS {
                if let Some(v) = alt.get(key) {
                    facts.insert(key, v.to_string());
                }
            }
            let req: BTreeSet<&str> = alt
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if let Some(props) = alt.get("properties").and_then(Value::as_object) {
                facts.insert(
                    "properties",
                    format!("{:?}", props.keys().collect::<Vec<_>>()),
                );
                for (name, sub) in props {
                    walk(
                        root,
                        sub,
                        &format!("{at}.{name}"),
                        req.contains(name.as_str()),
                        out,
                    );
                }
            }
            if let Some(items) = alt.get("items") {
                walk(root, items, &format!("{at}[]"), true, out);
            }
            out.insert(at, facts);
        }
    }

    fn inventory(schema: &Value) -> Inventory {
        let mut out = Inventory::new();
        walk(schema, schema, "", true, &mut out);
        out
    }

    fn refs(value: &Value, found: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let Some(r) = map.get("$ref").and_then(Value::as_str) {
                    found.push(r.to_owned());
                }
                map.values().for_each(|v| refs(v, found));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, found)),
            _ => {}
        }
    }

    #[test]
    fn the_listed_output_schema_keeps_every_fact_but_the_descriptions() {
        for spec in tools() {
            let listed = without_descriptions(&spec.output_schema);
            assert_eq!(
                inventory(&spec.output_schema),
                inventory(&listed),
                "{}: a field, type, enum, bound or required list changed",
                spec.name
            );
            let mut left = Vec::new();
            described(&listed, &mut left, "");
            assert!(left.is_empty(), "{}: descriptions at {left:?}", spec.name);
        }
        // A field named `description` is a field, not an annotation.
        let schema = json!({"type": "object", "description": "d", "properties": {
            "description": {"type": "string", "description": "the headline"},
            "rows": {"type": "array", "items": {"anyOf": [{"type": "null", "description": "x"}]}}}});
        assert_eq!(
            without_descriptions(&schema),
            json!({"type": "object", "properties": {"description": {"type": "string"},
                "rows": {"type": "array", "items": {"anyOf": [{"type": "null"}]}}}})
        );
    }

    /// Where a schema still has a `description` keyword (not a property so named).
    fn described(schema: &Value, found: &mut Vec<String>, at: &str) {
        match schema {
            Value::Object(map) => {
                for (key, value) in map {
                    if key == "description" && value.is_string() && !at.ends_with("/properties") {
                        found.push(at.to_owned());
                    }
                    described(value, found, &format!("{at}/{key}"));
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    described(v, found, &format!("{at}/{i}"));
                }
            }
            _ => {}
        }
    }

    #[test]
    fn compacting_a_schema_keeps_every_field_type_enum_bound_and_required_list() {
        let raw = build_specs();
        assert_eq!(raw.len(), tools().len());
        for (raw, served) in raw.iter().zip(tools()) {
            assert_eq!(raw.name, served.name);
            for (before, after, side) in [
                (&raw.input_schema, &served.input_schema, "input"),
                (&raw.output_schema, &served.output_schema, "output"),
            ] {
                let mut before = before.clone();
                strip_nonstandard_formats(&mut before);
                let (b, a) = (inventory(&before), inventory(after));
                assert!(!b.is_empty(), "{} {side}: nothing inventoried", raw.name);
                for (path, facts) in &b {
                    assert_eq!(
                        Some(facts),
                        a.get(path),
                        "{} {side} schema at `{path}` changed",
                        raw.name
                    );
                }
                assert_eq!(b.len(), a.len(), "{} {side}: places added", raw.name);
            }
        }
    }

    #[test]
    fn served_schemas_carry_no_noise_and_inputs_no_refs() {
        for spec in tools() {
            for (schema, side) in [
                (&spec.input_schema, "input"),
                (&spec.output_schema, "output"),
            ] {
                let text = schema.to_string();
                for noise in [
                    "\"$schema\"",
                    "\"title\"",
                    "\"format\":\"uint",
                    "\"format\":\"int",
                    "\"format\":\"double",
                    "\\n",
                ] {
                    assert!(
                        !text.contains(noise),
                        "{} {side} schema has {noise}",
                        spec.name
                    );
                }
                let mut found = Vec::new();
                refs(schema, &mut found);
                if side == "input" {
                    assert!(
                        found.is_empty(),
                        "{} input schema refers: {found:?}",
                        spec.name
                    );
                }
                for r in found {
                    let name = r.strip_prefix("#/$defs/").unwrap();
                    assert!(
                        schema.pointer(&format!("/$defs/{name}")).is_some(),
                        "{} {side}: dangling {r}",
                        spec.name
                    );
                }
                assert_eq!(schema["type"], "object", "{} {side}", spec.name);
            }
            assert_eq!(spec.input_schema["additionalProperties"], false);
        }
    }

    #[test]
    fn a_nullable_enum_reference_becomes_one_schema_with_null_among_its_values() {
        let mut schema = json!({
            "$defs": {"Side": {"type": "string", "enum": ["buy", "sell"]}},
            "type": "object",
            "properties": {"side": {"description": "Only\nbuys or sells.", "anyOf": [{"$ref": "#/$defs/Side"}, {"type": "null"}]}}
        });
        compact(&mut schema, true);
        assert_eq!(
            schema,
            json!({"type": "object", "properties": {"side": {"description": "Only buys or sells.", "type": ["string", "null"], "enum": ["buy", "sell", null]}}})
        );
    }
}
