//! The test harness: the API over a real embedded cluster in a temporary directory, reached
//! through real HTTP on a loopback ephemeral port. `Node::stop` reads the journal back, so that a
//! test can check what was (and was not) journaled.
#![allow(dead_code)] // each test file uses its own part of the harness

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rtgs_api::auth::sign;
use rtgs_api::config::ApiConfig;
use rtgs_api::read_model::{JournalEnd, ReadModel};
use rtgs_api::server::{Api, EngineLink, FinalThrough};
use rtgs_collection::adapter::NodeAdapter;
use rtgs_collection::ChainSim;
use rtgs_core::client::{ClientEvent, Notice};
use rtgs_core::entry::CenterId;
use rtgs_core::ledger::Ledger;
use rtgs_core::plugin_host::PluginHost;
use rtgs_embedded::cluster::{Cluster, ClusterConfig, PluginSetup};
use rtgs_embedded::journal::JournalReader;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

pub const SECRET_A: &str = "bank-a-secret-0123456789";
pub const SECRET_B: &str = "bank-b-secret-0123456789";
pub const SECRET_OPS: &str = "operator-secret-0123456789";

fn config() -> String {
    json!({
        "participants": [
            { "key_id": "bank-a", "secret": SECRET_A, "accounts": [1, 2, 9] },
            { "key_id": "bank-b", "secret": SECRET_B, "accounts": [3, 4] }
        ],
        "operators": [{ "key_id": "ops", "secret": SECRET_OPS }],
        "accounts": [
            { "id": 1, "currency": "EUR", "fund": "1000.00" },
            { "id": 2, "currency": "EUR" },
            { "id": 3, "currency": "EUR", "fund": "50.00" },
            { "id": 4, "currency": "JPY", "fund": "1000" }
        ]
    })
    .to_string()
}

pub struct Node {
    addr: SocketAddr,
    dir: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
    api: std::sync::Arc<Api>,
    cluster: Cluster,
    /// A lagging node's ([`Edge::lag`]): the final notices of other centers' entries, which its
    /// API does not hear (a test learns their seqs here).
    elsewhere: Arc<std::sync::Mutex<Vec<Notice>>>,
}

/// The error codes `openapi.json` declares: every error answer of every test must be one of them.
fn documented_codes() -> &'static Vec<String> {
    static CODES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    CODES.get_or_init(|| {
        let doc: Value = serde_json::from_str(rtgs_api::server::OPENAPI_JSON).expect("openapi.json is JSON");
        let codes = doc["components"]["schemas"]["Error"]["properties"]["code"]["enum"].as_array().cloned();
        codes.unwrap_or_default().iter().filter_map(|c| c.as_str().map(String::from)).collect()
    })
}

pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rtgs-api-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

pub async fn start(dir: &std::path::Path, setup: bool) -> Node {
    start_with(dir, setup, None).await
}

/// Where and with which edge bounds the harness serves.
#[derive(Clone)]
pub struct Edge {
    pub bind: &'static str,
    pub limits: rtgs_api::server::EdgeLimits,
    /// The API tracker's bound.
    pub tracked_entries_max: usize,
    /// A node that lags and does not know it ([`lagging`]): its view of finality stops at this
    /// gate's value (`u64::MAX`: it does not lag).
    pub lag: Option<Arc<AtomicU64>>,
}

impl Default for Edge {
    fn default() -> Self {
        let tracked_entries_max = rtgs_api::limits::TRACKED_TRANSFERS_MAX;
        Edge { bind: "127.0.0.1:0", limits: Default::default(), tracked_entries_max, lag: None }
    }
}

/// [`start`] (accounts set up) as a node that lags behind `gate` ([`Edge::lag`]).
pub async fn start_lagging(dir: &std::path::Path, gate: Arc<AtomicU64>) -> Node {
    start_on(dir, true, None, Edge { lag: Some(gate), ..Edge::default() }).await
}

/// The notices `lagging` keeps from its API.
type Elsewhere = Arc<std::sync::Mutex<Vec<Notice>>>;

