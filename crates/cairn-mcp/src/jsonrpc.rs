//! What cairn answers itself before a JSON-RPC message reaches rmcp, on both MCP doors (the
//! stdio lines of `cairn mcp`, the bodies `POST /mcp` takes). rmcp leaves some bad input
//! without an answer, or with the wrong one, and a client then waits for it until it gives up:
//!
//! | input | rmcp | here |
//! |---|---|---|
//! | not JSON, not UTF-8, a line over 16 MiB | nothing (stdio), 415 plain text (HTTP) | `-32700`, `id: null` |
//! | a request whose `jsonrpc` is not `"2.0"` | nothing, or an error without its id | `-32600` with its id |
//! | `params` that is not an object | the same | `-32602` with its id |
//! | a known method whose params have the wrong shape (`tools/call` with array `arguments`) | `-32601` (it takes it for an unknown method) | `-32602` with its id |
//!
//! Everything else passes unchanged.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestMethod, CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, CompleteRequestMethod,
    ConstString, ErrorCode, GetPromptRequestMethod, InitializeResultMethod, ListPromptsRequestMethod,
    ListResourceTemplatesRequestMethod, ListResourcesRequestMethod, ListToolsRequestMethod, PingRequestMethod,
    ReadResourceRequestMethod, SetLevelRequestMethod, SubscribeRequestMethod, UnsubscribeRequestMethod,
};
use serde_json::{Map, Value, json};

/// Longest message taken: rmcp's own line limit on stdio.
pub(super) const MAX_MESSAGE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// Methods rmcp parses into typed params: one of these that comes out of rmcp's parser as a
/// custom request had params of the wrong shape, not an unknown name.
const TYPED_METHODS: &[&str] = &[
    InitializeResultMethod::VALUE,
    PingRequestMethod::VALUE,
    ListToolsRequestMethod::VALUE,
    CallToolRequestMethod::VALUE,
    ListPromptsRequestMethod::VALUE,
    GetPromptRequestMethod::VALUE,
    ListResourcesRequestMethod::VALUE,
    ListResourceTemplatesRequestMethod::VALUE,
    ReadResourceRequestMethod::VALUE,
    SubscribeRequestMethod::VALUE,
    UnsubscribeRequestMethod::VALUE,
    CompleteRequestMethod::VALUE,
    SetLevelRequestMethod::VALUE,
];

/// What to do with one message.
#[derive(Debug, PartialEq)]
pub(super) enum Verdict {
    /// Hand it to rmcp. `request`: the id of a request rmcp will answer (as JSON text);
    /// `cancels`: the id a `notifications/cancelled` gives up on (rmcp answers that one never).
    Pass { request: Option<String>, cancels: Option<String> },
    /// Answer with this JSON-RPC error instead.
    Answer(Value),
    /// Blank: nothing to do.
    Blank,
}

/// Judge one message (a line without its end, or a body).
pub(super) fn judge(message: &[u8]) -> Verdict {
    // rmcp takes a message after a UTF-8 byte order mark; so does this.
    let message = message.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(message);
    let Ok(text) = std::str::from_utf8(message) else {
        return Verdict::Answer(parse_error("the message is not valid UTF-8"));
    };
    if text.trim().is_empty() {
        return Verdict::Blank;
    }
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => return Verdict::Answer(parse_error(&e.to_string())),
    };
    let Value::Object(msg) = &value else {
        return Verdict::Answer(error(
            &Value::Null,
            ErrorCode::INVALID_REQUEST,
            "Invalid Request: a message is one JSON object",
        ));
    };
    let id = msg.get("id").filter(|id| id.is_string() || id.is_number());
    let method = msg.get("method").and_then(Value::as_str);
    if let (Some(id), Some(method)) = (id, method) {
        return match refusal(&value, msg, id, method) {
            Some(answer) => Verdict::Answer(answer),
            None => Verdict::Pass { request: Some(id.to_string()), cancels: None },
        };
    }
    let cancels = (method == Some("notifications/cancelled"))
        .then(|| msg.get("params")?.get("requestId").map(Value::to_string))
        .flatten();
    Verdict::Pass { request: None, cancels }
}

/// The `-32700` answer: there is no id to give.
pub(super) fn parse_error(detail: &str) -> Value {
    error(&Value::Null, ErrorCode::PARSE_ERROR, &format!("Parse error: {detail}"))
}

fn error(id: &Value, code: ErrorCode, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code.0, "message": message}})
}

