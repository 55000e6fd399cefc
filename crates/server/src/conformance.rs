//! The fixtures of the official MCP conformance suite (`@modelcontextprotocol/conformance`),
//! served by the same HTTP transport and guards as tradedesk itself, so the suite tests
//! our transport code, not a separate server. Built only with the `conformance` feature.
//! The fixtures exercise legacy features (logging, sampling, subscriptions) on purpose,
//! which rmcp marks deprecated for 2026-07-28.
#![allow(deprecated)]

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ContentBlock, ErrorCode, ErrorData, GetPromptRequestParams, GetPromptResponse, GetPromptResult,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, LoggingMessageNotificationParam, PaginatedRequestParams,
    ProgressNotificationParam, Prompt, PromptArgument, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResultType,
    ServerCapabilities, ServerConfig, SetLevelRequestParams, SubscribeRequestParams, Tool,
    UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

#[derive(Debug, Clone, Default)]
pub struct ConformanceServer;

fn from<T: DeserializeOwned>(value: Value) -> Result<T, ErrorData> {
    serde_json::from_value(value)
        .map_err(|e| ErrorData::internal_error(format!("fixture: {e}"), None))
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn empty_schema() -> Map<String, Value> {
    object(json!({"type": "object", "properties": {}}))
}

fn tool(name: &'static str, description: &'static str, schema: Map<String, Value>) -> Tool {
    Tool::new(name, description, schema)
}

fn tools() -> Vec<Tool> {
    let prompt_schema = object(
        json!({"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}),
    );
    let message_schema = object(
        json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
    );
    vec![
        tool(
            "test_simple_text",
            "Returns a simple text response",
            empty_schema(),
        ),
        tool("test_image_content", "Returns an image", empty_schema()),
        tool("test_audio_content", "Returns audio", empty_schema()),
        tool(
            "test_embedded_resource",
            "Returns an embedded resource",
            empty_schema(),
        ),
        tool(
            "test_multiple_content_types",
            "Returns text, an image and a resource",
            empty_schema(),
        ),
        tool(
            "test_tool_with_logging",
            "Logs three messages while it runs",
            empty_schema(),
        ),
        tool(
            "test_tool_with_progress",
            "Reports progress 0, 50 and 100 of 100",
            empty_schema(),
        ),
        tool(
            "test_error_handling",
            "Always fails with an error result",
            empty_schema(),
        ),
        tool(
            "test_sampling",
            "Asks the client's model to complete a prompt",
            prompt_schema,
        ),
        tool(
            "test_elicitation",
            "Asks the user for a username and email",
            message_schema,
        ),
        tool(
            "test_elicitation_sep1034_defaults",
            "Elicitation with default values",
            empty_schema(),
        ),
        tool(
            "test_elicitation_sep1330_enums",
            "Elicitation with enum fields",
            empty_schema(),
        ),
        tool(
            "json_schema_2020_12_tool",
            "Declares a JSON Schema 2020-12 input schema",
            object(json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"},
                    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                    "phone": {"type": "string"},
                    "email": {"type": "string"}
                },
                "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
                "then": {"required": ["phone"]},
                "else": {"required": ["email"]},
                "additionalProperties": false
            })),
        ),
        tool(
            "test_missing_capability",
            "Needs the client's sampling capability",
            empty_schema(),
        ),
        tool(
            "test_streaming_elicitation",
            "Streams only notifications before its result",
            empty_schema(),
        ),
        tool(
            "test_logging_tool",
            "Logs only when the request asks for a log level",
            empty_schema(),
        ),
        tool(
            "test_input_required_result_elicitation",
            "Asks for the user's name (MRTR)",
            empty_schema(),
        ),
        tool(
            "test_input_required_result_sampling",
            "Asks the client's model a question (MRTR)",
            empty_schema(),
        ),
        tool(
            "test_input_required_result_list_roots",
            "Asks for the client's roots (MRTR)",
            empty_schema(),
        ),
        tool(
            "test_input_required_result_request_state",
            "Round-trips request state (MRTR)",
            empty_schema(),
        ),
        tool(
            "test_input_required_result_multiple_inputs",
            "Asks for three inputs at once (MRTR)",
            empty_schema(),
        ),
        tool(
            "test_input_required_result_multi_round",
            "Asks in two rounds (MRTR)",
            empty_schema(),
        ),
        tool(
            "test_input_required_result_tampered_state",
            "Rejects tampered request state (MRTR)",
            empty_schema(),
        ),
        tool(
            "test_input_required_result_capabilities",
            "Asks only for what the client supports (MRTR)",
            empty_schema(),
        ),
    ]
}

