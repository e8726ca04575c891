//! The OpenAPI 3.1 document. Paths and schemas come from the handlers' `#[utoipa::path]`
//! attributes (registered together with the routes, so the two cannot drift); this module adds
//! what every route shares: the error response, the refusals, the bearer scheme, and `/mcp`.

use utoipa::OpenApi;
use utoipa::openapi::path::{HttpMethod, Operation, OperationBuilder, PathItem};
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{Components, Content, Ref, RefOr};

pub(super) use cairn_core::openapi::{keyword, scope_filter};

use super::HttpConfig;
use super::error::ErrorBody;
use super::schema;

/// Name of the shared error response in `components.responses`.
const ERROR_RESPONSE: &str = "Error";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "cairn",
        description = "Local HTTP API of `cairn serve`: persistent memory for AI coding agents. \
            Compatible with engram's HTTP API (same paths and fields), plus cairn's routes.\n\n\
            Every error answers with one body, `ErrorBody`: `{\"error\": {\"code\", \"message\", \"hint\"}, \
            \"code\", \"detail\"}`, and the HTTP status of its code (see `ErrorCode`).\n\n\
            The server answers loopback clients with a loopback `Host` only, refuses cross-site browser \
            requests, and requires `Authorization: Bearer <token>` on every route but `/health` when \
            a token is configured."
    ),
    components(schemas(ErrorBody, schema::Sort, schema::Verdict)),
    tags(
        (name = "memories", description = "Save, read, change and search memories"),
        (name = "sessions", description = "Agent sessions"),
        (name = "prompts", description = "What users asked"),
        (name = "conflicts", description = "Relations between memories: duplicates, contradictions, supersessions"),
        (name = "projects", description = "Project identity and maintenance"),
        (name = "history", description = "Conversation history of OpenCode and Claude Code sessions"),
        (name = "daemon", description = "Health, stats, export/import, doctor, the operation RPC"),
        (name = "opencode-memory", description = "opencode-memory's memory server wire (`/memories`): extraction by the configured model"),
        (name = "mcp", description = "MCP over streamable HTTP (when enabled)"),
    )
)]
struct BaseDoc;

/// The document the routes are registered into.
pub(super) fn base() -> utoipa::openapi::OpenApi {
    BaseDoc::openapi()
}

/// The OpenAPI document, turned into JSON at its first request: a daemon's start (which
/// agents wait for) does not pay for it.
pub(crate) struct ApiDoc {
    raw: utoipa::openapi::OpenApi,
    config: std::sync::Arc<HttpConfig>,
    json: std::sync::OnceLock<serde_json::Value>,
}

impl ApiDoc {
    pub(super) fn new(raw: utoipa::openapi::OpenApi, config: std::sync::Arc<HttpConfig>) -> ApiDoc {
        ApiDoc { raw, config, json: std::sync::OnceLock::new() }
    }

    pub(super) fn json(&self) -> &serde_json::Value {
        self.json.get_or_init(|| {
            let doc = finish(self.raw.clone(), &self.config);
            let mut doc = serde_json::to_value(&doc).unwrap_or(serde_json::Value::Null);
            bound_integers(&mut doc);
            non_blank_patterns(&mut doc);
            doc
        })
    }
}