/// What the API of a production node whose center lags sees — it missed the journal's pushes,
/// its database was slow — and does not know: its final-through view stops at `gate`, its own
/// center's (DC1's) notices come once the gate has passed them, other centers' it never hears,
/// and the journal's end it is told (as the sequencer's database tells it) is the cluster's true
/// finality.
fn lagging(
    events: crossbeam_channel::Receiver<ClientEvent>,
    real: FinalThrough,
    gate: Arc<AtomicU64>,
    elsewhere: Elsewhere,
) -> (crossbeam_channel::Receiver<ClientEvent>, FinalThrough, JournalEnd) {
    let (tx, rx) = crossbeam_channel::bounded(1024);
    let notices_gate = Arc::clone(&gate);
    std::thread::spawn(move || {
        let mut held: Vec<Notice> = Vec::new();
        loop {
            match events.recv_timeout(std::time::Duration::from_millis(5)) {
                Ok(ClientEvent::Final(notices)) => {
                    let (own, other): (Vec<Notice>, Vec<Notice>) =
                        notices.into_iter().partition(|n| n.center == CenterId(1));
                    elsewhere.lock().unwrap_or_else(|e| e.into_inner()).extend(other);
                    held.extend(own);
                }
                Ok(other) => {
                    if tx.send(other).is_err() {
                        return;
                    }
                }
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
            }
            let through = notices_gate.load(Ordering::Acquire);
            let (due, later): (Vec<Notice>, Vec<Notice>) = held.drain(..).partition(|n| n.seq <= through);
            held = later;
            if !due.is_empty() && tx.send(ClientEvent::Final(due)).is_err() {
                return;
            }
        }
    });
    let seen: FinalThrough = {
        let real = Arc::clone(&real);
        Arc::new(move || real().min(gate.load(Ordering::Acquire)))
    };
    let end: JournalEnd = Arc::new(move || {
        let seq = real();
        Box::pin(async move { Ok(seq) })
    });
    (rx, seen, end)
}

/// [`start`] (accounts set up) served on `edge`.
pub async fn start_edge(dir: &std::path::Path, edge: Edge) -> Node {
    start_on(dir, true, None, edge).await
}

/// [`start`] with the collection plugin in every center, its effects executed against `chain`
/// (the chain simulator, running `time_scale` times faster than the wall clock).
pub async fn start_collection(dir: &std::path::Path, chain: ChainSim, time_scale: u64) -> Node {
    let adapter = NodeAdapter::new(chain, CHAIN_START_US, time_scale);
    let setup = PluginSetup {
        make: Box::new(|| vec![Box::new(rtgs_collection::CollectionPlugin::new())]),
        adapter: Box::new(adapter),
    };
    start_with(dir, false, Some((setup, rtgs_plugins::PluginsConfig::collection(Default::default())))).await
}

/// [`start`] (accounts set up) with the matching plugin in every center and `adapter` as its
/// outside world; the customers' PII in [`PII_FILE`] of the data directory, as `rtgs serve` does.
pub async fn start_matching(
    dir: &std::path::Path,
    adapter: Box<dyn rtgs_core::plugin::EffectAdapter>,
) -> Node {
    start_matching_with(dir, true, adapter).await
}

/// [`start_matching`] on the data directory of a stopped one (nothing set up again).
pub async fn restart_matching(
    dir: &std::path::Path,
    adapter: Box<dyn rtgs_core::plugin::EffectAdapter>,
) -> Node {
    start_matching_with(dir, false, adapter).await
}

/// The customers' PII beside the journal (the name `rtgs serve` gives it).
pub const PII_FILE: &str = "matching-pii.log";

async fn start_matching_with(
    dir: &std::path::Path,
    setup: bool,
    adapter: Box<dyn rtgs_core::plugin::EffectAdapter>,
) -> Node {
    let plugins =
        PluginSetup { make: Box::new(|| vec![Box::new(rtgs_matching::MatchingPlugin::new())]), adapter };
    let set = rtgs_plugins::PluginsConfig::matching(Default::default());
    start_with(dir, setup, Some((plugins, set))).await
}

