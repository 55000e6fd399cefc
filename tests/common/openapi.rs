//! A minimal OpenAPI 3 response checker for tests.
//!
//! [`check_response`] finds the response an operation declares for a status and checks a
//! JSON body against its `application/json` schema. It understands the parts of the schema
//! language that Alpaca's documents use: `$ref` (to anywhere in the same document, resolved
//! wherever it appears), `type` (also a list of types), `nullable`, `required`,
//! `properties` (undeclared properties are allowed unless `additionalProperties` says
//! otherwise), `additionalProperties` given as a schema, `items`, `enum`, `anyOf`, `oneOf`
//! (at least one branch must pass), `allOf` (every branch must pass), `minLength`,
//! `maxLength`, and the formats `date-time` (RFC 3339), `date` (YYYY-MM-DD) and `uuid`.
//! Other keywords and formats are ignored. Errors name the JSON path of the offending value
//! (`$.orders[2].qty`) and what was expected there.

#![allow(dead_code, unreachable_pub)]

use serde_json::Value;

/// Whether a property the schema does not declare is accepted (OpenAPI's rule) or refused
/// (what a fake must hold to: it sends only what the vendor documents).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Undeclared properties allowed unless `additionalProperties` says otherwise.
    Lenient,
    /// Every property must be declared by the schema the value matches: its own
    /// `properties`, those of every `allOf` branch, and those of the `anyOf` / `oneOf`
    /// branch it matches; or allowed by an `additionalProperties` schema.
    Strict,
    /// As `Strict`, but this value's own properties were already checked against the
    /// union of its composition (a branch of an `allOf` sees only part of it).
    StrictInner,
}

impl Mode {
    /// The mode for a child value (a property or an item): its own check comes again.
    fn child(self) -> Self {
        match self {
            Self::Lenient => Self::Lenient,
            Self::Strict | Self::StrictInner => Self::Strict,
        }
    }
}

/// The deepest chain of schemas followed before giving up (guards against `$ref` cycles
/// that never consume any of the value).
const MAX_DEPTH: usize = 128;

/// Reads one of Alpaca's OpenAPI documents kept with the tests, by file name:
/// `trading-api.json` or `market-data-api.json` (from `tests/fixtures/alpaca/`).
pub fn load_spec(name: &str) -> Value {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/alpaca/");
    let path = format!("{dir}{name}");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read the OpenAPI document {path}: {e}"));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the OpenAPI document {path} is not JSON: {e}"))
}

/// Checks `body` against the schema that `spec` declares for `method path_template` answering
/// `status`: `paths[path_template][method].responses[status]`, else the `"2XX"`-style range,
/// else `"default"`. A declared response without content accepts any body. Errors when the
/// operation or a response for the status is not declared, or the body does not match.
pub fn check_response(
    spec: &Value,
    method: &str,
    path_template: &str,
    status: u16,
    body: &Value,
) -> Result<(), String> {
    response(spec, method, path_template, status, body, Mode::Lenient)
}

/// As [`check_response`], and every property of the body (at any depth) must be one the
/// document declares for it: what a fake must hold to, so that it sends nothing the
/// vendor does not document.
pub fn check_response_strict(
    spec: &Value,
    method: &str,
    path_template: &str,
    status: u16,
    body: &Value,
) -> Result<(), String> {
    response(spec, method, path_template, status, body, Mode::Strict)
}

/// As [`check_schema`], refusing undeclared properties (see [`check_response_strict`]).
pub fn check_schema_strict(spec: &Value, schema: &Value, body: &Value) -> Result<(), String> {
    check_value(spec, schema, body, "$", 0, Mode::Strict)
}

fn response(
    spec: &Value,
    method: &str,
    path_template: &str,
    status: u16,
    body: &Value,
    mode: Mode,
) -> Result<(), String> {
    let what = format!("{} {path_template} -> {status}", method.to_uppercase());
    let Some(path_item) = spec.get("paths").and_then(|p| p.get(path_template)) else {
        return Err(format!("{what}: the document has no path {path_template}"));
    };
    let path_item = resolve(spec, path_item, &what)?;
    let Some(operation) = path_item.get(method.to_lowercase()) else {
        return Err(format!(
            "{what}: the path declares no {} operation",
            method.to_uppercase()
        ));
    };
    let Some(responses) = operation.get("responses").and_then(Value::as_object) else {
        return Err(format!("{what}: the operation declares no responses"));
    };
    let exact = status.to_string();
    let range = format!("{}XX", status / 100);
    let response = responses
        .get(&exact)
        .or_else(|| {
            responses
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(&range))
                .map(|(_, v)| v)
        })
        .or_else(|| responses.get("default"));
    let Some(response) = response else {
        let declared: Vec<&str> = responses.keys().map(String::as_str).collect();
        return Err(format!(
            "{what}: no response declared for status {status} (declared: {})",
            declared.join(", ")
        ));
    };
    let response = resolve(spec, response, &what)?;
    let Some(content) = response.get("content").and_then(Value::as_object) else {
        return Ok(());
    };
    let media = content.get("application/json").or_else(|| {
        content
            .iter()
            .find(|(k, _)| k.starts_with("application/json"))
            .map(|(_, v)| v)
    });
    let Some(media) = media else {
        let types: Vec<&str> = content.keys().map(String::as_str).collect();
        return Err(format!(
            "{what}: the response has no application/json content (has: {})",
            types.join(", ")
        ));
    };
    let Some(schema) = media.get("schema") else {
        return Ok(());
    };
    check_value(spec, schema, body, "$", 0, mode).map_err(|e| format!("{what}: {e}"))
}