/// The error answer to a request rmcp would answer wrongly or not at all.
fn refusal(value: &Value, msg: &Map<String, Value>, id: &Value, method: &str) -> Option<Value> {
    if msg.get("jsonrpc") != Some(&json!("2.0")) {
        return Some(error(id, ErrorCode::INVALID_REQUEST, "Invalid Request: \"jsonrpc\" must be \"2.0\""));
    }
    let params = msg.get("params");
    if params.is_some_and(|p| !p.is_object() && !p.is_null()) {
        return Some(error(id, ErrorCode::INVALID_PARAMS, "Invalid params: \"params\" must be an object"));
    }
    match serde_json::from_value::<ClientJsonRpcMessage>(value.clone()) {
        Err(e) => Some(error(id, ErrorCode::INVALID_REQUEST, &format!("Invalid Request: {e}"))),
        Ok(ClientJsonRpcMessage::Request(request))
            if matches!(request.request, ClientRequest::CustomRequest(_)) && TYPED_METHODS.contains(&method) =>
        {
            let why = params_problem(method, params).unwrap_or_else(|| "they do not have the shape it takes".into());
            Some(error(id, ErrorCode::INVALID_PARAMS, &format!("Invalid params for {method}: {why}")))
        }
        Ok(_) => None,
    }
}

/// What is wrong with the params of the method agents call most, in serde's words.
fn params_problem(method: &str, params: Option<&Value>) -> Option<String> {
    (method == CallToolRequestMethod::VALUE)
        .then(|| serde_json::from_value::<CallToolRequestParams>(params.cloned().unwrap_or(Value::Null)).err())
        .flatten()
        .map(|e| format!("{e} (\"arguments\" is an object of the tool's arguments)"))
}

/// `POST /mcp`: a JSON body is judged like a stdio line; an error is answered with 400 and the
/// JSON-RPC error (the status rmcp gives its own JSON-RPC refusals). Other content types go on
/// to rmcp, which answers them 415.
pub(super) async fn judge_http_message(req: Request, next: Next) -> Response {
    let declares_json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json"));
    if req.method() != axum::http::Method::POST || !declares_json {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    // The daemon's body limit wraps the body already; past it this read fails.
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        let answer =
            error(&Value::Null, ErrorCode::INVALID_REQUEST, "Invalid Request: the body could not be read whole");
        return (StatusCode::PAYLOAD_TOO_LARGE, axum::Json(answer)).into_response();
    };
    match judge(&bytes) {
        Verdict::Answer(answer) => (StatusCode::BAD_REQUEST, axum::Json(answer)).into_response(),
        Verdict::Blank => (StatusCode::BAD_REQUEST, axum::Json(parse_error("the body is empty"))).into_response(),
        Verdict::Pass { .. } => next.run(Request::from_parts(parts, Body::from(bytes))).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(line: &str) -> Value {
        match judge(line.as_bytes()) {
            Verdict::Answer(answer) => answer,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn what_rmcp_would_not_answer_is_answered_here() {
        for bad in ["not json", "{\"jsonrpc\":\"2.0\",\"id\":1,", "\u{feff}{"] {
            let a = answer(bad);
            assert_eq!((a["id"].clone(), a["error"]["code"].clone()), (Value::Null, json!(-32700)), "{bad}");
        }
        let Verdict::Answer(a) = judge(b"{\"id\":1,\xff}") else { panic!() };
        assert_eq!(a["error"]["code"], -32700);
        let a = answer(r#"{"jsonrpc":"2.0","id":7,"method":"ping","params":[1]}"#);
        assert_eq!((a["id"].clone(), a["error"]["code"].clone()), (json!(7), json!(-32602)));
        let a = answer(r#"{"jsonrpc":"1.0","id":"a","method":"tools/list"}"#);
        assert_eq!((a["id"].clone(), a["error"]["code"].clone()), (json!("a"), json!(-32600)));
        let a =
            answer(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mem_stats","arguments":[1]}}"#);
        assert_eq!((a["id"].clone(), a["error"]["code"].clone()), (json!(3), json!(-32602)));
        assert!(a["error"]["message"].as_str().unwrap().contains("arguments"), "{a}");
        let a = answer("[1]");
        assert_eq!(a["error"]["code"], -32600);
    }

    #[test]
    fn good_messages_pass_with_the_ids_rmcp_owes_an_answer() {
        let pass = |line: &str| judge(line.as_bytes());
        assert_eq!(
            pass(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}"#),
            Verdict::Pass { request: Some("1".into()), cancels: None }
        );
        assert_eq!(
            pass(r#"{"jsonrpc":"2.0","id":"a","method":"vendor/thing","params":{}}"#),
            Verdict::Pass { request: Some("\"a\"".into()), cancels: None },
            "an unknown method is rmcp's to answer (-32601)"
        );
        assert_eq!(
            pass(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}"#),
            Verdict::Pass { request: None, cancels: Some("4".into()) }
        );
        assert_eq!(pass(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#), Verdict::Pass { request: None, cancels: None });
        assert_eq!(pass("  \r"), Verdict::Blank);
    }
}
