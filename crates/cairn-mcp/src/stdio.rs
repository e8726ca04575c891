//! stdin/stdout for `cairn mcp`, with a guard in front of rmcp:
//!
//! - Every line is judged first (`jsonrpc::judge`): what rmcp would leave unanswered or answer
//!   wrongly (not JSON, not UTF-8, a bad envelope, params of the wrong shape) is answered here,
//!   and the next line is served as usual. A line longer than 16 MiB is never held whole: the
//!   reader drops what is over the limit as it reads and answers `-32700`.
//! - At the end of stdin every request already read is finished and its answer written before
//!   rmcp is told the input ended (rmcp drops the answers still in flight when it sees EOF).
//! - stdout is written by one task, whole lines only, so answers from rmcp and from here never
//!   interleave; [`Guarded::finished`] resolves once the last one is flushed.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::jsonrpc::{self, MAX_MESSAGE, Verdict};

/// How long the end of stdin waits for the requests still running: the client has left, so
/// this only bounds a request that never finishes.
const EOF_GRACE: Duration = Duration::from_secs(120);

/// rmcp's ends of the pipes, and the task writing stdout.
#[derive(Debug)]
pub struct Guarded {
    /// What rmcp reads: the lines that passed the guard.
    pub read: DuplexStream,
    /// What rmcp writes: its answers, copied to the output.
    pub write: DuplexStream,
    /// Ends once rmcp has closed its end and every answer is written and flushed.
    pub finished: JoinHandle<()>,
}

/// Start pumping `input` → rmcp and rmcp → `output`.
pub fn guarded<R, W>(input: R, output: W) -> Guarded
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (rmcp_read, feed) = tokio::io::duplex(1 << 16);
    let (rmcp_write, drain) = tokio::io::duplex(1 << 16);
    let (replies, pending) = mpsc::channel::<Vec<u8>>(64);
    let in_flight = Arc::new(InFlight::new());
    tokio::spawn(pump_input(BufReader::new(input), feed, replies, Arc::clone(&in_flight)));
    let finished = tokio::spawn(pump_output(drain, pending, output, in_flight));
    Guarded { read: rmcp_read, write: rmcp_write, finished }
}

async fn pump_input<R: AsyncBufRead + Unpin>(
    mut input: R,
    mut feed: DuplexStream,
    replies: mpsc::Sender<Vec<u8>>,
    in_flight: Arc<InFlight>,
) {
    let mut line = Vec::new();
    loop {
        let read = match read_line_capped(&mut input, &mut line, MAX_MESSAGE).await {
            Ok(Line::End) | Err(_) => break,
            Ok(read) => read,
        };
        let verdict = match read {
            Line::TooLong => Verdict::Answer(jsonrpc::parse_error(&format!(
                "the message is longer than {} MiB",
                MAX_MESSAGE / (1024 * 1024)
            ))),
            _ => jsonrpc::judge(strip_line_end(&line)),
        };
        match verdict {
            Verdict::Blank => {}
            Verdict::Answer(answer) => {
                if replies.send(as_line(&answer)).await.is_err() {
                    break;
                }
            }
            Verdict::Pass { request, cancels } => {
                if let Some(id) = request {
                    in_flight.begin(id);
                }
                if let Some(id) = cancels {
                    in_flight.end(&id);
                }
                if !line.ends_with(b"\n") {
                    line.push(b'\n'); // the last line of the input, unterminated: rmcp drops those
                }
                if feed.write_all(&line).await.is_err() {
                    break;
                }
            }
        }
    }
    // The end of stdin: rmcp sees it only once the requests it has are answered.
    let _ = tokio::time::timeout(EOF_GRACE, in_flight.settled()).await;
    let _ = feed.shutdown().await;
}

async fn pump_output<W: AsyncWrite + Unpin>(
    drain: DuplexStream,
    mut pending: mpsc::Receiver<Vec<u8>>,
    mut output: W,
    in_flight: Arc<InFlight>,
) {
    let mut drain = BufReader::new(drain);
    let mut line = Vec::new();
    let mut replies_open = true;
    loop {
        tokio::select! {
            read = drain.read_until(b'\n', &mut line) => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if write_line(&mut output, &line).await.is_err() {
                        return;
                    }
                    if let Some(id) = answered_id(&line) {
                        in_flight.end(&id);
                    }
                    line.clear();
                }
            },
            reply = pending.recv(), if replies_open => match reply {
                Some(reply) => {
                    if write_line(&mut output, &reply).await.is_err() {
                        return;
                    }
                }
                None => replies_open = false,
            },
        }
    }
    // rmcp is done; the guard's own answers already queued still go out.
    while let Ok(reply) = pending.try_recv() {
        if write_line(&mut output, &reply).await.is_err() {
            return;
        }
    }
}

async fn write_line<W: AsyncWrite + Unpin>(output: &mut W, line: &[u8]) -> io::Result<()> {
    output.write_all(line).await?;
    output.flush().await
}

fn as_line(answer: &serde_json::Value) -> Vec<u8> {
    let mut line = answer.to_string().into_bytes();
    line.push(b'\n');
    line
}

