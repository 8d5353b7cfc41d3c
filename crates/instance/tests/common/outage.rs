//! A TCP relay in front of a test server whose outage a test switches on
//! and off: while it is down, new connections are refused (closed at
//! once) and open ones are cut, as when the server stops; back up, it
//! relays again. TLS passes through untouched.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct Relay {
    /// Where clients connect instead of the server.
    pub port: u16,
    down: Arc<watch::Sender<bool>>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    /// Relays 127.0.0.1:`port` to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let down = Arc::new(watch::channel(false).0);
        let state = down.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if *state.borrow() {
                    continue; // dropped: the client sees the connection closed
                }
                tokio::spawn(relay(client, upstream, state.subscribe()));
            }
        });
        Relay { port, down, task }
    }

    /// The server is unreachable until [`Relay::up`].
    pub fn down(&self) {
        self.down.send_replace(true);
    }

    pub fn up(&self) {
        self.down.send_replace(false);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(mut client: TcpStream, upstream: SocketAddr, mut down: watch::Receiver<bool>) {
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
        _ = down.wait_for(|down| *down) => {}
    }
}
