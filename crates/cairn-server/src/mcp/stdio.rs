//! stdin/stdout for `cairn mcp`, with one guard in front of rmcp: a request whose id can be
//! read but whose envelope is wrong (`params` that is not an object, a `jsonrpc` other than
//! `"2.0"`) is answered here with a JSON-RPC error *carrying its id*. rmcp answers such lines
//! with an id-less error (or not at all), which leaves the client waiting for that id until it
//! gives up. Everything else passes through unchanged; stdout is written by one task, whole
//! lines only, so answers from rmcp and from here never interleave.

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;

/// Longest line passed on (rmcp drops longer ones itself; this bounds our buffer too).
const MAX_LINE: usize = 16 * 1024 * 1024;

/// Start pumping `input` → rmcp and rmcp → `output`; returns rmcp's ends (read, write).
pub fn guarded<R, W>(input: R, output: W) -> (DuplexStream, DuplexStream)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (rmcp_read, mut feed) = tokio::io::duplex(1 << 16);
    let (rmcp_write, drain) = tokio::io::duplex(1 << 16);
    let (replies, mut pending) = mpsc::channel::<Vec<u8>>(64);

    tokio::spawn(async move {
        let mut input = BufReader::new(input);
        let mut line = Vec::new();
        loop {
            line.clear();
            match (&mut input).take(MAX_LINE as u64).read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if let Some(reply) = refusal(&line) {
                if replies.send(reply).await.is_err() {
                    break;
                }
                continue;
            }
            if feed.write_all(&line).await.is_err() {
                break;
            }
        }
        // EOF on stdin: rmcp sees EOF too and ends the session.
        let _ = feed.shutdown().await;
    });

    tokio::spawn(async move {
        let mut output = output;
        let mut drain = BufReader::new(drain);
        let mut line = Vec::new();
        let (mut rmcp_open, mut replies_open) = (true, true);
        loop {
            tokio::select! {
                read = drain.read_until(b'\n', &mut line), if rmcp_open => match read {
                    Ok(0) | Err(_) => rmcp_open = false,
                    Ok(_) => {
                        if output.write_all(&line).await.and(output.flush().await).is_err() {
                            break;
                        }
                        line.clear();
                    }
                },
                reply = pending.recv(), if replies_open => match reply {
                    Some(reply) => {
                        if output.write_all(&reply).await.and(output.flush().await).is_err() {
                            break;
                        }
                    }
                    None => replies_open = false,
                },
                else => break,
            }
        }
    });

    (rmcp_read, rmcp_write)
}

/// The error answer to a request rmcp would leave without one, if `line` is such a request.
fn refusal(line: &[u8]) -> Option<Vec<u8>> {
    let Ok(Value::Object(msg)) = serde_json::from_slice::<Value>(line) else { return None };
    let id = msg.get("id").filter(|id| id.is_string() || id.is_number())?;
    msg.get("method").filter(|m| m.is_string())?;
    let (code, message) = if msg.get("jsonrpc") != Some(&json!("2.0")) {
        (-32600, "Invalid Request: \"jsonrpc\" must be \"2.0\"")
    } else if msg.get("params").is_some_and(|p| !p.is_object() && !p.is_null()) {
        (-32602, "Invalid params: \"params\" must be an object")
    } else {
        return None;
    };
    let mut reply = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string();
    reply.push('\n');
    Some(reply.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_with_a_readable_id_and_a_bad_envelope_are_answered_with_it() {
        let reply = |line: &str| refusal(line.as_bytes()).map(|r| serde_json::from_slice::<Value>(&r).unwrap());
        let r = reply(r#"{"jsonrpc":"2.0","id":7,"method":"ping","params":[1]}"#).unwrap();
        assert_eq!((r["id"].clone(), r["error"]["code"].clone()), (json!(7), json!(-32602)));
        let r = reply(r#"{"jsonrpc":"1.0","id":"a","method":"tools/list"}"#).unwrap();
        assert_eq!((r["id"].clone(), r["error"]["code"].clone()), (json!("a"), json!(-32600)));
        // Left to rmcp: good requests, notifications, answers, and what has no usable id.
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/x","params":5}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"ping","params":5}"#,
            "not json",
        ] {
            assert!(reply(line).is_none(), "{line}");
        }
    }

    #[tokio::test]
    async fn lines_pass_through_and_refusals_come_back_whole() {
        let (client, server_in) = tokio::io::duplex(4096);
        let (server_out, mut client_out) = tokio::io::duplex(4096);
        let (mut rmcp_read, mut rmcp_write) = guarded(server_in, server_out);
        let mut client = client;
        client.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n").await.unwrap();
        client.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":3}\n").await.unwrap();
        let mut got = Vec::new();
        BufReader::new(&mut rmcp_read).read_until(b'\n', &mut got).await.unwrap();
        assert_eq!(&got, b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n", "only the good line reaches rmcp");
        rmcp_write.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n").await.unwrap();
        drop(client);
        drop(rmcp_write);
        let mut out = String::new();
        client_out.read_to_string(&mut out).await.unwrap();
        let ids: Vec<Value> = out.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["id"].clone()).collect();
        assert_eq!(ids.len(), 2, "{out}");
        assert!(ids.contains(&json!(1)) && ids.contains(&json!(2)), "{out}");
    }
}