/// Checks `body` against `schema`, a schema of `spec` (for example
/// `json!({"$ref": "#/components/schemas/Error"})`); the same rules as [`check_response`].
pub fn check_schema(spec: &Value, schema: &Value, body: &Value) -> Result<(), String> {
    check_value(spec, schema, body, "$", 0, Mode::Lenient)
}

/// Follows `node`'s `$ref` chain, if any, to the node it names.
fn resolve<'a>(spec: &'a Value, mut node: &'a Value, at: &str) -> Result<&'a Value, String> {
    for _ in 0..MAX_DEPTH {
        let Some(reference) = node.get("$ref").and_then(Value::as_str) else {
            return Ok(node);
        };
        node = lookup(spec, reference).map_err(|e| format!("{at}: {e}"))?;
    }
    Err(format!("{at}: $ref chain longer than {MAX_DEPTH}"))
}

/// The node a local reference (`#/components/schemas/Order`) names.
fn lookup<'a>(spec: &'a Value, reference: &str) -> Result<&'a Value, String> {
    let Some(pointer) = reference.strip_prefix('#') else {
        return Err(format!(
            "only local references are supported, not {reference}"
        ));
    };
    let mut node = spec;
    for raw in pointer.split('/').skip(1) {
        let token = percent_decode(raw).replace("~1", "/").replace("~0", "~");
        let next = match node {
            Value::Object(map) => map.get(&token),
            Value::Array(items) => token.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        };
        node = next.ok_or_else(|| format!("unresolvable reference {reference}"))?;
    }
    Ok(node)
}

fn percent_decode(s: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            b'A'..=b'F' => Some(b - b'A' + 10),
            _ => None,
        }
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(hi * 16 + lo);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn describe(value: &Value) -> String {
    let text = value.to_string();
    let kind = kind_of(value);
    if text.chars().count() > 60 {
        let short: String = text.chars().take(57).collect();
        format!("{kind} {short}...")
    } else {
        format!("{kind} {text}")
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(value: &Value, ty: &str) -> bool {
    match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => true,
    }
}

fn child_path(path: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain {
        format!("{path}.{key}")
    } else {
        format!("{path}[{}]", Value::String(key.to_owned()))
    }
}

fn check_value(
    spec: &Value,
    schema: &Value,
    value: &Value,
    path: &str,
    depth: usize,
    mode: Mode,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("{path}: schema nesting deeper than {MAX_DEPTH}"));
    }
    // `{"$ref": ..., "nullable": true}` is common enough to honour, though OpenAPI 3.0
    // ignores the siblings of a `$ref`.
    if value.is_null() && schema.get("nullable").and_then(Value::as_bool) == Some(true) {
        return Ok(());
    }
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let target = lookup(spec, reference).map_err(|e| format!("{path}: {e}"))?;
        return check_value(spec, target, value, path, depth + 1, mode);
    }
    let Some(schema) = schema.as_object() else {
        // `true`, `{}` and anything unexpected accept every value.
        return match schema {
            Value::Bool(false) => Err(format!("{path}: no value is allowed here")),
            _ => Ok(()),
        };
    };

    let nullable = schema.get("nullable").and_then(Value::as_bool) == Some(true);

    match schema.get("type") {
        Some(Value::String(ty)) if !has_type(value, ty) => {
            let expected = if nullable {
                format!("{ty} or null")
            } else {
                ty.clone()
            };
            return Err(format!(
                "{path}: expected {expected}, got {}",
                describe(value)
            ));
        }
        Some(Value::Array(types)) => {
            let names: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
            if !names.iter().any(|ty| has_type(value, ty)) {
                return Err(format!(
                    "{path}: expected one of the types {}, got {}",
                    names.join(", "),
                    describe(value)
                ));
            }
        }
        _ => {}
    }

    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        let listed: Vec<String> = options.iter().map(Value::to_string).collect();
        return Err(format!(
            "{path}: expected one of [{}], got {}",
            listed.join(", "),
            describe(value)
        ));
    }

    if let Value::String(text) = value {
        check_string(schema, text, path)?;
    }

    if let Value::Object(map) = value {
        if mode == Mode::Strict {
            let mut declared = std::collections::BTreeSet::new();
            let open = declared_names(
                spec,
                &Value::Object(schema.clone()),
                value,
                depth,
                &mut declared,
            );
            if !open && let Some(key) = map.keys().find(|k| !declared.contains(k.as_str())) {
                return Err(format!(
                    "{}: property \"{key}\" is not declared by the document",
                    child_path(path, key)
                ));
            }
        }
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for name in required.iter().filter_map(Value::as_str) {
                if !map.contains_key(name) {
                    return Err(format!("{path}: missing required property \"{name}\""));
                }
            }
        }
        let declared = schema.get("properties").and_then(Value::as_object);
        for (key, item) in map {
            let item_path = child_path(path, key);
            match declared.and_then(|d| d.get(key)) {
                Some(property) => {
                    check_value(spec, property, item, &item_path, depth + 1, mode.child())?;
                }
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        return Err(format!(
                            "{item_path}: property \"{key}\" is not allowed here"
                        ));
                    }
                    Some(extra @ Value::Object(_)) => {
                        check_value(spec, extra, item, &item_path, depth + 1, mode.child())?;
                    }
                    _ => {}
                },
            }
        }
    }

    if let (Value::Array(items), Some(item_schema)) = (value, schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            check_value(
                spec,
                item_schema,
                item,
                &format!("{path}[{i}]"),
                depth + 1,
                mode.child(),
            )?;
        }
    }

    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        let inner = if value.is_object() {
            inner_mode(mode)
        } else {
            mode
        };
        for branch in all {
            check_value(spec, branch, value, path, depth + 1, inner)?;
        }
    }
    for keyword in ["anyOf", "oneOf"] {
        if let Some(branches) = schema.get(keyword).and_then(Value::as_array) {
            let mut failures = Vec::new();
            for (i, branch) in branches.iter().enumerate() {
                match check_value(spec, branch, value, path, depth + 1, mode) {
                    Ok(()) => {
                        failures.clear();
                        break;
                    }
                    Err(e) => failures.push(format!("[{i}] {e}")),
                }
            }
            if !failures.is_empty() {
                return Err(format!(
                    "{path}: matched none of the {keyword} branches: {}",
                    failures.join("; ")
                ));
            }
        }
    }

    Ok(())
}