/// The multi-round-trip fixtures (SEP-2322): each answers `input_required` until the
/// client retries with the inputs it asked for.
mod mrtr {
    use serde_json::{Value, json};

    pub(super) fn elicit(message: &str, property: &str, kind: &str) -> Value {
        json!({"method": "elicitation/create", "params": {"message": message,
            "requestedSchema": {"type": "object", "properties": {property: {"type": kind}}, "required": [property]}}})
    }

    pub(super) fn sample(text: &str, max_tokens: u32) -> Value {
        json!({"method": "sampling/createMessage", "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": max_tokens}})
    }

    pub(super) fn roots() -> Value {
        json!({"method": "roots/list", "params": {}})
    }

    /// An accepted elicitation's string field.
    pub(super) fn accepted(responses: &Value, key: &str, field: &str) -> Option<String> {
        let r = responses.get(key)?;
        (r.get("action")?.as_str()? == "accept").then_some(())?;
        match r.pointer(&format!("/content/{field}"))? {
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        }
    }

    pub(super) fn sampled(responses: &Value, key: &str) -> Option<String> {
        responses
            .get(key)?
            .pointer("/content/text")?
            .as_str()
            .map(str::to_owned)
    }

    pub(super) fn root_count(responses: &Value, key: &str) -> Option<usize> {
        responses.get(key)?.get("roots")?.as_array().map(Vec::len)
    }
}

/// A request state sealed with a checksum, so a tampered one is recognised.
fn seal(state: &str) -> String {
    let sum = state.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    format!("{state}.{sum:016x}")
}

fn unseal(sealed: &str) -> Option<&str> {
    let (state, _) = sealed.rsplit_once('.')?;
    (seal(state) == sealed).then_some(state)
}

fn text_result(text: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(text)]).into()
}

impl ConformanceServer {
    async fn log(ctx: &RequestContext<RoleServer>, text: &str) {
        let param: Result<LoggingMessageNotificationParam, _> =
            from(json!({"level": "info", "data": text}));
        if let Ok(param) = param {
            let _ = ctx.peer.notify_logging_message(param).await;
        }
    }

    async fn elicit(ctx: &RequestContext<RoleServer>, params: Value) -> Result<String, ErrorData> {
        let params = from(params)?;
        let result = ctx
            .peer
            .create_elicitation(params)
            .await
            .map_err(|e| ErrorData::internal_error(format!("elicitation failed: {e}"), None))?;
        let value = serde_json::to_value(&result).unwrap_or(Value::Null);
        Ok(format!(
            "Elicitation completed: action={}, content={}",
            value
                .get("action")
                .and_then(Value::as_str)
                .unwrap_or("unknown"),
            value.get("content").cloned().unwrap_or(Value::Null)
        ))
    }
}

fn input_required(requests: Value, state: Option<String>) -> Result<CallToolResponse, ErrorData> {
    let mut body = Map::new();
    body.insert("resultType".into(), json!("input_required"));
    body.insert("inputRequests".into(), requests);
    if let Some(state) = state {
        body.insert("requestState".into(), Value::String(state));
    }
    Ok(CallToolResponse::InputRequired(from(Value::Object(body))?))
}

/// -32021: the call needs the client's sampling capability, which it did not declare.
fn missing_sampling() -> ErrorData {
    ErrorData::new(
        ErrorCode(-32021),
        "MissingRequiredClientCapabilityError",
        Some(json!({"requiredCapabilities": {"sampling": {}}})),
    )
}

