//! The search's best few configurations timed again, interleaved, before one is called the
//! winner. A search ranks configurations by single medians measured minutes apart, with the
//! GPU's clocks and temperature drifting between them; a lead of a few percent there is
//! within noise. Here the leader is timed against each close contender in alternating
//! rounds, in blocks that reload both kernels, and against a copy of itself (the A/A
//! control, which shows how far apart two identical kernels measure). A contender
//! replaces the leader only when its whole interval lies below the control's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kerntune_device::DeviceInfo;
use kerntune_engine::stats::{block_medians, median, median_interval};
use kerntune_engine::BackendError;
use kerntune_space::Value;
use serde::{Deserialize, Serialize};

use crate::backend::{compile_now, compile_several, PipelineOptions};
use crate::crew::Crew;
use crate::language::Language;
use crate::pool::{Binary, CompileLimit, CompilePool};
use crate::process::Hub;
use crate::protocol::KernelImage;
use crate::sampling::ClockSpan;
use crate::schedule::{BenchSession, Interleaved};

/// How finalists are chosen and timed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RetimeOptions {
    /// Most configurations timed again, the search's best included; below 2 nothing is.
    pub finalists: usize,
    /// Contenders are those whose search median is within this fraction of the best's.
    pub within: f64,
    /// Interleaved rounds per pair.
    pub rounds: u32,
    /// Blocks the rounds are split into (both kernels reloaded for each); the interval is
    /// taken over the blocks' medians, so at least 5.
    pub blocks: u32,
    pub seed: u64,
}

impl Default for RetimeOptions {
    fn default() -> Self {
        RetimeOptions { finalists: 4, within: 0.05, rounds: 60, blocks: 6, seed: 0 }
    }
}

/// A time ratio (contender / leader) with its 95% interval over the blocks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
}

/// What re-timing concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every contender's interval lies above the control's: the leader's lead holds.
    LeadHolds,
    /// A contender's interval lies wholly below the control's: it is faster, and wins.
    Overtaken,
    /// Some contender cannot be told apart from the leader: the leader (the simpler, the
    /// search's choice) is kept, and results say it is a tie within noise.
    Tie,
}

/// The re-timing of the leader (index 0 of the finalists) against each contender.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RetimeReport {
    pub rounds: u32,
    pub blocks: u32,
    /// The leader against a copy of itself.
    pub control: Ratio,
    /// Each contender (finalists 1, 2, ...) against the leader.
    pub contenders: Vec<Ratio>,
    /// The leader's median time (ms) over all its interleaved rounds.
    pub leader_median_ms: f64,
    /// Index among the finalists of the winner (0: the search's best).
    pub winner: usize,
    pub verdict: Verdict,
    /// The clocks' range over all the rounds, where NVML reads them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clocks: Option<ClockSpan>,
    /// Wall time of the re-timing, its compiles and worker start included (0 in reports
    /// stored before it was recorded).
    #[serde(default)]
    pub seconds: f64,
    /// Whether it ran on the search's own workers rather than on freshly started ones.
    #[serde(default)]
    pub reused_search_workers: bool,
    /// GPUs the pairs were spread over (1 in reports stored before it was recorded).
    #[serde(default = "one")]
    pub gpus: usize,
}

fn one() -> usize {
    1
}

