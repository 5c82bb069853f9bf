//! `kerntune report`: the HTML page of a store, opened in a real browser (headless
//! Chromium, Debian's `chromium`), and its errors.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{kerntune, repo};
use kerntune_space::{Param, Value};
use kerntune_store::{Costs, Evaluation, Objective, Status, Store, TuningInfo};
use serde_json::{Map, Value as Json};

/// Chromium on the PATH. CI installs it and sets `KERNTUNE_REQUIRE_CHROMIUM`; elsewhere its
/// absence skips the browser half of a test with a note.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = ["chromium", "chromium-browser"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|candidate| candidate.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("KERNTUNE_REQUIRE_CHROMIUM").is_none(),
            "KERNTUNE_REQUIRE_CHROMIUM is set but chromium is not on the PATH"
        );
        eprintln!(
            "skipped: chromium is not installed (apt-get install chromium): the report is not opened in a browser"
        );
    }
    found
}

/// What Chromium made of the page: the DOM after loading it, and its log on standard
/// error (where a script error would be reported as "Uncaught ..."). A screenshot of the
/// page goes to `screenshot`.
fn open_in_browser(browser: &Path, page: &Path, screenshot: &Path) -> (String, String) {
    let url = format!("file://{}", page.canonicalize().expect("page exists").display());
    let run = |extra: &[String]| {
        // Each run has a profile of its own, so that runs in parallel do not share one.
        let profile = tempfile::tempdir().expect("temp dir");
        let mut args: Vec<String> = ["--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr", "--v=0"]
            .map(String::from)
            .into();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        args.extend_from_slice(extra);
        args.push(url.clone());
        let output = Command::new(browser).args(&args).output().expect("chromium runs");
        assert!(output.status.success(), "chromium failed: {}", String::from_utf8_lossy(&output.stderr));
        output
    };
    let dom = run(&["--dump-dom".to_string()]);
    let shot = run(&[format!("--screenshot={}", screenshot.display()), "--window-size=1280,6000".to_string()]);
    let log = format!("{}{}", String::from_utf8_lossy(&dom.stderr), String::from_utf8_lossy(&shot.stderr));
    (String::from_utf8_lossy(&dom.stdout).into_owned(), log)
}

/// A store with two simulated tunings (the shipped convolution landscape and pnpoly) and
/// two failures added to the first.
fn simulated_store(dir: &Path) -> PathBuf {
    let db = dir.join("results.db");
    let db_text = db.to_str().expect("utf-8 path");
    let pnpoly = repo("data/landscapes/pnpoly_RTX_3090.json.gz");
    for landscape in [None, Some(pnpoly.as_str())] {
        let mut args = vec!["simulate", "--strategy", "random_sample", "--max-fevals", "60", "--db", db_text];
        args.extend(landscape);
        let output = kerntune(&args);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    }
    let store = Store::open(&db).expect("store");
    let tuning = store.tunings().expect("tunings").into_iter().find(|t| t.info.kernel_name.contains("conv"));
    let tuning = tuning.expect("the convolution tuning");
    for (value, status, reason) in [
        (-1, Status::CompileFailed, "NVRTC: error: too many resources"),
        (-2, Status::Timeout, "the kernel ran past its 1 s limit"),
    ] {
        let config = Map::from_iter([("made_up".to_string(), Json::from(value))]);
        store.record(tuning.id, &config, &Evaluation::failed(status, reason, Costs::default())).expect("record");
    }
    db
}

/// Charts per tuning: best so far against evaluations and against time, and one per
/// parameter that takes more than one value.
fn charts_of(store: &Store) -> usize {
    store
        .tunings()
        .expect("tunings")
        .iter()
        .map(|t| 2 + t.info.params.iter().filter(|p| p.values().len() > 1).count())
        .sum()
}

/// Rows of the table that follows `heading`.
fn rows_after(html: &str, heading: &str) -> usize {
    let start = html.find(heading).unwrap_or_else(|| panic!("no {heading}"));
    let table = &html[start..start + html[start..].find("</table>").expect("a table")];
    table.matches("<tr>").count() - 1
}

