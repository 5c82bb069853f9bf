//! The command line, declared with clap.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use kerntune_engine::{SearchOptions, StrategyOption};
use kerntune_pipeline::RayGpus;

#[derive(Debug, Parser)]
#[command(
    name = "kerntune",
    version,
    about = "Find the fastest correct build of a GPU kernel",
    long_about = "kerntune tunes GPU kernels: it searches the parameters a kernel can be built with for the \
                  fastest build that computes the right answer, and keeps every result so that the next \
                  run costs nothing.\n\nWithout a GPU, `kerntune simulate` replays a recorded tuning \
                  landscape as if it were a device.",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Tune a CUDA C kernel described by a spec file on this machine's GPU.
    Tune(Box<TuneArgs>),
    /// Tune on a recorded landscape instead of a GPU (Kernel Tuner cache or T4 file).
    Simulate(SimulateArgs),
    /// Build a search space from a file and count its valid configurations.
    Space(SpaceArgs),
    /// Show the best configurations stored in a results database.
    Results(ResultsArgs),
    /// Write an HTML report of a results database: best configurations, convergence,
    /// parameters, failures and costs, as one self-contained page.
    Report(ReportArgs),
    /// Import a Kernel Tuner cache file or a T4 file into a results database.
    Import(ImportArgs),
    /// Export a tuning from a results database as a Kernel Tuner cache file or a T4 file.
    Export(ExportArgs),
    /// Export a dispatch table (the configuration of each size, as kernel.save_table() or
    /// a many-shape run writes it) for another program.
    #[command(subcommand)]
    Table(TableCommand),
    /// List the search strategies and their options.
    Strategies(StrategiesArgs),
    /// Read and rewrite the native instruction schedule (SASS) of a Hopper cubin.
    #[command(subcommand)]
    Sass(SassCommand),
    /// A worker process of a tuning run (started by kerntune itself).
    #[command(name = "__worker", hide = true)]
    Worker(WorkerArgs),
    /// Compare search strategies on recorded landscapes: how close to each landscape's
    /// optimum they get within each evaluation budget.
    CompareStrategies(CompareArgs),
}

/// Search settings shared by every command that tunes.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Recorded landscape (.json or .json.gz). Default: the convolution landscape of an
    /// A100 that ships inside kerntune.
    pub landscape: Option<PathBuf>,
    #[command(flatten)]
    pub search: SearchOptions,
    /// Results database; evaluations found there are reused and a stopped run resumes.
    /// Without it nothing is kept.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Replay each evaluation's recorded cost in real time, SPEED times faster.
    #[arg(long, value_name = "SPEED")]
    pub realtime: Option<f64>,
    /// Evaluations in flight at once, asked from the strategy and told back in the order
    /// they finish, as on a GPU with its compile pool (simulated time runs them at once).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch: u64,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Optimise this instead of the landscape's recorded objective: time, energy, edp or
    /// an expression over the recorded time and measured values (Kernel Tuner's
    /// nvml_energy, nvml_power... included), such as "energy*time**2".
    #[arg(long, value_name = "OBJECTIVE")]
    pub objective: Option<String>,
    /// Higher values of --objective are better.
    #[arg(long, requires = "objective")]
    pub objective_higher_is_better: bool,
}

