//! What a review costs the webhook server in memory, measured as the growth of the process's
//! peak resident set while it answers reviews of the largest size (7 MiB).
//!
//! Each scenario runs in a fresh process (this test binary, run again with
//! `RSBUILDER_MEMORY_SCENARIO` set), with glibc told to return every large block to the system
//! when it is freed, so that the resident set follows what is alive. The peak is reset through
//! `/proc/self/clear_refs` just before the review, once the body is in memory: the growth is what
//! the server spends beyond the body the network delivered.
//!
//! The bodies are the ones an attacker would send: a 7 MiB numeric array, in a field the Rust type
//! does not know (read as nothing) or in one it knows (a `Vec<i64>`, 8 bytes per number whatever
//! the server does).

use std::process::Command;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode, header};
use kube::CustomResource;
use rsbuilder_runtime::webhook::{
    Conversion, Defaulter, Denied, MAX_BODY_BYTES, Validator, Verdict, Webhooks,
};
use serde::{Deserialize, Serialize};

/// A kind whose spec may hold a large array.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Bulk",
    namespaced,
    schema = "disabled"
)]
struct BulkSpec {
    #[serde(default)]
    values: Vec<i64>,
    #[serde(default)]
    image: String,
}

mod v2 {
    use super::*;

    #[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default)]
    #[kube(
        group = "example.com",
        version = "v2",
        kind = "Bulk",
        namespaced,
        schema = "disabled"
    )]
    pub(crate) struct BulkSpec {
        #[serde(default)]
        pub(crate) values: Vec<i64>,
        #[serde(default)]
        pub(crate) image: String,
    }
}

struct SetImage;

impl Defaulter<Bulk> for SetImage {
    async fn default(&self, bulk: &mut Bulk) -> Result<(), Denied> {
        if bulk.spec.image.is_empty() {
            bulk.spec.image = "nginx".into();
        }
        Ok(())
    }
}

struct Admit;

impl Validator<Bulk> for Admit {
    async fn validate_create(&self, _: &Bulk) -> Verdict {
        Ok(Vec::new())
    }
    async fn validate_update(&self, _: &Bulk, _: &Bulk) -> Verdict {
        Ok(Vec::new())
    }
    async fn validate_delete(&self, _: &Bulk) -> Verdict {
        Ok(Vec::new())
    }
}

fn webhooks() -> Webhooks {
    let mut conversion = Conversion::hub::<Bulk>();
    conversion.spoke(
        |spoke: v2::Bulk| {
            Ok(Bulk {
                metadata: spoke.metadata,
                spec: BulkSpec {
                    values: spoke.spec.values,
                    image: spoke.spec.image,
                },
            })
        },
        |hub: Bulk| {
            Ok(v2::Bulk {
                metadata: hub.metadata,
                spec: v2::BulkSpec {
                    values: hub.spec.values,
                    image: hub.spec.image,
                },
            })
        },
    );
    let mut webhooks = Webhooks::new();
    webhooks
        .defaulting("/mutate", SetImage)
        .validating("/validate", Admit)
        .conversion(conversion);
    webhooks
}

/// Where the numbers go: a field the type does not know, or one it does.
#[derive(Clone, Copy, Debug)]
enum Field {
    Unknown,
    Known,
}

/// A JSON array of `1`s that makes the whole review just under [`MAX_BODY_BYTES`].
fn numbers(room: usize) -> String {
    let count = room / 2;
    let mut array = String::with_capacity(room + 2);
    array.push('[');
    for index in 0..count {
        if index > 0 {
            array.push(',');
        }
        array.push('1');
    }
    array.push(']');
    array
}

/// The object of kind Bulk, version `version`, with `numbers` in `field`.
fn object(version: &str, field: Field, numbers: &str) -> String {
    let name = match field {
        Field::Unknown => "data",
        Field::Known => "values",
    };
    format!(
        r#"{{"apiVersion":"example.com/{version}","kind":"Bulk","metadata":{{"name":"big","namespace":"default","creationTimestamp":null}},"spec":{{"{name}":{numbers}}}}}"#
    )
}