fn bad_input(what: &str) -> ErrorData {
    ErrorData::invalid_params(format!("invalid input responses: {what}"), None)
}

impl ConformanceServer {
    fn mrtr_tool(
        name: &str,
        responses: &Value,
        state: Option<&str>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        use mrtr::{accepted, elicit, root_count, roots, sample, sampled};
        let has = |key: &str| responses.get(key).is_some();
        match name.trim_start_matches("test_input_required_result_") {
            "elicitation" => match accepted(responses, "user_name", "name") {
                Some(name) if responses["user_name"]["content"]["name"].is_string() => {
                    Ok(text_result(format!("Hello, {name}!")))
                }
                Some(_) => Err(bad_input("user_name.content.name must be a string")),
                None if has("user_name") => {
                    Err(bad_input("user_name must be an accepted elicitation"))
                }
                None => input_required(
                    json!({"user_name": elicit("What is your name?", "name", "string")}),
                    None,
                ),
            },
            "sampling" => match sampled(responses, "capital_question") {
                Some(text) => Ok(text_result(format!("Sampling result: {text}"))),
                None => input_required(
                    json!({"capital_question": sample("What is the capital of France?", 100)}),
                    None,
                ),
            },
            "list_roots" => match root_count(responses, "client_roots") {
                Some(n) => Ok(text_result(format!("Found {n} root(s)"))),
                None => input_required(json!({"client_roots": roots()}), None),
            },
            "request_state" => match (accepted(responses, "confirm", "ok"), state.and_then(unseal))
            {
                (Some(_), Some("confirm")) => Ok(text_result("state-ok: requestState validated")),
                (Some(_), _) => Err(bad_input("requestState is missing or was altered")),
                (None, _) => input_required(
                    json!({"confirm": elicit("Please confirm", "ok", "boolean")}),
                    Some(seal("confirm")),
                ),
            },
            "multiple_inputs" => match (
                accepted(responses, "user_name", "name"),
                sampled(responses, "greeting"),
                root_count(responses, "client_roots"),
            ) {
                (Some(name), Some(greeting), Some(n)) => Ok(text_result(format!(
                    "Name: {name}; Greeting: {greeting}; Roots: {n}"
                ))),
                _ => input_required(
                    json!({
                        "user_name": elicit("What is your name?", "name", "string"),
                        "greeting": sample("Generate a greeting", 50),
                        "client_roots": roots()
                    }),
                    Some(seal("multiple")),
                ),
            },
            "multi_round" => match state.and_then(unseal) {
                Some(s) if s.starts_with("step2:") => match accepted(responses, "step2", "color") {
                    Some(color) => Ok(text_result(format!(
                        "Multi-round complete for {} who likes {color}",
                        &s[6..]
                    ))),
                    None => Err(bad_input("step2 must be an accepted elicitation")),
                },
                Some("step1") => match accepted(responses, "step1", "name") {
                    Some(name) => input_required(
                        json!({"step2": elicit("Step 2: What is your favorite color?", "color", "string")}),
                        Some(seal(&format!("step2:{name}"))),
                    ),
                    None => Err(bad_input("step1 must be an accepted elicitation")),
                },
                Some(_) => Err(bad_input("requestState is not one this server issued")),
                None if state.is_some() => Err(bad_input("requestState integrity check failed")),
                None => input_required(
                    json!({"step1": elicit("Step 1: What is your name?", "name", "string")}),
                    Some(seal("step1")),
                ),
            },
            "tampered_state" => match state {
                None => input_required(
                    json!({"confirm": elicit("Please confirm", "ok", "boolean")}),
                    Some(seal("tamper-check")),
                ),
                Some(s) if unseal(s) == Some("tamper-check") => Ok(text_result("state-ok")),
                Some(_) => Err(bad_input("requestState integrity check failed")),
            },
            "capabilities" => {
                let caps = ctx.client_capabilities();
                let can_sample = caps.as_ref().is_some_and(|c| c.sampling.is_some());
                let can_elicit = caps.as_ref().is_some_and(|c| c.elicitation.is_some());
                if let Some(text) = sampled(responses, "sample_input") {
                    return Ok(text_result(format!("Sampled: {text}")));
                }
                let mut requests = serde_json::Map::new();
                if can_sample {
                    requests.insert("sample_input".into(), sample("Sample request", 50));
                }
                if can_elicit {
                    requests.insert(
                        "user_name".into(),
                        elicit("What is your name?", "name", "string"),
                    );
                }
                if requests.is_empty() {
                    return Err(missing_sampling());
                }
                input_required(Value::Object(requests), Some(seal("capabilities")))
            }
            other => Err(ErrorData::invalid_params(
                format!("unknown tool {}", crate::content::excerpt(other)),
                None,
            )),
        }
    }
}