/// Times `finalists[0]` (the search's best) against each of the others and against itself.
/// With several `sessions` (one per GPU, of one model) the pairs' blocks are spread over
/// them evenly and timed at once ([`shares`]): each round's ratio is still a comparison on
/// one GPU. `stop` (Ctrl-C) ends it with [`BackendError::Interrupted`]
/// within a fraction of a second.
pub fn retime(
    sessions: &mut [BenchSession],
    finalists: &[KernelImage],
    options: &RetimeOptions,
    stop: &dyn Fn() -> bool,
) -> Result<RetimeReport, BackendError> {
    let leader = finalists.first().ok_or(BackendError::Misuse("no finalist to time again"))?;
    if sessions.is_empty() {
        return Err(BackendError::Misuse("no benchmark worker to time the finalists on"));
    }
    let blocks = options.blocks.max(5);
    let rounds = options.rounds.max(blocks);
    // Pair 0 is the control (the leader against a copy of itself), pair k the k-th contender.
    let work = shares(finalists.len(), sessions.len(), rounds, blocks);
    let timed = |session: &mut BenchSession, index: usize, stop: &dyn Fn() -> bool| {
        let share = work[index];
        let seed = options.seed.wrapping_add(share.pair as u64).wrapping_add((share.first_round as u64) << 32);
        let other = &finalists[share.pair];
        session.interleave((leader.clone(), other.clone()), share.rounds, share.blocks, seed, stop).map(|i| (index, i))
    };
    // Each session times its share of the work on a thread of its own. The threads cannot
    // share the caller's `stop`: they read a flag this thread sets from it while it waits.
    let stopped = AtomicBool::new(false);
    let outcomes: Vec<Result<Vec<(usize, Interleaved)>, BackendError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = sessions
            .iter_mut()
            .enumerate()
            .map(|(slot, session)| {
                let (stopped, timed, work) = (&stopped, &timed, &work);
                scope.spawn(move || {
                    let flag = || stopped.load(Ordering::Relaxed);
                    let mine = (0..work.len()).filter(|&index| work[index].gpu == slot);
                    mine.map(|index| timed(session, index, &flag)).collect()
                })
            })
            .collect();
        while !handles.iter().all(|h| h.is_finished()) {
            if stop() {
                stopped.store(true, Ordering::Relaxed);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err(BackendError::Misuse("a finalists' thread panicked"))))
            .collect()
    });
    let mut results: Vec<(usize, Interleaved)> = Vec::new();
    for outcome in outcomes {
        results.extend(outcome?);
    }
    // A pair's shares, in block order, make its rounds.
    results.sort_by_key(|(index, _)| *index);
    let mut clocks: Option<ClockSpan> = None;
    let mut per_pair: Vec<(Vec<f64>, Vec<f64>)> = Vec::new();
    for (index, Interleaved { a, b, clocks: span }) in results {
        if let Some(span) = span {
            clocks = Some(clocks.take().unwrap_or_default().merge(&span));
        }
        match per_pair.last_mut() {
            Some((whole_a, whole_b)) if work[index].first_round > 0 => {
                whole_a.extend(a);
                whole_b.extend(b);
            }
            _ => per_pair.push((a, b)),
        }
    }
    let mut leader_times = Vec::new();
    let mut ratios = Vec::new();
    for (a, b) in per_pair {
        leader_times.extend_from_slice(&a);
        ratios.push(paired_ratio(&a, &b, blocks as usize));
    }
    let control = ratios.remove(0);
    let (winner, verdict) = decide(&control, &ratios);
    Ok(RetimeReport {
        rounds,
        blocks,
        control,
        contenders: ratios,
        leader_median_ms: median(&leader_times),
        winner,
        verdict,
        clocks,
        seconds: 0.0,
        reused_search_workers: false,
        gpus: work.last().map_or(1, |share| share.gpu + 1),
    })
}

