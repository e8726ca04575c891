//! A scripted HTTP server on loopback (port 0) for the remote providers: it records every
//! request it receives and answers each with what the test's function says, or never.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: serde_json::Value,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// What to answer.
pub enum Reply {
    Json(u16, String),
    /// Hold the connection open without answering, until the server is dropped.
    Never,
}

pub struct Fake {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Dropped with the server: every held connection is let go.
    _release: Sender<()>,
}

impl Fake {
    pub fn start(answer: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (release, held) = channel::<()>();
        let held = Arc::new(Mutex::new(held));
        let answer = Arc::new(answer);
        let recorded = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (answer, recorded, held) = (answer.clone(), recorded.clone(), held.clone());
                std::thread::spawn(move || serve(stream, &*answer, &recorded, &held));
            }
        });
        Fake { addr, seen, _release: release }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve(
    mut stream: std::net::TcpStream,
    answer: &(dyn Fn(&Seen) -> Reply + Send + Sync),
    recorded: &Mutex<Vec<Seen>>,
    held: &Mutex<Receiver<()>>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return;
    }
    let mut words = request_line.split_whitespace();
    let (method, path) = (words.next().unwrap_or_default().to_owned(), words.next().unwrap_or_default().to_owned());
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let length = headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let seen = Seen { method, path, headers, body: serde_json::from_slice(&body).unwrap_or_default() };
    recorded.lock().unwrap().push(seen.clone());
    match answer(&seen) {
        Reply::Json(status, text) => {
            let reply = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                text.len()
            );
            let _ = stream.write_all(reply.as_bytes());
        }
        // Blocks until the server is dropped (the sender goes away).
        Reply::Never => {
            let _ = held.lock().unwrap().recv();
        }
    }
}
