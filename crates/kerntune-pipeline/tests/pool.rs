//! The compile pool survives its workers: a crash or a hang fails one request, the worker
//! is replaced, and the next request is served. Fake workers (shell scripts) stand in for
//! the compiler so that this runs anywhere.

use std::time::Duration;

use kerntune_pipeline::pool::{CompileLimit, CompileOutcome, CompilePool};
use kerntune_pipeline::process::Hub;
use kerntune_pipeline::protocol::{CompileJob, CompileRequest};
use kerntune_pipeline::{FailureKind, WorkerCommand};

/// A worker that answers "failed: fine" to each request (an old reply, without a kind),
/// except that a request whose source says `crash` kills the worker, one that says `hang`
/// never answers, one that says `huge` is refused as an invalid configuration, and one that
/// says `quick` compiles (to a one-byte binary). One that says `crash-once` kills the worker
/// when the file `$MARKER` does not exist yet (creating it).
fn fake_worker() -> WorkerCommand {
    let script = r#"
        while read -r line; do
            id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
            case "$line" in
                *'"source":"crash"'*) echo 'about to crash' >&2; kill -SEGV $$ ;;
                *'"source":"crash-once"'*) [ -e "$MARKER" ] || { touch "$MARKER"; kill -KILL $$; } ;;
                *'"source":"hang"'*) sleep 600 ;;
                *'"source":"quick"'*)
                    printf '{"type":"compiled","id":%s,"cubin":"AA==","seconds":0.0}\n' "$id"
                    continue ;;
                *'"source":"huge"'*)
                    printf '{"type":"failed","id":%s,"kind":"invalid_config","message":"too much shared memory","seconds":0.0}\n' "$id"
                    continue ;;
            esac
            printf '{"type":"failed","id":%s,"message":"fine","seconds":0.0}\n' "$id"
        done"#;
    // Extra arguments the pool appends ("__worker compile") land in $0 and $1, unused.
    WorkerCommand::new("sh", vec!["-c".into(), script.into()])
}

fn request(id: u32, source: &str) -> CompileRequest {
    CompileRequest {
        id,
        job: CompileJob::Cuda {
            source: source.into(),
            name: "k".into(),
            options: vec![],
            arch: "sm_90".into(),
            ptxas: None,
        },
    }
}

/// Runs the pool until every request has an outcome.
fn drain(pool: &mut CompilePool, hub: &Hub) -> Vec<CompileOutcome> {
    let mut outcomes = Vec::new();
    while pool.pending() > 0 {
        outcomes.extend(pool.dispatch(hub));
        match hub.next(pool.deadline()) {
            Some(line) if pool.owns(line.origin) => outcomes.extend(pool.handle(line, hub)),
            Some(_) => {}
            None => outcomes.extend(pool.expire(hub)),
        }
    }
    outcomes
}