/// Compiles the finalists of any language (values in parameter order, the search's best
/// first) and re-times them, on the search's own workers where it hands them on (`warm`,
/// see [`crate::Pipeline::into_crew`]), else on a benchmark worker set up as the tuning did.
/// Returns the report and the workers it timed on, idle, as a crew for the next tuning.
pub fn retime_configs(
    language: &dyn Language,
    finalists: &[Vec<Value>],
    device: &DeviceInfo,
    pipeline: &PipelineOptions,
    options: &RetimeOptions,
    warm: Option<Crew>,
    stop: &dyn Fn() -> bool,
) -> Result<(RetimeReport, Option<Crew>), BackendError> {
    let clock = Instant::now();
    let failed = |what: &str, e: &dyn std::fmt::Display| {
        BackendError::CannotStart(format!("re-timing the finalists: {what}: {e}"))
    };
    let timeout = language.compile_timeout();
    // Each finalist waits in line for at most the compiles ahead of it, one timeout each.
    let deadline = || Instant::now() + (timeout + Duration::from_secs(5)) * (finalists.len() as u32 + 1);
    let jobs = finalists
        .iter()
        .map(|values| language.compile_job(values, device))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed("a finalist", &e))?;
    let images = |binaries: Vec<Result<Binary, String>>| -> Result<Vec<KernelImage>, BackendError> {
        finalists
            .iter()
            .zip(binaries)
            .map(|(values, binary)| {
                let binary = binary.map_err(|e| failed("compiling a finalist", &e))?;
                language.kernel_image(values, binary).map_err(|e| failed("a finalist", &e))
            })
            .collect()
    };
    let warm = warm.and_then(|crew| BenchSession::from_crew(crew, language.launch_timeout()));
    let (mut sessions, pool, images, reused) = match warm {
        Some((sessions, mut pool)) => {
            let binaries = compile_several(&mut pool, sessions[0].hub(), jobs, deadline());
            let images = images(binaries)?;
            (sessions, pool, images, true)
        }
        None => {
            let hub = Hub::default();
            let workers = pipeline.compile_workers.clamp(1, finalists.len().max(1));
            let mut pool =
                CompilePool::new(&pipeline.compile_worker, workers, CompileLimit::new(timeout, false), &hub, 1)
                    .map_err(|e| failed("starting a compile worker", &e))?;
            let images = images(compile_several(&mut pool, &hub, jobs, deadline()))?;
            let mut compile = |job| compile_now(&mut pool, &hub, job, timeout);
            let setup = language.setup(device, &mut compile).map_err(|e| failed("the setup", &e))?;
            let session =
                BenchSession::start(&pipeline.bench_worker, pipeline.first_device(), setup, language.launch_timeout())?;
            (vec![session], pool, images, false)
        }
    };
    // The search's workers time on their GPUs; the run's other GPUs without one (local ones,
    // each once) time their share on workers of their own, started and set up as the
    // first's, and stopped after.
    let kept = sessions.len();
    let pairs = finalists.len();
    let mut others: Vec<usize> = pipeline
        .devices
        .iter()
        .copied()
        .filter(|device| !sessions.iter().any(|s| s.device_ordinal() == *device))
        .collect();
    others.dedup();
    for device in others.into_iter().take(pairs.saturating_sub(kept)) {
        let started = sessions[0].on_device(device)?;
        sessions.push(started);
    }
    let mut report = retime(&mut sessions, &images, options, stop)?;
    report.seconds = clock.elapsed().as_secs_f64();
    report.reused_search_workers = reused;
    sessions.truncate(kept);
    let crew = BenchSession::into_crew(sessions, pool);
    Ok((report, crew))
}

/// Part of a pair's interleaved rounds, timed on GPU `gpu` (an index into the sessions):
/// `rounds` rounds from the pair's round `first_round` on, in `blocks` blocks (each loads
/// both kernels anew). A share of several blocks starts and ends where the pair's blocks
/// do; a share of part of a block is a block of its own on its GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    pub gpu: usize,
    pub pair: usize,
    pub first_round: u32,
    pub rounds: u32,
    pub blocks: u32,
}