fn strip_line_end(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The id of an answer rmcp wrote (not of a request or notification it sends the client).
fn answered_id(line: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Envelope {
        id: Option<serde_json::Value>,
        method: Option<serde::de::IgnoredAny>,
    }
    let envelope: Envelope = serde_json::from_slice(line).ok()?;
    if envelope.method.is_some() {
        return None;
    }
    envelope.id.filter(|id| id.is_string() || id.is_number()).map(|id| id.to_string())
}

#[derive(Debug, PartialEq)]
enum Line {
    /// A whole line (the last one may lack its `\n`).
    Read,
    /// A line longer than the limit, read to its end and dropped.
    TooLong,
    /// The input ended.
    End,
}

/// Read one line into `line`, never holding more than `max` bytes of it: past that the rest of
/// the line is consumed and dropped as it arrives.
async fn read_line_capped<R: AsyncBufRead + Unpin>(input: &mut R, line: &mut Vec<u8>, max: usize) -> io::Result<Line> {
    line.clear();
    let mut too_long = false;
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::End,
                (false, false) => Line::Read,
            });
        }
        let newline = buf.iter().position(|&b| b == b'\n');
        let taken = newline.map_or(buf.len(), |at| at + 1);
        let content = newline.unwrap_or(buf.len());
        if !too_long && line.len() + content > max {
            too_long = true;
            line.clear();
        }
        if !too_long {
            line.extend_from_slice(&buf[..taken]);
        }
        input.consume(taken);
        if newline.is_some() {
            return Ok(if too_long { Line::TooLong } else { Line::Read });
        }
    }
}

/// The requests rmcp has been given and not yet answered, by id (an id may repeat).
struct InFlight {
    ids: Mutex<HashMap<String, usize>>,
    count: watch::Sender<usize>,
}

impl InFlight {
    fn new() -> Self {
        Self { ids: Mutex::new(HashMap::new()), count: watch::Sender::new(0) }
    }

    fn begin(&self, id: String) {
        *self.ids.lock().unwrap_or_else(PoisonError::into_inner).entry(id).or_default() += 1;
        self.count.send_modify(|n| *n += 1);
    }

    fn end(&self, id: &str) {
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(open) = ids.get_mut(id) else { return };
        *open -= 1;
        if *open == 0 {
            ids.remove(id);
        }
        drop(ids);
        self.count.send_modify(|n| *n = n.saturating_sub(1));
    }

    async fn settled(&self) {
        let _ = self.count.subscribe().wait_for(|n| *n == 0).await;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use tokio::io::AsyncReadExt;

    use super::*;

    #[tokio::test]
    async fn a_line_over_the_limit_is_dropped_as_it_is_read() {
        let input: &[u8] = b"0123456789abc\nshort\nlast";
        let mut reader = BufReader::with_capacity(4, input);
        let mut line = Vec::new();
        assert_eq!(read_line_capped(&mut reader, &mut line, 8).await.unwrap(), Line::TooLong);
        assert!(line.capacity() <= 16, "never held whole: {}", line.capacity());
        assert_eq!(read_line_capped(&mut reader, &mut line, 8).await.unwrap(), Line::Read);
        assert_eq!(line, b"short\n");
        assert_eq!(read_line_capped(&mut reader, &mut line, 8).await.unwrap(), Line::Read);
        assert_eq!(line, b"last");
        assert_eq!(read_line_capped(&mut reader, &mut line, 8).await.unwrap(), Line::End);
    }

    #[test]
    fn answers_are_told_from_requests_and_notifications() {
        assert_eq!(answered_id(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#), Some("1".into()));
        assert_eq!(answered_id(br#"{"jsonrpc":"2.0","id":"x","error":{}}"#), Some("\"x\"".into()));
        assert_eq!(answered_id(br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#), None);
        assert_eq!(answered_id(br#"{"jsonrpc":"2.0","method":"notifications/x"}"#), None);
    }

    #[tokio::test]
    async fn lines_pass_through_refusals_come_back_whole_and_the_end_waits_for_answers() {
        let (mut client, server_in) = tokio::io::duplex(4096);
        let (server_out, mut client_out) = tokio::io::duplex(4096);
        let Guarded { read: mut rmcp_read, write: mut rmcp_write, finished } = guarded(server_in, server_out);
        client.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n").await.unwrap();
        client.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":3}\n").await.unwrap();
        client.write_all(b"not json\n").await.unwrap();
        drop(client); // the end of the input, with request 1 not answered yet
        let mut got = Vec::new();
        BufReader::new(&mut rmcp_read).read_until(b'\n', &mut got).await.unwrap();
        assert_eq!(&got, b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n", "only the good line reaches rmcp");
        rmcp_write.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n").await.unwrap();
        // Once request 1 is answered, rmcp sees the end of the input.
        let mut rest = Vec::new();
        rmcp_read.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "{rest:?}");
        drop(rmcp_write);
        finished.await.unwrap();
        let mut out = String::new();
        client_out.read_to_string(&mut out).await.unwrap();
        let answers: Vec<Value> = out.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).collect();
        let codes: Vec<(Value, Value)> =
            answers.iter().map(|a| (a["id"].clone(), a["error"]["code"].clone())).collect();
        assert_eq!(answers.len(), 3, "{out}");
        assert!(codes.contains(&(json!(1), Value::Null)), "{out}");
        assert!(codes.contains(&(json!(2), json!(-32602))), "{out}");
        assert!(codes.contains(&(Value::Null, json!(-32700))), "{out}");
    }
}