/// Complete the document built from the routes.
fn finish(mut doc: utoipa::openapi::OpenApi, config: &HttpConfig) -> utoipa::openapi::OpenApi {
    doc.info.version.clone_from(&config.version);
    doc.info.license = None;
    if config.mcp.is_some() {
        doc.paths.paths.insert("/mcp".into(), mcp_path());
    }
    let components = doc.components.get_or_insert_with(Components::new);
    components.responses.insert(ERROR_RESPONSE.into(), RefOr::T(error_response()));
    components.add_security_scheme("bearer", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
    // Optional globally (`{}`): the token is only required when the daemon is given one.
    doc.security = Some(vec![SecurityRequirement::default(), SecurityRequirement::new("bearer", Vec::<String>::new())]);
    for (path, item) in &mut doc.paths.paths {
        for op in operations(item) {
            add_shared_responses(op, path == "/health");
        }
    }
    doc
}

/// Give every integer schema without a `maximum` the largest value its Rust type takes, so the
/// document says which numbers the server can read (`limit=1e30` is refused as too large for
/// a 64-bit integer, not because the schema allowed it).
fn bound_integers(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(object) => {
            let is_integer = match object.get("type") {
                Some(serde_json::Value::String(t)) => t == "integer",
                Some(serde_json::Value::Array(types)) => types.iter().any(|t| t == "integer"),
                _ => false,
            };
            if is_integer && !object.contains_key("maximum") {
                let unsigned = object.get("minimum").and_then(serde_json::Value::as_f64).is_some_and(|m| m >= 0.0);
                let format = object.get("format").and_then(serde_json::Value::as_str).map(str::to_owned);
                if unsigned && format.as_deref() == Some("int32") {
                    // utoipa calls u32 `int32`, whose range a client would read as i32's.
                    object.insert("format".into(), serde_json::json!("uint32"));
                }
                let max = match format.as_deref() {
                    Some("int32") if unsigned => serde_json::json!(u32::MAX),
                    Some("int32") => serde_json::json!(i32::MAX),
                    Some("uint32") => serde_json::json!(u32::MAX),
                    Some("int64") => serde_json::json!(i64::MAX),
                    _ if unsigned => serde_json::json!(u64::MAX),
                    _ => serde_json::json!(i64::MAX),
                };
                object.insert("maximum".into(), max);
            }
            object.values_mut().for_each(bound_integers);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(bound_integers),
        _ => {}
    }
}

/// Make every `\S` pattern (the attributes' short way to say "not blank") say what the server
/// means by it: [`NON_BLANK`].
fn non_blank_patterns(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(object) => {
            if object.get("pattern").and_then(serde_json::Value::as_str) == Some(r"\S") {
                object.insert("pattern".into(), NON_BLANK.into());
            }
            object.values_mut().for_each(non_blank_patterns);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(non_blank_patterns),
        _ => {}
    }
}

/// A text the server does not see as blank: one character that Rust's `str::trim` keeps. (Not
/// `\S`: ECMA-262's `\s` leaves out U+0085, which `trim` removes, so a schema-valid `q=%C2%85`
/// was refused as empty.) The set of `cairn_core::openapi::TRIMMED`, negated.
const NON_BLANK: &str = "[^\\t\\n\\x0b\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";

/// A layout of `GET /context`.
pub(super) fn context_layout() -> utoipa::openapi::Schema {
    keyword(&["recent", "memory_block"], "`recent` or `memory_block` (any case); blank: recent")
}

/// A host of `GET /protocol`.
pub(super) fn protocol_host() -> utoipa::openapi::Schema {
    keyword(&["mcp", "opencode", "claude-code", "codex", "gemini"], "the host (any case); blank: mcp")
}

/// A tool profile of `GET /protocol`.
pub(super) fn protocol_tools() -> utoipa::openapi::Schema {
    keyword(&["agent", "admin", "all", "router"], "the MCP tool profile (any case); blank: agent")
}

/// A part of `GET /protocol`.
pub(super) fn protocol_part() -> utoipa::openapi::Schema {
    keyword(
        &["memory", "compaction_note", "continuity", "trigger", "history", "upstream", "chart_prompt"],
        "which text (any case); blank: memory",
    )
}

/// A timestamp filter: RFC 3339, or empty (or null) for no filter (engram's clients send `since=`).
pub(super) fn date_time_or_empty() -> utoipa::openapi::Schema {
    use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, OneOfBuilder, SchemaFormat, Type};
    let date_time =
        ObjectBuilder::new().schema_type(Type::String).format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)));
    let empty = ObjectBuilder::new().schema_type(Type::String).max_length(Some(0));
    let null = ObjectBuilder::new().schema_type(Type::Null);
    utoipa::openapi::Schema::OneOf(OneOfBuilder::new().item(date_time).item(empty).item(null).build())
}

fn error_response() -> Response {
    ResponseBuilder::new()
        .description("An error from cairn's error table. The status is the code's; the body is always `ErrorBody`.")
        .content("application/json", Content::new(Some(Ref::from_schema_name("ErrorBody"))))
        .build()
}

/// Refusals can happen on any route; everything else a route may answer is in `default`.
fn add_shared_responses(op: &mut Operation, open_route: bool) {
    let shared = |description: &str| {
        RefOr::T(
            ResponseBuilder::new()
                .description(description)
                .content("application/json", Content::new(Some(Ref::from_schema_name("ErrorBody"))))
                .build(),
        )
    };
    let responses = &mut op.responses.responses;
    responses.entry("403".into()).or_insert_with(|| {
        shared(
            "`forbidden`: the Host is not a loopback name, the peer is not local, a browser request is cross-site, \
             or a change comes from a page that is not cairn's own",
        )
    });
    if !open_route {
        responses.entry("401".into()).or_insert_with(|| {
            shared("`unauthorized`: the daemon has a token and the request lacks it (`WWW-Authenticate: Bearer`)")
        });
    }
    responses.entry("default".into()).or_insert_with(|| RefOr::Ref(Ref::from_response_name(ERROR_RESPONSE)));
}