fn reason_of(outcomes: &[CompileOutcome], wanted: u32) -> String {
    outcomes
        .iter()
        .find_map(|o| match o {
            CompileOutcome::Failed { id, reason, .. } if *id == wanted => Some(reason.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no outcome for request {wanted}: {outcomes:?}"))
}

fn kind_of(outcomes: &[CompileOutcome], wanted: u32) -> FailureKind {
    outcomes
        .iter()
        .find_map(|o| match o {
            CompileOutcome::Failed { id, kind, .. } if *id == wanted => Some(*kind),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no outcome for request {wanted}: {outcomes:?}"))
}

#[test]
fn a_crashing_compiler_fails_one_request_and_is_replaced() {
    let hub = Hub::default();
    let mut pool = CompilePool::new(&fake_worker(), 1, CompileLimit::new(Duration::from_secs(30), false), &hub, 0)
        .expect("starts");
    pool.submit(request(1, "ok"));
    pool.submit(request(2, "crash"));
    pool.submit(request(3, "ok"));
    let outcomes = drain(&mut pool, &hub);
    assert_eq!(outcomes.len(), 3);
    assert_eq!(reason_of(&outcomes, 1), "fine");
    let crash = reason_of(&outcomes, 2);
    assert!(crash.contains("killed by signal 11") && crash.contains("about to crash"), "{crash}");
    assert_eq!(kind_of(&outcomes, 2), FailureKind::CompilerCrashed);
    assert_eq!(reason_of(&outcomes, 3), "fine", "the replacement worker serves the next request");
}

#[test]
fn a_hanging_compile_times_out_and_the_pool_goes_on() {
    let hub = Hub::default();
    let mut pool = CompilePool::new(&fake_worker(), 2, CompileLimit::new(Duration::from_millis(500), false), &hub, 0)
        .expect("starts");
    for (id, source) in [(1, "hang"), (2, "ok"), (3, "ok"), (4, "ok")] {
        pool.submit(request(id, source));
    }
    let clock = std::time::Instant::now();
    let outcomes = drain(&mut pool, &hub);
    assert!(reason_of(&outcomes, 1).contains("did not finish within"), "{outcomes:?}");
    assert_eq!(kind_of(&outcomes, 1), FailureKind::CompileTimeout);
    for id in 2..=4 {
        assert_eq!(reason_of(&outcomes, id), "fine");
    }
    assert!(clock.elapsed() < Duration::from_secs(10));
}

#[test]
fn the_kind_a_compiler_names_decides_the_outcome_and_a_reply_without_one_is_a_compile_failure() {
    let hub = Hub::default();
    let mut pool = CompilePool::new(&fake_worker(), 1, CompileLimit::new(Duration::from_secs(30), false), &hub, 0)
        .expect("starts");
    pool.submit(request(1, "huge"));
    pool.submit(request(2, "ok"));
    let outcomes = drain(&mut pool, &hub);
    assert_eq!(kind_of(&outcomes, 1), FailureKind::InvalidConfig);
    assert_eq!(reason_of(&outcomes, 1), "too much shared memory", "the message has no prefix to strip");
    assert_eq!(kind_of(&outcomes, 2), FailureKind::CompileFailed);
}

#[test]
fn the_limit_adapts_to_the_runs_compile_times() {
    let hub = Hub::default();
    // A 60 s timeout that adapts: after 16 quick compiles the limit is its floor, 10 s.
    let mut pool =
        CompilePool::new(&fake_worker(), 4, CompileLimit::new(Duration::from_secs(60), true), &hub, 0).expect("starts");
    for id in 1..=16 {
        pool.submit(request(id, "quick"));
    }
    let quick = drain(&mut pool, &hub);
    assert!(quick.iter().all(|o| matches!(o, CompileOutcome::Compiled { .. })), "{quick:?}");
    pool.submit(request(17, "hang"));
    let clock = std::time::Instant::now();
    let outcomes = drain(&mut pool, &hub);
    let waited = clock.elapsed();
    assert_eq!(kind_of(&outcomes, 17), FailureKind::CompileTimeout);
    let reason = reason_of(&outcomes, 17);
    assert!(reason.starts_with("the compile did not finish within 10 s, this run's limit"), "{reason}");
    assert!(waited >= Duration::from_secs(10) && waited < Duration::from_secs(50), "waited {waited:?}");
}

#[test]
fn a_request_whose_worker_died_is_compiled_again_by_the_next_free_worker() {
    let hub = Hub::default();
    let folder = tempfile::tempdir().expect("a folder");
    let marker = folder.path().join("died");
    let mut command = fake_worker();
    command.env = vec![("MARKER".into(), marker.display().to_string())];
    let mut pool =
        CompilePool::new(&command, 2, CompileLimit::new(Duration::from_secs(30), false), &hub, 0).expect("starts");
    pool.submit(request(1, "crash-once"));
    pool.submit(request(2, "ok"));
    let outcomes = drain(&mut pool, &hub);
    assert!(marker.exists(), "a worker died under request 1");
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    assert_eq!(reason_of(&outcomes, 1), "fine", "the second attempt compiled it");
    assert_eq!(reason_of(&outcomes, 2), "fine");
}

/// A worker that fails each request with its own process id as the message.
fn naming_worker() -> WorkerCommand {
    let script = r#"
        while read -r line; do
            id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
            printf '{"type":"failed","id":%s,"message":"%s","seconds":0.0}\n' "$id" "$$"
        done"#;
    WorkerCommand::new("sh", vec!["-c".into(), script.into()])
}

fn triton(id: u32, block: u32, warps: u32) -> CompileRequest {
    let constexprs = serde_json::json!({ "BLOCK": block });
    let options = serde_json::json!({ "num_warps": warps, "num_stages": 3 });
    CompileRequest {
        id,
        job: CompileJob::Triton {
            constexprs: constexprs.as_object().expect("an object").clone(),
            options: options.as_object().expect("an object").clone(),
            descriptors: serde_json::Map::new(),
            setup: None,
        },
    }
}

/// Triton configurations that differ only in `num_warps` or `num_stages` share their front
/// end, which a worker keeps: each goes to the worker that compiled its family before.
#[test]
fn a_configuration_goes_to_the_worker_that_compiled_its_family() {
    let hub = Hub::default();
    let mut pool = CompilePool::new(&naming_worker(), 2, CompileLimit::new(Duration::from_secs(30), false), &hub, 0)
        .expect("starts");
    let mut worker_of = std::collections::HashMap::new();
    // The first wave starts one family per worker; each later wave's requests, queued in
    // either order, go to the worker of their family.
    for wave in [[(1, 64, 2), (2, 128, 2)], [(3, 128, 4), (4, 64, 4)], [(5, 64, 8), (6, 128, 8)]] {
        for (id, block, warps) in wave {
            pool.submit(triton(id, block, warps));
        }
        let outcomes = drain(&mut pool, &hub);
        for (id, block, _) in wave {
            let worker = reason_of(&outcomes, id);
            assert_eq!(worker_of.entry(block).or_insert_with(|| worker.clone()), &worker, "request {id}");
        }
    }
    assert_ne!(worker_of[&64], worker_of[&128], "the two families started on the two workers");
}