impl ServerHandler for ConformanceServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_prompts()
            .enable_logging()
            .enable_completions()
            .build();
        ServerConfig::new(capabilities).with_server_info(Implementation::new(
            "tradedesk-conformance",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_tools(
        &self,
        _params: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        params: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let responses = params
            .input_responses
            .as_ref()
            .and_then(|r| serde_json::to_value(r).ok())
            .unwrap_or(Value::Null);
        let state = params.request_state.clone();
        let name = params.name.to_string();
        if name.starts_with("test_input_required_result_") {
            return Self::mrtr_tool(&name, &responses, state.as_deref(), &ctx);
        }
        let args = params.arguments.unwrap_or_default();
        let arg = |name: &str| {
            args.get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        match name.as_str() {
            "test_simple_text" => Ok(text_result("This is a simple text response for testing.")),
            "test_image_content" => Ok(CallToolResult::success(vec![ContentBlock::image(PNG, "image/png")]).into()),
            "test_audio_content" => Ok(CallToolResult::success(vec![ContentBlock::audio(WAV, "audio/wav")]).into()),
            "test_embedded_resource" => Ok(CallToolResult::success(vec![ContentBlock::resource(
                ResourceContents::text("This is an embedded resource content.", "test://embedded-resource")
                    .with_mime_type("text/plain"),
            )])
            .into()),
            "test_multiple_content_types" => Ok(CallToolResult::success(vec![
                ContentBlock::text("Multiple content types test:"),
                ContentBlock::image(PNG, "image/png"),
                ContentBlock::resource(
                    ResourceContents::text(r#"{"test":"data","value":123}"#, "test://mixed-content-resource")
                        .with_mime_type("application/json"),
                ),
            ])
            .into()),
            "test_tool_with_logging" => {
                for (i, text) in ["Tool execution started", "Tool processing data", "Tool execution completed"].iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Self::log(&ctx, text).await;
                }
                Ok(text_result("Tool with logging executed successfully"))
            }
            "test_tool_with_progress" => {
                let token = ctx.meta.get_progress_token();
                if let Some(token) = &token {
                    for (i, step) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                        if i > 0 {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        let note = ProgressNotificationParam::new(token.clone(), step).with_total(100.0);
                        let _ = ctx.peer.notify_progress(note).await;
                    }
                }
                Ok(text_result(token.map_or_else(|| "no progress token".to_owned(), |t| serde_json::to_string(&t).unwrap_or_default())))
            }
            "test_error_handling" => Ok(CallToolResult::error(vec![ContentBlock::text(
                "This tool intentionally returns an error for testing",
            )])
            .into()),
            "test_sampling" => {
                let request = from(json!({
                    "messages": [{"role": "user", "content": {"type": "text", "text": arg("prompt")}}],
                    "maxTokens": 100
                }))?;
                let result = ctx
                    .peer
                    .create_message(request)
                    .await
                    .map_err(|e| ErrorData::internal_error(format!("sampling failed: {e}"), None))?;
                let value = serde_json::to_value(&result).unwrap_or(Value::Null);
                let text = value.pointer("/content/text").and_then(Value::as_str).unwrap_or_default().to_owned();
                Ok(text_result(format!("LLM response: {text}")))
            }
            "test_elicitation" => {
                let text = Self::elicit(&ctx, json!({
                    "message": arg("message"),
                    "requestedSchema": {"type": "object", "properties": {
                        "username": {"type": "string", "description": "User's response"},
                        "email": {"type": "string", "description": "User's email address"}
                    }, "required": ["username", "email"]}
                }))
                .await?;
                Ok(text_result(text.replace("Elicitation completed:", "User response:")))
            }
            "test_elicitation_sep1034_defaults" => Ok(text_result(
                Self::elicit(&ctx, json!({
                    "message": "Please review and update the form fields with defaults",
                    "requestedSchema": {"type": "object", "properties": {
                        "name": {"type": "string", "description": "User name", "default": "John Doe"},
                        "age": {"type": "integer", "description": "User age", "default": 30},
                        "score": {"type": "number", "description": "User score", "default": 95.5},
                        "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
                        "verified": {"type": "boolean", "description": "Verification status", "default": true}
                    }, "required": []}
                }))
                .await?,
            )),
            "test_elicitation_sep1330_enums" => Ok(text_result(
                Self::elicit(&ctx, json!({
                    "message": "Please select options from the enum fields",
                    "requestedSchema": {"type": "object", "properties": {
                        "untitledSingle": {"type": "string", "description": "Select one option", "enum": ["option1", "option2", "option3"]},
                        "titledSingle": {"type": "string", "description": "Select one option with titles", "oneOf": [
                            {"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}]},
                        "legacyEnum": {"type": "string", "description": "Select one option (legacy)", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
                        "untitledMulti": {"type": "array", "description": "Select multiple options", "minItems": 1, "maxItems": 3, "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                        "titledMulti": {"type": "array", "description": "Select multiple options with titles", "minItems": 1, "maxItems": 3, "items": {"anyOf": [
                            {"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"}, {"const": "value3", "title": "Third Choice"}]}}
                    }, "required": []}
                }))
                .await?,
            )),
            "test_missing_capability" => {
                let has_sampling = ctx.client_capabilities().is_some_and(|c| c.sampling.is_some());
                if has_sampling {
                    Ok(text_result("Success"))
                } else {
                    Err(missing_sampling())
                }
            }
            "test_streaming_elicitation" => Ok(text_result("Streaming complete")),
            "json_schema_2020_12_tool" => {
                Ok(text_result(format!("JSON Schema 2020-12 tool called with: {}", Value::Object(args.clone()))))
            }
            "test_logging_tool" => Ok(text_result("Logging evaluated")),
            other => Err(ErrorData::invalid_params(format!("unknown tool {}", crate::content::excerpt(other)), None)),
        }
    }

    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn list_resources(
        &self,
        _params: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(vec![
            Resource::new("test://static-text", "static-text")
                .with_description("A static text resource")
                .with_mime_type("text/plain"),
            Resource::new("test://static-binary", "static-binary")
                .with_description("A static binary resource")
                .with_mime_type("image/png"),
            Resource::new("test://watched-resource", "watched-resource")
                .with_description("A resource to subscribe to")
                .with_mime_type("text/plain"),
        ]))
    }

    async fn list_resource_templates(
        &self,
        _params: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![from(
            json!({
                "name": "template", "uriTemplate": "test://template/{id}/data",
                "description": "Data for an id", "mimeType": "application/json"
            }),
        )?]))
    }

    async fn read_resource(
        &self,
        params: ReadResourceRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = params.uri.as_str();
        let contents = match uri {
            "test://static-text" => {
                ResourceContents::text("This is the content of the static text resource.", uri)
                    .with_mime_type("text/plain")
            }
            "test://watched-resource" => {
                ResourceContents::text("Watched resource content", uri).with_mime_type("text/plain")
            }
            "test://static-binary" => {
                from(json!({"uri": uri, "mimeType": "image/png", "blob": PNG}))?
            }
            _ => match uri
                .strip_prefix("test://template/")
                .and_then(|rest| rest.strip_suffix("/data"))
            {
                Some(id) => ResourceContents::text(
                    json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
                        .to_string(),
                    uri,
                )
                .with_mime_type("application/json"),
                None => {
                    return Err(ErrorData::new(
                        ErrorCode::INVALID_PARAMS,
                        format!("resource not found: {}", crate::content::excerpt(uri)),
                        Some(json!({"uri": uri})),
                    ));
                }
            },
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn subscribe(
        &self,
        _params: SubscribeRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn unsubscribe(
        &self,
        _params: UnsubscribeRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn set_level(
        &self,
        _params: SetLevelRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn complete(
        &self,
        _params: CompleteRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let mut result: CompleteResult =
            from(json!({"completion": {"values": [], "total": 0, "hasMore": false}}))?;
        result.result_type = Some(ResultType::COMPLETE);
        Ok(result)
    }

    async fn list_prompts(
        &self,
        _params: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let arg = |name: &str, description: &str| {
            PromptArgument::new(name)
                .with_description(description)
                .with_required(true)
        };
        Ok(ListPromptsResult::with_all_items(vec![
            Prompt::new("test_simple_prompt", Some("A simple prompt"), None),
            Prompt::new(
                "test_prompt_with_arguments",
                Some("A prompt with two arguments"),
                Some(vec![
                    arg("arg1", "First test argument"),
                    arg("arg2", "Second test argument"),
                ]),
            ),
            Prompt::new(
                "test_prompt_with_embedded_resource",
                Some("A prompt with an embedded resource"),
                Some(vec![arg("resourceUri", "URI of the resource to embed")]),
            ),
            Prompt::new(
                "test_prompt_with_image",
                Some("A prompt with an image"),
                None,
            ),
            Prompt::new(
                "test_input_required_result_prompt",
                Some("A prompt that first asks for context (MRTR)"),
                None,
            ),
        ]))
    }

    async fn get_prompt(
        &self,
        params: GetPromptRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if params.name == "test_input_required_result_prompt" {
            let responses = params
                .input_responses
                .as_ref()
                .and_then(|r| serde_json::to_value(r).ok())
                .unwrap_or(Value::Null);
            return match mrtr::accepted(&responses, "user_context", "context") {
                Some(context) => {
                    let mut result: GetPromptResult = from(json!({"messages": [{"role": "user",
                        "content": {"type": "text", "text": format!("Prompt with context: {context}")}}]}))?;
                    result.result_type = Some(ResultType::COMPLETE);
                    Ok(result.into())
                }
                None => Ok(GetPromptResponse::InputRequired(from(
                    json!({"resultType": "input_required",
                    "inputRequests": {"user_context": mrtr::elicit("What context should the prompt use?", "context", "string")}}),
                )?)),
            };
        }
        let args = params.arguments.unwrap_or_default();
        let arg = |name: &str| {
            args.get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let messages = match params.name.as_str() {
            "test_simple_prompt" => {
                json!([{"role": "user", "content": {"type": "text", "text": "This is a simple prompt for testing."}}])
            }
            "test_prompt_with_arguments" => json!([{"role": "user", "content": {"type": "text",
                "text": format!("Prompt with arguments: arg1='{}', arg2='{}'", arg("arg1"), arg("arg2"))}}]),
            "test_prompt_with_embedded_resource" => json!([
                {"role": "user", "content": {"type": "resource", "resource": {"uri": arg("resourceUri"), "mimeType": "text/plain", "text": "Embedded resource content for testing."}}},
                {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}}
            ]),
            "test_prompt_with_image" => json!([
                {"role": "user", "content": {"type": "image", "data": PNG, "mimeType": "image/png"}},
                {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}}
            ]),
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown prompt {}", crate::content::excerpt(other)),
                    None,
                ));
            }
        };
        let mut result: GetPromptResult = from(json!({"messages": messages}))?;
        result.result_type = Some(ResultType::COMPLETE);
        Ok(result.into())
    }
}