/// The review posted to `path` whose object has `numbers` in `field`.
fn review(path: &str, field: Field, numbers: &str) -> String {
    match path {
        "/convert" => format!(
            r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{{"uid":"u","desiredAPIVersion":"example.com/v1","objects":[{}]}}}}"#,
            object("v2", field, numbers)
        ),
        _ => format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","kind":{{"group":"example.com","version":"v1","kind":"Bulk"}},"resource":{{"group":"example.com","version":"v1","resource":"bulks"}},"operation":"CREATE","userInfo":{{}},"object":{}}}}}"#,
            object("v1", field, numbers)
        ),
    }
}

/// The body of a review posted to `path`, just under the largest size.
fn body(path: &str, field: Field) -> Bytes {
    let overhead = review(path, field, "[]").len();
    let body = review(path, field, &numbers(MAX_BODY_BYTES - overhead - 16));
    assert!(body.len() <= MAX_BODY_BYTES && body.len() > MAX_BODY_BYTES - 64);
    Bytes::from(body)
}

fn request(path: &str, body: Bytes) -> Request<Body> {
    Request::post(path)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CONTENT_LENGTH, body.len())
        .body(Body::from(body))
        .unwrap()
}

/// A request whose body arrives in 16 chunks 20 ms apart, as over a network: reviews sent at
/// once are in flight at once.
fn slow_request(path: &str, body: Bytes) -> Request<Body> {
    use futures::StreamExt as _;
    let length = body.len();
    let step = length.div_ceil(16);
    let chunks: Vec<Bytes> = (0..length)
        .step_by(step)
        .map(|start| body.slice(start..(start + step).min(length)))
        .collect();
    let stream = futures::stream::iter(chunks).then(|chunk| async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        Ok::<_, std::convert::Infallible>(chunk)
    });
    Request::post(path)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CONTENT_LENGTH, length)
        .body(Body::from_stream(stream))
        .unwrap()
}

/// The verdict of an AdmissionReview or a ConversionReview.
#[derive(Deserialize)]
struct Answer {
    response: Verdicts,
}

#[derive(Deserialize)]
struct Verdicts {
    allowed: Option<bool>,
    result: Option<Outcome>,
}

#[derive(Deserialize)]
struct Outcome {
    status: String,
}

/// A field of `/proc/self/status`, in bytes.
fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"));
    let kib: u64 = line
        .trim_start_matches(':')
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kib * 1024
}