/// [`start`] (accounts set up) with the withdrawal plugin in every center, its effects executed
/// by the simulated world of `config` (custody, screener, policy engine, one chain per family).
pub async fn start_withdrawal(dir: &std::path::Path, config: rtgs_plugins::WithdrawalConfig) -> Node {
    start_withdrawal_on(dir, config, Edge::default()).await
}

/// [`start_withdrawal`] served on `edge`.
pub async fn start_withdrawal_on(
    dir: &std::path::Path,
    config: rtgs_plugins::WithdrawalConfig,
    edge: Edge,
) -> Node {
    let set = rtgs_plugins::PluginsConfig::withdrawal(config);
    let make = set.clone();
    let setup = PluginSetup { make: Box::new(move || make.hosted()), adapter: Box::new(set.adapters()) };
    start_on(dir, true, Some((setup, set)), edge).await
}

/// Where the simulated chain's clock starts.
pub const CHAIN_START_US: u64 = 1_000_000;

async fn start_with(
    dir: &std::path::Path,
    setup: bool,
    plugins: Option<(PluginSetup, rtgs_plugins::PluginsConfig)>,
) -> Node {
    start_on(dir, setup, plugins, Edge::default()).await
}

/// [`start`] with an API tracker of `tracked_entries_max` records.
pub async fn start_tracking(dir: &std::path::Path, setup: bool, tracked_entries_max: usize) -> Node {
    start_on(dir, setup, None, Edge { tracked_entries_max, ..Edge::default() }).await
}

async fn start_on(
    dir: &std::path::Path,
    setup: bool,
    plugins: Option<(PluginSetup, rtgs_plugins::PluginsConfig)>,
    edge: Edge,
) -> Node {
    let (credentials, accounts) = ApiConfig::from_json(&config()).and_then(|c| c.build()).expect("config");
    let config = ClusterConfig::new(dir);
    // The read model hosts the same plugins as the centers (a replica: CenterId(0)).
    let (cluster, host) = match plugins {
        Some((p, set)) => {
            let cluster = Cluster::start_with_plugins(&config, p).expect("cluster starts");
            (cluster, set.host(CenterId(0)))
        }
        None => (Cluster::start(&config).expect("cluster starts"), PluginHost::empty(CenterId(0))),
    };
    let link = cluster.client_link();
    let pii = match rtgs_plugins::matching(&host) {
        None => rtgs_api::pii::PiiStore::in_memory(),
        Some(_) => rtgs_api::pii::PiiStore::open(&dir.join(PII_FILE)).expect("the PII store opens"),
    };
    // As `rtgs serve` does: a status query for a bmi the tracker does not know asks the engine.
    let queries = link.bmi_queries;
    let sequenced = rtgs_api::read_model::sequenced_bmis_asked(move |bmi| queries.ask(bmi));
    let mut read_model = ReadModel::new(Ledger::new(), host).with_sequenced_bmis(sequenced);
    let elsewhere = Elsewhere::default();
    let (events, final_through) = match edge.lag.clone() {
        None => (link.events, link.final_through),
        Some(gate) => {
            let (events, final_through, end) =
                lagging(link.events, link.final_through, gate, Arc::clone(&elsewhere));
            read_model = read_model.with_journal_end(end);
            (events, final_through)
        }
    };
    let api = Api::start_linked_with(
        EngineLink {
            submit: std::sync::Arc::new(link.submit),
            events,
            read_model,
            feed: Box::new(link.feed),
            final_through,
        },
        credentials,
        CenterId(1),
        pii,
        edge.tracked_entries_max,
    );
    if setup {
        api.setup_accounts(&accounts).await.expect("accounts set up");
    }
    let listener = tokio::net::TcpListener::bind(edge.bind).await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let api = std::sync::Arc::new(api);
    let serving = std::sync::Arc::clone(&api);
    let server = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        serving.serve_with(listener, edge.limits, shutdown).await.expect("server runs");
    });
    Node { addr, dir: dir.to_path_buf(), stop: Some(stop), server: Some(server), api, cluster, elsewhere }
}