fn operations(item: &mut PathItem) -> impl Iterator<Item = &mut Operation> {
    [&mut item.get, &mut item.post, &mut item.put, &mut item.patch, &mut item.delete, &mut item.head, &mut item.options]
        .into_iter()
        .filter_map(Option::as_mut)
}

/// `/mcp` is served by the MCP router (JSON-RPC over streamable HTTP), not by these handlers:
/// apart from cairn's own refusals (401, 403, 413: `ErrorBody`), its errors are the transport's,
/// in plain text without a `Content-Type` (a missing `Accept`, session id or JSON-RPC body).
fn mcp_path() -> PathItem {
    let operation = |summary: &str| -> Operation {
        OperationBuilder::new()
            .tag("mcp")
            .summary(Some(summary))
            .description(Some("MCP streamable HTTP transport (JSON-RPC 2.0); the same tools as `cairn mcp`."))
            .response("200", ResponseBuilder::new().description("MCP response (JSON or an SSE stream)"))
            .response("202", ResponseBuilder::new().description("A notification or response was accepted"))
            .response(
                "default",
                ResponseBuilder::new().description(
                    "The MCP transport refused the request (plain text; a body that is no JSON, or a known \
                     method with params of the wrong shape: 400 with the JSON-RPC error)",
                ),
            )
            .build()
    };
    let mut item = PathItem::new(HttpMethod::Post, operation("Send MCP messages"));
    item.get = Some(operation("Open an MCP server-to-client stream"));
    item.delete = Some(operation("End an MCP session"));
    item
}

#[cfg(test)]
mod tests {
    use cairn_core::ops::CATALOGUE;

    /// `OpRequest`'s doc lists the operations by hand: it must name the catalogue's, in order.
    #[test]
    fn the_op_request_schema_names_every_op() {
        let schema = serde_json::to_value(<super::schema::OpRequest as utoipa::PartialSchema>::schema());
        let op = &schema.unwrap()["properties"]["op"]["description"];
        let names = op.as_str().and_then(|d| d.strip_prefix("Operation name:")).expect("OpRequest.op is described");
        let listed: Vec<&str> = names.split(',').map(|name| name.trim().trim_end_matches('.')).collect();
        let catalogue: Vec<&str> = CATALOGUE.iter().map(|spec| spec.name).collect();
        assert_eq!(listed, catalogue);
    }

    /// The class [`super::NON_BLANK`] excludes is exactly what `str::trim` removes: every
    /// character of the Basic Multilingual Plane is either in the class's list or kept by trim.
    #[test]
    fn non_blank_excludes_exactly_what_trim_removes() {
        let class = super::NON_BLANK.strip_prefix("[^").and_then(|c| c.strip_suffix(']')).expect("a negated class");
        let excluded = |c: char| -> bool {
            let mut rest = class;
            while !rest.is_empty() {
                let (first, after) = escaped(rest);
                if let Some(after_dash) = after.strip_prefix('-') {
                    let (last, after_range) = escaped(after_dash);
                    if (first..=last).contains(&c) {
                        return true;
                    }
                    rest = after_range;
                } else {
                    if c == first {
                        return true;
                    }
                    rest = after;
                }
            }
            false
        };
        for c in (0u32..=0xffff).filter_map(char::from_u32) {
            let blank = c.to_string().trim().is_empty();
            assert_eq!(excluded(c), blank, "U+{:04X}", u32::from(c));
        }
    }

    /// One character of a regex class written as the document writes it: itself, `\t`, `\n`,
    /// `\f`, `\r`, `\xHH` or `\uHHHH`; and what follows it.
    fn escaped(text: &str) -> (char, &str) {
        let Some(rest) = text.strip_prefix('\\') else {
            let c = text.chars().next().expect("not empty");
            return (c, &text[c.len_utf8()..]);
        };
        let hex = |digits: &str| char::from_u32(u32::from_str_radix(digits, 16).expect("hex")).expect("a char");
        match rest.as_bytes()[0] {
            b't' => ('\t', &rest[1..]),
            b'n' => ('\n', &rest[1..]),
            b'f' => ('\x0c', &rest[1..]),
            b'r' => ('\r', &rest[1..]),
            b'x' => (hex(&rest[1..3]), &rest[3..]),
            b'u' => (hex(&rest[1..5]), &rest[5..]),
            other => panic!("unexpected escape \\{}", other as char),
        }
    }
}