#[derive(Debug, Args)]
pub struct SpaceArgs {
    /// Space file: {"tune_params": {...}, "restrictions": [...], "max_threads": N}.
    pub file: PathBuf,
    /// Print {"count": N, "seconds": s, ...}.
    #[arg(long)]
    pub json: bool,
    /// The most memory the valid configurations may take (bytes, or with K, M or G), at 12
    /// bytes each; a space estimated over it is refused before it is enumerated.
    /// Default: $KERNTUNE_SPACE_MEMORY, else 1G.
    #[arg(long, value_name = "SIZE")]
    pub max_memory: Option<kerntune_space::MemoryCap>,
    /// Print N random valid configurations, one JSON object a line, drawn by rejection
    /// without enumerating the space (so for spaces of any size).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub sample: Option<u64>,
    /// Seed for --sample.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

#[derive(Debug, Args)]
pub struct ResultsArgs {
    /// Results database.
    pub db: PathBuf,
    /// Configurations to show per tuning (at least 1).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub top: u64,
    /// Only tunings whose kernel name contains this text.
    #[arg(long)]
    pub kernel: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Results database.
    pub db: PathBuf,
    /// Output file (HTML).
    #[arg(long, short = 'o', default_value = "report.html")]
    pub output: PathBuf,
    /// Only this tuning (its number, as `kerntune results` lists it). Default: every
    /// tuning in the database.
    #[arg(long, value_name = "ID")]
    pub tuning: Option<i64>,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Kernel Tuner cache file or T4 file (.json or .json.gz).
    pub file: PathBuf,
    /// Results database to import into (created if missing).
    #[arg(long)]
    pub db: PathBuf,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ExportFormat {
    /// Kernel Tuner's cache JSON.
    KernelTuner,
    /// The T4 JSON format.
    T4,
    /// The tuned native schedule (cubin) kept by `tune --schedule`, for deployment; its
    /// provenance (the search's report) goes to standard error.
    Cubin,
    /// A C/C++ header: the best configuration's parameters as `#define KERNEL_PARAM value`.
    Header,
    /// The best configurations (--top) as JSON, best first, for `kerntune.load_configs`
    /// to turn into `triton.Config`s.
    Triton,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Results database.
    pub db: PathBuf,
    #[arg(long, value_enum, default_value = "kernel-tuner")]
    pub format: ExportFormat,
    /// Which tuning, by kernel name (needed when the database holds several).
    #[arg(long)]
    pub kernel: Option<String>,
    /// Output file; `-` for standard output.
    #[arg(long, short = 'o', default_value = "-")]
    pub output: PathBuf,
    /// Configurations to export with --format triton, best first.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..))]
    pub top: u64,
}

#[derive(Debug, Args)]
pub struct StrategiesArgs {
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct TuneArgs {
    /// Kernel spec (TOML; see docs/spec.md).
    pub spec: PathBuf,
    /// The run's settings, as every front gives them.
    #[command(flatten)]
    pub request: kerntune_run::Request,
    /// Run the compile workers as actors of the Ray cluster at this address (`auto`,
    /// HOST:PORT), on any of its nodes; needs `pip install 'kerntune[ray]'` in the Python
    /// named by $KERNTUNE_PYTHON (default: the python3 beside kerntune, else python3 on the
    /// PATH). Give --compile-workers: the default
    /// counts this machine's cores only.
    #[arg(long, value_name = "ADDRESS")]
    pub ray: Option<String>,
    /// Also measure on N GPUs of the Ray cluster (`all`: every one it has), one benchmark
    /// worker each as a Ray actor with one GPU, instead of this machine's (which must have a
    /// GPU of the cluster's model: it sets the compile target). A worker or node that dies
    /// costs only the configuration it held, measured again on another.
    #[arg(long, value_name = "N|all", requires = "ray", value_parser = parse_ray_gpus)]
    pub ray_gpus: Option<RayGpus>,
    /// Only enumerate the space and check every configuration's launch geometry.
    #[arg(long, conflicts_with = "compile_only")]
    pub dry_run: bool,
    /// Then let CompileIQ search ptxas ACF files for the best configuration, each candidate
    /// compiled, checked and timed like any configuration, the fastest kept only if it beats
    /// the best without one by more than an A/A control's noise. Needs [compiler] ptxas in the
    /// spec and `pip install compileiq` in the Python named by $KERNTUNE_PYTHON (default: the
    /// python3 beside kerntune, else python3 on the PATH), which runs CompileIQ's worker for
    /// the whole search.
    #[arg(long, value_enum, value_name = "SEARCH", conflicts_with_all = ["dry_run", "compile_only"])]
    pub controls: Option<ControlsSearch>,
    /// Candidate ACF files for --controls.
    #[arg(long, value_name = "N", default_value_t = kerntune_pipeline::controls::DEFAULT_BUDGET, requires = "controls")]
    pub controls_budget: usize,
    /// Only compile every configuration (no GPU needed) and keep the cubins in the store.
    #[arg(long)]
    pub compile_only: bool,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// What to optimise, replacing the spec's [objective]: time (the default), energy (J
    /// per launch, read through NVML), edp (energy x time), or an expression over time,
    /// energy, power, clock_MHz, the problem variables and parameters, such as
    /// "energy*time**2".
    #[arg(long, value_name = "OBJECTIVE")]
    pub objective: Option<String>,
    /// Higher values of --objective are better (default: lower, except for rates such as
    /// GFLOP/s).
    #[arg(long, requires = "objective")]
    pub objective_higher_is_better: bool,
    /// Keep and report the Pareto front of two measured values, such as time,energy (lower
    /// is better on both); what they need is measured with every configuration.
    #[arg(long, value_name = "A,B")]
    pub pareto: Option<String>,
    /// How a sample is timed: events around one launch (the default), or graph: one CUDA
    /// graph of many launches, for kernels of a few microseconds.
    #[arg(long, value_enum, value_name = "MODE")]
    pub timing: Option<TimingMode>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ControlsSearch {
    Compileiq,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TimingMode {
    Events,
    Graph,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum WorkerKind {
    Bench,
    Compile,
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[arg(value_enum)]
    pub kind: WorkerKind,
    #[arg(long, default_value_t = 0)]
    pub device: usize,
}

#[derive(Debug, Subcommand)]
pub enum TableCommand {
    /// Write a dispatch table as vLLM's fused-MoE config file or a C/C++ header.
    Export(TableExportArgs),
}

#[derive(Debug, Args)]
pub struct TableExportArgs {
    /// The dispatch table (JSON, as kernel.save_table() or a many-shape run writes it).
    pub table: PathBuf,
    /// Output file, or a folder where the file takes its format's name (vLLM finds its
    /// file by name); `-` for standard output.
    #[arg(long, short = 'o', default_value = "-", global = true)]
    pub output: PathBuf,
    /// Print one JSON object (the path written, the file's name, the entries) instead of
    /// the summary line.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub format: kerntune_store::formats::dispatch::TableFormat,
}

#[derive(Debug, Subcommand)]
pub enum SassCommand {
    /// List a kernel's instructions with their control bits, defs and uses, and which
    /// moves of memory instructions are legal.
    Show(SassShowArgs),
    /// Apply random legal moves to a kernel's schedule and write the rewritten cubin.
    Shuffle(SassShuffleArgs),
}

#[derive(Debug, Args)]
pub struct SassShowArgs {
    /// A cubin for sm_90.
    pub cubin: PathBuf,
    /// The kernel (needed when the cubin holds several).
    #[arg(long)]
    pub kernel: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SassShuffleArgs {
    /// A cubin for sm_90.
    pub cubin: PathBuf,
    /// The kernel (needed when the cubin holds several).
    #[arg(long)]
    pub kernel: Option<String>,
    /// Random legal moves to apply.
    #[arg(long, default_value_t = 10)]
    pub moves: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Where to write the rewritten cubin.
    #[arg(long, short = 'o')]
    pub output: PathBuf,
    /// Skip checking with nvdisasm that the result is exactly the intended permutation.
    #[arg(long)]
    pub no_verify: bool,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Recorded landscapes (Kernel Tuner cache or T4 files, .json or .json.gz).
    #[arg(required = true)]
    pub landscapes: Vec<PathBuf>,
    /// Strategies to compare, comma-separated (default: every strategy but brute_force).
    #[arg(long, value_delimiter = ',')]
    pub strategies: Vec<String>,
    /// A strategy with options of its own, compared beside the others:
    /// STRATEGY:NAME=VALUE[:NAME=VALUE...] (VALUE in JSON, as `simulate --option`), labelled
    /// by this text; repeatable.
    #[arg(long, value_name = "STRATEGY:NAME=VALUE")]
    pub variant: Vec<Variant>,
    /// Evaluation budgets, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "25,50,100,200")]
    pub budgets: Vec<usize>,
    /// Runs of each strategy on each landscape, with seeds FIRST_SEED, FIRST_SEED + 1, ...
    #[arg(long, default_value_t = 10)]
    pub seeds: u64,
    #[arg(long, default_value_t = 0)]
    pub first_seed: u64,
    /// Evaluations in flight at once, asked from the strategy and told back in the order
    /// they finish, as on a GPU with its compile pool (simulated time runs them at once).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch: u64,
    /// Print the comparison as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Write a plot of the best found so far against evaluations (SVG).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
}

/// A strategy with options (`compare-strategies --variant`), as the user wrote it.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    pub label: String,
    pub strategy: String,
    pub options: serde_json::Map<String, serde_json::Value>,
}

impl std::str::FromStr for Variant {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let mut parts = text.split(':');
        let strategy = parts.next().unwrap_or_default().trim().to_string();
        if strategy.is_empty() {
            return Err(format!("variant '{text}' names no strategy: write STRATEGY:NAME=VALUE"));
        }
        let options = parts
            .map(|part| StrategyOption::from_str(part).map(|o| (o.name, o.value)))
            .collect::<Result<serde_json::Map<_, _>, _>>()?;
        if options.is_empty() {
            return Err(format!(
                "variant '{text}' sets no option: write STRATEGY:NAME=VALUE (a strategy as it is goes in --strategies)"
            ));
        }
        Ok(Variant { label: text.to_string(), strategy, options })
    }
}

fn parse_ray_gpus(text: &str) -> Result<RayGpus, String> {
    match text {
        "all" => Ok(RayGpus::All),
        _ => match text.parse::<usize>() {
            Ok(n) if n > 0 => Ok(RayGpus::Count(n)),
            _ => Err("give a number of GPUs (1 or more) or `all`".into()),
        },
    }
}