/// Runs one scenario in this process and prints its growth: `growth <bytes> body <bytes>
/// served <count> refused <count>`.
fn run_scenario(scenario: &str) {
    let (path, field, concurrent) = match scenario.split(',').collect::<Vec<_>>()[..] {
        [path, field, concurrent] => (
            path.to_owned(),
            match field {
                "unknown" => Field::Unknown,
                _ => Field::Known,
            },
            concurrent.parse::<usize>().unwrap(),
        ),
        _ => panic!("invalid scenario {scenario}"),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let router = webhooks().router();
    let body = body(&path, field);
    // Warm up: whatever is set up once per process is not the review's cost.
    runtime.block_on(async {
        let small = Bytes::from(review(&path, field, "[1,2]"));
        let response = Webhooks::send(router.clone(), request(&path, small)).await;
        assert_eq!(response.status(), StatusCode::OK);
    });
    let baseline = status_bytes("VmRSS");
    std::fs::write("/proc/self/clear_refs", "5").expect("reset the peak resident set");
    let statuses = runtime.block_on(async {
        let calls = (0..concurrent).map(|_| {
            let router = router.clone();
            let request = if concurrent > 1 {
                slow_request(&path, body.clone())
            } else {
                request(&path, body.clone())
            };
            tokio::spawn(async move {
                let response = Webhooks::send(router, request).await;
                if response.status() == StatusCode::OK {
                    // Only the verdict is read: a JSON tree of the converted objects would cost
                    // more than the server spent.
                    let answer: Answer = serde_json::from_slice(response.body()).unwrap();
                    let ok = answer.response.allowed == Some(true)
                        || answer
                            .response
                            .result
                            .is_some_and(|r| r.status == "Success");
                    assert!(ok, "not admitted");
                }
                response.status()
            })
        });
        let mut statuses = Vec::new();
        for call in calls.collect::<Vec<_>>() {
            statuses.push(
                tokio::time::timeout(Duration::from_secs(120), call)
                    .await
                    .expect("answered within 120 s")
                    .unwrap(),
            );
        }
        statuses
    });
    let peak = status_bytes("VmHWM");
    let served = statuses.iter().filter(|s| **s == StatusCode::OK).count();
    let refused = statuses
        .iter()
        .filter(|s| **s == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert_eq!(served + refused, concurrent, "{statuses:?}");
    println!(
        "growth {} body {} served {served} refused {refused}",
        peak.saturating_sub(baseline),
        body.len()
    );
}

/// Runs `scenario` in a fresh process; its growth in bytes, the body's size, and how many
/// reviews were served and refused.
fn measure(scenario: &str) -> (u64, u64, usize, usize) {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "review_memory_scenario",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RSBUILDER_MEMORY_SCENARIO", scenario)
        .env("MALLOC_MMAP_THRESHOLD_", "131072")
        .env("MALLOC_TRIM_THRESHOLD_", "131072")
        .env("MALLOC_ARENA_MAX", "2")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "scenario {scenario} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|line| line.find("growth ").map(|at| &line[at..]))
        .unwrap_or_else(|| panic!("scenario {scenario} printed no figures:\n{stdout}"));
    let words: Vec<&str> = line.split(' ').collect();
    (
        words[1].parse().unwrap(),
        words[3].parse().unwrap(),
        words[5].parse().unwrap(),
        words[7].parse().unwrap(),
    )
}

/// The scenario a child process of the tests below runs; it fails when run without one.
#[test]
#[ignore = "the child process of the memory tests, which run it with RSBUILDER_MEMORY_SCENARIO"]
fn review_memory_scenario() {
    let scenario = std::env::var("RSBUILDER_MEMORY_SCENARIO")
        .expect("RSBUILDER_MEMORY_SCENARIO names the scenario to run");
    run_scenario(&scenario);
}

/// Goals: a validating or converting review costs at most 3× its body beyond the body, plus what
/// the typed object itself takes (8 bytes per number of a `Vec<i64>`); a defaulting review at
/// most 12× its body (what a generic JSON tree costs controller-runtime); no review builds a
/// generic JSON tree of its object, which costs 16 bytes per byte of a numeric array.
#[test]
fn a_review_costs_a_few_times_its_body() {
    if !std::path::Path::new("/proc/self/clear_refs").exists() {
        panic!("this test measures memory through /proc/self/clear_refs, which Linux has");
    }
    let mut report = Vec::new();
    for (path, field, goal) in [
        ("/validate", "unknown", 3.0),
        ("/convert", "unknown", 3.0),
        ("/mutate", "unknown", 3.0),
        // The typed Vec<i64> alone is 4 bytes per byte of `1,`.
        ("/validate", "known", 3.0 + 4.0),
        ("/convert", "known", 3.0 + 4.0),
        ("/mutate", "known", 12.0),
    ] {
        let (growth, body, served, _) = measure(&format!("{path},{field},1"));
        assert_eq!(served, 1);
        let ratio = growth as f64 / body as f64;
        report.push(format!(
            "{path} {field} field: {ratio:.2}x its body ({growth} bytes)"
        ));
        assert!(
            ratio <= goal,
            "{path} with a numeric array in a {field} field costs {ratio:.2}x its body, over {goal}x:\n{}",
            report.join("\n")
        );
    }
    println!("{}", report.join("\n"));
}

/// 16 reviews of the largest size at once, with a numeric array in a field the type knows (the
/// costliest case above): past the bound on bytes in flight they get 429, and the server stays
/// below the scaffolded container limit of 128 MiB with room for the controllers.
#[test]
fn sixteen_reviews_of_the_largest_size_at_once_stay_bounded() {
    for path in ["/validate", "/mutate", "/convert"] {
        let (growth, _, served, refused) = measure(&format!("{path},known,16"));
        println!(
            "{path}: 16 reviews of 7 MiB at once: {served} served, {refused} refused, peak growth {} MiB",
            growth / (1024 * 1024)
        );
        assert!(served >= 1, "{path}: none served");
        assert!(
            refused >= 1,
            "{path}: none refused: the bound on bytes in flight is off"
        );
        assert!(
            growth < 80 * 1024 * 1024,
            "{path}: 16 reviews at once grew the process by {} MiB",
            growth / (1024 * 1024)
        );
    }
}