impl Node {
    /// Journals plugin commands straight through DC1 (what an outside world would send).
    pub fn submit_plugin(&self, commands: Vec<(rtgs_core::entry::Bmi, rtgs_core::entry::PluginCommand)>) {
        let commands = commands.into_iter().map(|(bmi, c)| (bmi, rtgs_core::entry::Payload::Plugin(c)));
        self.submit_through(CenterId(1), commands.collect());
    }

    /// Journals `commands` straight through center `origin` (another center's API, as this
    /// node's does not see it).
    pub fn submit_through(
        &self,
        origin: CenterId,
        commands: Vec<(rtgs_core::entry::Bmi, rtgs_core::entry::Payload)>,
    ) {
        use rtgs_core::entry::Command;
        let batch = commands.into_iter().map(|(bmi, payload)| Command { origin, bmi, payload }).collect();
        self.cluster.submitter().submit(batch).expect("submitted");
    }

    /// The cluster's highest final seq (every center's view, whatever the API's is).
    pub fn seq_final(&self) -> u64 {
        (self.cluster.final_through())()
    }

    /// A lagging node: the seq of `bmi`, submitted through another center, once final there
    /// (at most 10 s).
    pub async fn final_elsewhere(&self, bmi: rtgs_core::entry::Bmi) -> u64 {
        for _ in 0..1000 {
            let heard = self
                .elsewhere
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .find(|n| n.bmi == bmi)
                .map(|n| n.seq);
            if let Some(seq) = heard {
                return seq;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("{bmi:?} was not final within 10 s");
    }

    /// The cluster's clock (µs), as entries are stamped.
    pub fn now_us(&self) -> u64 {
        self.cluster.clock().now_us()
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Tells the server to stop (as SIGTERM does in `rtgs serve`); the engine keeps running.
    pub fn begin_shutdown(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }

    /// Waits at most `bound` for the server to stop: false if it is still running.
    pub async fn server_stopped_within(&mut self, bound: std::time::Duration) -> bool {
        let Some(server) = self.server.as_mut() else { return true };
        match tokio::time::timeout(bound, server).await {
            Ok(done) => {
                done.expect("the server task does not panic");
                self.server = None;
                true
            }
            Err(_) => false,
        }
    }

    /// [`Node::stop`], then removes the data directory.
    pub async fn finish(self) -> Vec<String> {
        let dir = self.dir.clone();
        let bmis = self.stop().await;
        let _ = std::fs::remove_dir_all(dir);
        bmis
    }

    /// Stops everything (the data directory stays, for a restart); returns the `bmi` of every journaled entry (ticks excluded), in order.
    pub async fn stop(mut self) -> Vec<String> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(server) = self.server.take() {
            server.await.expect("server stops");
        }
        let api = std::sync::Arc::into_inner(self.api).expect("the server task has ended");
        let cluster = self.cluster;
        let report = tokio::task::spawn_blocking(move || {
            let stopped = api.shutdown();
            let report = cluster.shutdown();
            stopped.join();
            report
        })
        .await
        .expect("shutdown");
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        let mut reader = JournalReader::open(&self.dir.join("journal"), 1).expect("journal");
        let (mut entries, mut bmis) = (Vec::new(), Vec::new());
        while reader.next_batch(&mut entries).expect("journal reads") {
            bmis.extend(entries.drain(..).filter(|e| !e.bmi.is_none()).map(|e| e.bmi.to_string()));
        }
        bmis
    }

    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> (u16, Value) {
        let (status, text) = self.send_raw(method, path, headers, body).await;
        let answer = serde_json::from_str(&text).unwrap_or(Value::Null);
        if let Some(code) = answer["code"].as_str() {
            assert!(documented_codes().contains(&code.to_string()), "{code} is not in openapi.json");
        }
        (status, answer)
    }

    /// The status and the body as text.
    pub async fn send_raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> (u16, String) {
        let stream = tokio::net::TcpStream::connect(self.addr).await.expect("connect");
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
        tokio::spawn(conn);
        let mut request = hyper::Request::builder().method(method).uri(path).header("host", "127.0.0.1");
        for (k, v) in headers {
            request = request.header(k.as_str(), v.as_str());
        }
        let request = request.body(Full::new(Bytes::copy_from_slice(body))).expect("request");
        let response = sender.send_request(request).await.expect("response");
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await.expect("body").to_bytes();
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    /// A request signed by `key` with `secret`, `skew_s` seconds off the current time.
    pub async fn signed_at(
        &self,
        key: &str,
        secret: &str,
        method: &str,
        path: &str,
        body: &[u8],
        skew_s: i64,
    ) -> (u16, Value) {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs() as i64;
        // A new nonce per request, like a real client: each attempt is signed anew.
        static NONCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let nonce = NONCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let ts = format!("{}.n{nonce}", now + skew_s);
        let signature = sign(secret.as_bytes(), method, path, &ts, body);
        let headers = [
            ("x-rtgs-key".to_string(), key.to_string()),
            ("x-rtgs-timestamp".to_string(), ts),
            ("x-rtgs-signature".to_string(), signature),
        ];
        self.send(method, path, &headers, body).await
    }

    pub async fn as_a(&self, method: &str, path: &str, body: &[u8]) -> (u16, Value) {
        self.signed_at("bank-a", SECRET_A, method, path, body, 0).await
    }

    /// A request signed by `key` (bank-a, bank-b or ops) whose answer is returned as text.
    pub async fn send_signed_raw(&self, key: &str, method: &str, path: &str, body: &[u8]) -> (u16, String) {
        let secret = match key {
            "bank-a" => SECRET_A,
            "bank-b" => SECRET_B,
            _ => SECRET_OPS,
        };
        static NONCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NONCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs();
        let ts = format!("{now}.r{n}");
        let headers = [
            ("x-rtgs-key".to_string(), key.to_string()),
            ("x-rtgs-timestamp".to_string(), ts.clone()),
            ("x-rtgs-signature".to_string(), sign(secret.as_bytes(), method, path, &ts, body)),
        ];
        self.send_raw(method, path, &headers, body).await
    }

    /// Journals plugin commands as operator setup and waits until each is final.
    pub async fn setup_plugin(
        &self,
        commands: Vec<(rtgs_core::entry::Bmi, rtgs_core::entry::PluginCommand)>,
    ) {
        self.api.setup_plugin_commands(commands).await.expect("plugin setup");
    }

    pub async fn as_ops(&self, method: &str, path: &str, body: &[u8]) -> (u16, Value) {
        self.signed_at("ops", SECRET_OPS, method, path, body, 0).await
    }

    pub async fn as_b(&self, method: &str, path: &str, body: &[u8]) -> (u16, Value) {
        self.signed_at("bank-b", SECRET_B, method, path, body, 0).await
    }

    /// An account's state, which must already include `seq` (read-your-writes).
    pub async fn account_at(&self, id: u64, seq: u64) -> Value {
        let (status, body) = self.as_a("GET", &format!("/v1/accounts/{id}"), b"").await;
        assert_eq!(status, 200, "{body}");
        assert!(body["as_of_seq"].as_u64().is_some_and(|s| s >= seq), "not yet at seq {seq}: {body}");
        body
    }
}

pub fn transfer(bmi: &str, debtor: u64, creditor: u64, amount: &str) -> Vec<u8> {
    json!({ "bmi": bmi, "debtor": debtor, "creditor": creditor, "amount": amount, "currency": "EUR" })
        .to_string()
        .into_bytes()
}

pub const SETUP_BMIS: [&str; 7] = [
    "SETUP-OPEN-1",
    "SETUP-FUND-1",
    "SETUP-OPEN-2",
    "SETUP-OPEN-3",
    "SETUP-FUND-3",
    "SETUP-OPEN-4",
    "SETUP-FUND-4",
];

/// The journaled `bmi`s other than the setup's, as their participants wrote them (a
/// participant's scoped key shown as its text: `rtgs_api::scope`).
pub fn journaled(bmis: &[String]) -> Vec<&str> {
    bmis.iter().map(|b| rtgs_api::scope::shown_text(b)).filter(|b| !SETUP_BMIS.contains(b)).collect()
}