/// A branch of an `allOf` on an object sees only part of what the object may hold: its
/// own properties were checked against the whole composition already.
fn inner_mode(mode: Mode) -> Mode {
    match mode {
        Mode::Lenient => Mode::Lenient,
        Mode::Strict | Mode::StrictInner => Mode::StrictInner,
    }
}

/// Adds to `names` every property `schema` declares for `value`: its `properties`, those
/// of each `allOf` branch, and those of the first `anyOf` / `oneOf` branch `value`
/// matches strictly (else the first it matches at all). True when some part allows
/// undeclared properties by an `additionalProperties` schema (or `true`).
fn declared_names(
    spec: &Value,
    schema: &Value,
    value: &Value,
    depth: usize,
    names: &mut std::collections::BTreeSet<String>,
) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        return lookup(spec, reference)
            .is_ok_and(|target| declared_names(spec, target, value, depth + 1, names));
    }
    let Some(schema) = schema.as_object() else {
        return false;
    };
    let mut open = matches!(
        schema.get("additionalProperties"),
        Some(Value::Object(_) | Value::Bool(true))
    );
    if let Some(declared) = schema.get("properties").and_then(Value::as_object) {
        names.extend(declared.keys().cloned());
    }
    for branch in schema
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        open |= declared_names(spec, branch, value, depth + 1, names);
    }
    for keyword in ["anyOf", "oneOf"] {
        let Some(branches) = schema.get(keyword).and_then(Value::as_array) else {
            continue;
        };
        let pick = branches
            .iter()
            .find(|b| check_value(spec, b, value, "$", depth + 1, Mode::Strict).is_ok())
            .or_else(|| {
                branches
                    .iter()
                    .find(|b| check_value(spec, b, value, "$", depth + 1, Mode::Lenient).is_ok())
            });
        if let Some(branch) = pick {
            open |= declared_names(spec, branch, value, depth + 1, names);
        }
    }
    open
}

fn check_string(
    schema: &serde_json::Map<String, Value>,
    text: &str,
    path: &str,
) -> Result<(), String> {
    let length = u64::try_from(text.chars().count()).unwrap_or(u64::MAX);
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
        && length < min
    {
        return Err(format!(
            "{path}: expected a string of at least {min} characters, got {length}: {text:?}"
        ));
    }
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && length > max
    {
        return Err(format!(
            "{path}: expected a string of at most {max} characters, got {length}"
        ));
    }
    match schema.get("format").and_then(Value::as_str) {
        Some("date-time") if chrono::DateTime::parse_from_rfc3339(text).is_err() => {
            return Err(format!(
                "{path}: expected an RFC 3339 date-time, got {text:?}"
            ));
        }
        Some("date") => {
            let ok =
                text.len() == 10 && chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok();
            if !ok {
                return Err(format!("{path}: expected a YYYY-MM-DD date, got {text:?}"));
            }
        }
        Some("uuid") if !is_uuid(text) => {
            return Err(format!("{path}: expected a UUID, got {text:?}"));
        }
        _ => {}
    }
    Ok(())
}

fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    let lengths = [8, 4, 4, 4, 12];
    groups.len() == lengths.len()
        && groups
            .iter()
            .zip(lengths)
            .all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}