/// The work of timing `pairs` pairs of `rounds` rounds in `blocks` blocks on `gpus` GPUs:
/// the pairs' rounds, one pair after another, cut into as many runs of consecutive rounds
/// as there are GPUs (within a round of each other, so that no GPU waits while another
/// times a block more), each run cut again where a pair or a block ends. At most one GPU
/// per block of the whole work. In pair order, a pair's shares in round order.
pub fn shares(pairs: usize, gpus: usize, rounds: u32, blocks: u32) -> Vec<Share> {
    let blocks = blocks.clamp(1, rounds.max(1));
    // Where each of a pair's blocks starts, in its rounds, as `block_medians` cuts them.
    let starts: Vec<u32> = (0..=blocks).map(|b| b * (rounds / blocks) + b.min(rounds % blocks)).collect();
    let total = pairs * rounds as usize;
    let gpus = gpus.clamp(1, (pairs * blocks as usize).max(1));
    let mut work = Vec::new();
    for gpu in 0..gpus {
        let (start, end) = (gpu * total / gpus, (gpu + 1) * total / gpus);
        let mut at = start;
        while at < end {
            let pair = at / rounds as usize;
            let first_round = (at % rounds as usize) as u32;
            let last = (end - pair * rounds as usize).min(rounds as usize) as u32;
            // The blocks that start at or after `first_round` and end by `last`.
            let whole: Vec<usize> =
                (0..blocks as usize).filter(|&b| starts[b] >= first_round && starts[b + 1] <= last).collect();
            let (rounds_here, blocks_here) = match whole.first() {
                Some(&first) if starts[first] == first_round => {
                    (starts[whole[whole.len() - 1] + 1] - first_round, whole.len() as u32)
                }
                // Part of a block: up to its end, or to the end of the run.
                _ => {
                    let ends = starts.iter().copied().find(|&s| s > first_round).unwrap_or(rounds);
                    (ends.min(last) - first_round, 1)
                }
            };
            work.push(Share { gpu, pair, first_round, rounds: rounds_here, blocks: blocks_here });
            at += rounds_here as usize;
        }
    }
    work.sort_by_key(|s| (s.pair, s.first_round));
    work
}

/// The ratio `other / leader` of times taken in interleaved pairs (round `i` of each is
/// one pair), with its 95% interval over the medians of `blocks` blocks of rounds.
pub fn paired_ratio(leader: &[f64], other: &[f64], blocks: usize) -> Ratio {
    let per_pair: Vec<f64> = leader.iter().zip(other).map(|(a, b)| b / a).collect();
    let per_block = block_medians(&per_pair, blocks);
    let (low, high) = median_interval(&per_block);
    Ratio { ratio: median(&per_block), low, high }
}