#[test]
fn the_report_of_a_simulated_store_renders_every_chart_in_a_browser() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = simulated_store(dir.path());
    let page = dir.path().join("report.html");
    let output = kerntune(&["report", db.to_str().expect("utf-8"), "-o", page.to_str().expect("utf-8")]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("Wrote the report to {}", page.display())), "{stderr}");
    let html = std::fs::read_to_string(&page).expect("report written");
    // The page is meant to open from disk with nothing else: no script, nothing fetched
    // (the only address in it is the SVG namespace, which is a name, not a fetch).
    for fetch in ["<script", "<link", "<img", " src=", "url(", "@import", "href=\"http"] {
        assert!(!html.contains(fetch), "the page has {fetch}");
    }
    let store = Store::open(&db).expect("store");
    let expected_charts = charts_of(&store) + 1; // and the overview comparing both tunings
    assert_eq!(html.matches("<svg").count(), expected_charts);

    let Some(browser) = chromium() else { return };
    let screenshot = dir.path().join("report.png");
    let (dom, log) = open_in_browser(&browser, &page, &screenshot);
    assert!(!log.contains("Uncaught"), "script errors: {log}");
    assert_eq!(dom.matches("<svg").count(), expected_charts, "charts in the rendered page");
    assert_eq!(rows_after(&dom, "<h2>Tunings</h2>"), 2);
    assert_eq!(rows_after(&dom, "Best configurations"), 10);
    assert!(dom.contains("compile_failed") && dom.contains("1× NVRTC: error: too many resources"));
    assert!(dom.contains("timeout") && dom.contains("1× the kernel ran past its 1 s limit"));
    let png = std::fs::read(&screenshot).expect("screenshot written");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 50_000, "a screenshot of {} bytes", png.len());
    keep(&page, &screenshot, "simulated");
}

/// With `KERNTUNE_KEEP_REPORT=DIR`, keeps a test's page and screenshot there, to look at.
fn keep(page: &Path, screenshot: &Path, name: &str) {
    if let Some(dir) = std::env::var_os("KERNTUNE_KEEP_REPORT") {
        let dir = Path::new(&dir);
        std::fs::create_dir_all(dir).expect("a folder to keep the report in");
        std::fs::copy(page, dir.join(format!("{name}.html"))).expect("kept");
        std::fs::copy(screenshot, dir.join(format!("{name}.png"))).expect("kept");
    }
}

#[test]
fn a_store_with_time_and_energy_gets_a_pareto_front() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("energy.db");
    let store = Store::open(&db).expect("store");
    let values: Vec<Value> = [16, 32, 64, 128].map(Value::Int).into();
    let info = TuningInfo {
        kernel: "fingerprint".into(),
        kernel_name: "saxpy".into(),
        device: "NVIDIA H100".into(),
        problem: "[1048576]".into(),
        params: vec![Param::new("block", values).expect("param")],
        objective: Objective::time(),
    };
    let tuning = store.tuning(&info).expect("tuning");
    // Faster blocks spend more energy: three are on the front, 128 is beaten by 64.
    for (block, time, energy) in [(16, 4.0, 1.0), (32, 3.0, 2.0), (64, 2.0, 3.0), (128, 2.5, 3.5)] {
        let config = Map::from_iter([("block".to_string(), Json::from(block))]);
        let mut evaluation = Evaluation::ok(time, vec![time], Costs { benchmark_s: 0.1, ..Costs::default() });
        evaluation.metrics.insert("energy_J".into(), Json::from(energy));
        store.record(tuning, &config, &evaluation).expect("record");
    }
    let page = dir.path().join("energy.html");
    let id = tuning.get().to_string();
    let output =
        kerntune(&["report", db.to_str().expect("utf-8"), "--tuning", &id, "-o", page.to_str().expect("utf-8")]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let html = std::fs::read_to_string(&page).expect("report written");
    assert_eq!(html.matches("<svg").count(), 4, "progress (2), the parameter and the Pareto front");
    assert!(html.contains("3 of 4 configurations are on the Pareto front"));

    let Some(browser) = chromium() else { return };
    let screenshot = dir.path().join("energy.png");
    let (dom, log) = open_in_browser(&browser, &page, &screenshot);
    keep(&page, &screenshot, "energy");
    assert!(!log.contains("Uncaught"), "script errors: {log}");
    assert_eq!(dom.matches("<svg").count(), 4);
    assert!(dom.contains("Pareto front of time and energy"));
}

#[test]
fn a_report_of_nothing_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("empty.db");
    drop(Store::open(&db).expect("store"));
    let db = db.to_str().expect("utf-8");
    let page = dir.path().join("r.html");
    let page = page.to_str().expect("utf-8");
    let empty = kerntune(&["report", db, "-o", page]);
    assert_eq!(empty.status.code(), Some(2));
    let message = String::from_utf8_lossy(&empty.stderr);
    assert_eq!(message.trim().lines().count(), 1, "{message}");
    assert!(message.contains("no tunings stored"), "{message}");

    let full = simulated_store(dir.path());
    let unknown = kerntune(&["report", full.to_str().expect("utf-8"), "--tuning", "99", "-o", page]);
    assert_eq!(unknown.status.code(), Some(2));
    let message = String::from_utf8_lossy(&unknown.stderr);
    assert_eq!(message.trim().lines().count(), 1, "{message}");
    assert!(message.contains("no tuning 99 (the tunings stored are 1, 2;"), "{message}");
    assert!(!Path::new(page).exists(), "nothing written");
}
