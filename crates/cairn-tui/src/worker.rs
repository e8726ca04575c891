//! Operations run off the UI thread, so a slow query never blocks a key. Three threads over
//! one [`Client`]: one for searches, which keeps only the newest query waiting (typing
//! replaces what was not started yet), one for the long ones (a semantic scan: seconds of
//! model time per pair, which the rest must not queue behind), and one for everything else,
//! in order.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use cairn_client::Client;

use crate::app::{Lane, Request, Response};

/// The worker threads and where their answers arrive.
pub struct Workers {
    general: Option<Sender<Request>>,
    long: Option<Sender<Request>>,
    search: Arc<LatestSlot>,
    pub answers: Receiver<Response>,
    threads: Vec<JoinHandle<()>>,
}

/// The newest search waiting to run; a newer one replaces it.
#[derive(Default)]
struct LatestSlot {
    waiting: Mutex<(Option<Request>, bool)>,
    wake: Condvar,
}

impl Workers {
    pub fn start(client: &Client) -> std::io::Result<Workers> {
        let (answer_tx, answers) = channel();
        let (general_tx, general_rx) = channel::<Request>();
        let (long_tx, long_rx) = channel::<Request>();
        let search = Arc::new(LatestSlot::default());
        let mut threads = vec![
            in_order("cairn-tui-ops", client, general_rx, answer_tx.clone())?,
            in_order("cairn-tui-long", client, long_rx, answer_tx.clone())?,
        ];
        {
            let client = client.clone();
            let slot = Arc::clone(&search);
            threads.push(std::thread::Builder::new().name("cairn-tui-search".into()).spawn(move || {
                while let Some(request) = slot.next() {
                    if answer_tx.send(run(&client, request)).is_err() {
                        return;
                    }
                }
            })?);
        }
        Ok(Workers { general: Some(general_tx), long: Some(long_tx), search, answers, threads })
    }

    /// Queue a request: a search replaces the search not yet started.
    pub fn send(&self, request: Request) {
        let queue = match request.lane {
            Lane::NewestOnly => return self.search.put(request),
            Lane::InOrder => &self.general,
            Lane::Long => &self.long,
        };
        if let Some(queue) = queue {
            let _ = queue.send(request);
        }
    }
}

impl Drop for Workers {
    /// Stop taking work; a query still running finishes on its own (the threads are not
    /// joined, so quitting never waits for it).
    fn drop(&mut self) {
        self.general.take();
        self.long.take();
        self.search.close();
        self.threads.clear();
    }
}

impl LatestSlot {
    fn put(&self, request: Request) {
        lock(&self.waiting).0 = Some(request);
        self.wake.notify_one();
    }

    fn close(&self) {
        lock(&self.waiting).1 = true;
        self.wake.notify_one();
    }

    /// The next search to run; `None` once closed.
    fn next(&self) -> Option<Request> {
        let mut waiting = lock(&self.waiting);
        loop {
            if waiting.1 {
                return None;
            }
            if let Some(request) = waiting.0.take() {
                return Some(request);
            }
            waiting = self.wake.wait(waiting).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// A thread running the requests of `queue` one after the other, until it closes.
fn in_order(
    name: &str,
    client: &Client,
    queue: Receiver<Request>,
    answers: Sender<Response>,
) -> std::io::Result<JoinHandle<()>> {
    let client = client.clone();
    std::thread::Builder::new().name(name.into()).spawn(move || {
        for request in queue {
            if answers.send(run(&client, request)).is_err() {
                return;
            }
        }
    })
}

fn run(client: &Client, request: Request) -> Response {
    let result = client.run(request.op);
    Response { id: request.id, result }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