/// The winner among the finalists (0: the leader) and why: a contender wins only when its
/// whole interval lies below the control's (and below 1); among several, the lowest ratio.
pub fn decide(control: &Ratio, contenders: &[Ratio]) -> (usize, Verdict) {
    let faster = contenders
        .iter()
        .enumerate()
        .filter(|(_, c)| c.high < control.low.min(1.0))
        .min_by(|a, b| a.1.ratio.total_cmp(&b.1.ratio));
    if let Some((index, _)) = faster {
        return (index + 1, Verdict::Overtaken);
    }
    if contenders.iter().all(|c| c.low > control.high.max(1.0)) {
        (0, Verdict::LeadHolds)
    } else {
        (0, Verdict::Tie)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ratio(ratio: f64, low: f64, high: f64) -> Ratio {
        Ratio { ratio, low, high }
    }

    #[test]
    fn a_contender_wins_only_below_the_control() {
        let control = ratio(1.0, 0.99, 1.01);
        assert_eq!(decide(&control, &[ratio(1.04, 1.02, 1.06), ratio(1.1, 1.08, 1.12)]), (0, Verdict::LeadHolds));
        assert_eq!(decide(&control, &[ratio(0.97, 0.96, 0.98), ratio(0.95, 0.94, 0.96)]), (2, Verdict::Overtaken));
        assert_eq!(decide(&control, &[ratio(0.99, 0.97, 1.0)]), (0, Verdict::Tie), "overlaps the control");
        assert_eq!(decide(&control, &[ratio(1.005, 1.0, 1.01)]), (0, Verdict::Tie));
        assert_eq!(decide(&control, &[]), (0, Verdict::LeadHolds), "no contender: nothing to doubt");
    }

    #[test]
    fn the_pairs_rounds_are_spread_evenly_and_every_round_is_kept() {
        let whole = |pair| Share { gpu: 0, pair, first_round: 0, rounds: 60, blocks: 6 };
        // One GPU: each pair whole, in order, as before.
        assert_eq!(shares(3, 1, 60, 6), vec![whole(0), whole(1), whole(2)]);
        // As many GPUs as pairs: a pair each.
        assert_eq!(
            shares(3, 3, 60, 6).iter().map(|s| (s.gpu, s.pair, s.blocks)).collect::<Vec<_>>(),
            [(0, 0, 6), (1, 1, 6), (2, 2, 6)]
        );
        // Two pairs on four GPUs: each pair in two halves.
        let halves = shares(2, 4, 60, 6);
        assert_eq!(halves[1], Share { gpu: 1, pair: 0, first_round: 30, rounds: 30, blocks: 3 });
        // Three pairs on four GPUs: 45 rounds each (whole blocks: 40, 50, 40 and 50). The
        // second GPU starts in the middle of the first pair's fifth block and times its
        // second half as a block of its own.
        let three = shares(3, 4, 60, 6);
        let load = |work: &[Share], gpu| work.iter().filter(|s| s.gpu == gpu).map(|s| s.rounds).sum::<u32>();
        assert_eq!((0..4).map(|gpu| load(&three, gpu)).collect::<Vec<_>>(), [45, 45, 45, 45]);
        assert!(three.contains(&Share { gpu: 0, pair: 0, first_round: 40, rounds: 5, blocks: 1 }), "{three:?}");
        assert!(three.contains(&Share { gpu: 1, pair: 0, first_round: 45, rounds: 5, blocks: 1 }), "{three:?}");
        assert!(three.contains(&Share { gpu: 1, pair: 0, first_round: 50, rounds: 10, blocks: 1 }), "{three:?}");
        for (pairs, gpus, rounds, blocks) in [
            (1, 8, 61, 6),
            (2, 4, 61, 6),
            (2, 5, 61, 6),
            (3, 8, 61, 6),
            (4, 2, 61, 6),
            (3, 2, 60, 6),
            (1, 16, 61, 6),
            (2, 1, 61, 6),
            (3, 4, 60, 7),
        ] {
            let work = shares(pairs, gpus, rounds, blocks);
            let used = gpus.min(pairs * blocks as usize);
            let total = pairs as u32 * rounds;
            for gpu in 0..used {
                assert!(load(&work, gpu) <= total.div_ceil(used as u32), "{pairs} pairs on {gpus} GPUs: even");
            }
            assert!(work.iter().all(|s| s.gpu < used), "{pairs} pairs on {gpus} GPUs: at most a GPU a block");
            // Where block_medians starts each block of a pair's rounds.
            let starts: Vec<u32> = (0..=blocks).map(|b| b * (rounds / blocks) + b.min(rounds % blocks)).collect();
            for pair in 0..pairs {
                let mine: Vec<&Share> = work.iter().filter(|s| s.pair == pair).collect();
                assert!(mine.iter().all(|s| s.blocks >= 1 && s.rounds >= s.blocks));
                assert_eq!(mine[0].first_round, 0);
                assert!(mine.windows(2).all(|w| w[0].first_round + w[0].rounds == w[1].first_round), "in round order");
                assert_eq!(mine.iter().map(|s| s.rounds).sum::<u32>(), rounds, "{pairs} pairs on {gpus} GPUs");
                for share in mine {
                    let (first, last) = (share.first_round, share.first_round + share.rounds);
                    let block_of = |round: u32| starts.iter().rposition(|&s| s <= round).unwrap_or(0);
                    if share.blocks > 1 {
                        assert!(starts.contains(&first) && starts.contains(&last), "{share:?}: whole blocks");
                        assert_eq!(block_of(last - 1) + 1 - block_of(first), share.blocks as usize, "{share:?}");
                    } else {
                        assert_eq!(block_of(first), block_of(last - 1), "{share:?}: within one block");
                    }
                }
            }
        }
    }

    #[test]
    fn a_noisy_control_protects_the_leader() {
        let noisy = ratio(1.0, 0.95, 1.05);
        assert_eq!(decide(&noisy, &[ratio(0.97, 0.96, 0.98)]), (0, Verdict::Tie), "3% is within this run's noise");
    }
}
