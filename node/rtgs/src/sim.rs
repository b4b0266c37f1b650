//! `rtgs sim`: the deterministic simulator over a range of seeds, or one seed replayed.
//!
//! Every run is a pure function of its configuration, so a failure's seed (with the same flags)
//! replays it exactly. The release build aborts on panic; a panic hook therefore prints the seed
//! being run before the process ends, so a core assertion is replayable too.

use clap::Args;
use rtgs_sim::{self as sim, Faults, Recoveries, SimConfig};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

#[derive(Args)]
pub struct SimArgs {
    /// Run (replay) exactly this seed and print its report.
    #[arg(long, conflicts_with_all = ["seeds", "from"])]
    pub seed: Option<u64>,
    /// How many seeds to run.
    #[arg(long, default_value_t = 1_000)]
    pub seeds: u64,
    /// First seed of the range.
    #[arg(long, default_value_t = 0)]
    pub from: u64,
    /// Centers in the simulated cluster.
    #[arg(long, default_value_t = 3)]
    pub centers: usize,
    /// Accounts opened and funded first.
    #[arg(long, default_value_t = 8)]
    pub accounts: usize,
    /// Transfers and closes after setup.
    #[arg(long, default_value_t = 150)]
    pub commands: usize,
    /// 0 = reordering only, 1 light, 2 medium, 3 heavy faults.
    #[arg(long, default_value_t = 2)]
    pub fault_level: u8,
    /// Run the collection plugin in every center against a simulated chain (owner failovers,
    /// identical plugin state, no sweep broadcast twice).
    #[arg(long)]
    pub collection: bool,
    /// Deposit wallets of the collection workload.
    #[arg(long, default_value_t = 12)]
    pub collection_wallets: u64,
    /// Relayers of the collection workload.
    #[arg(long, default_value_t = 3)]
    pub collection_relayers: u64,
    /// Run the matching plugin in every center against a faulty LP and a simulated marketplace
    /// (owner failovers, identical plugin state, no order matched twice, every escrow known).
    #[arg(long, conflicts_with = "collection")]
    pub matching: bool,
    /// Orders of the matching workload.
    #[arg(long, default_value_t = 24)]
    pub matching_orders: u64,
    /// Sellers of the matching workload.
    #[arg(long, default_value_t = 4)]
    pub matching_sellers: u64,
    /// Run the withdrawal plugin in every center against its simulated world (owner failovers,
    /// identical plugin state, no withdrawal paid twice, nothing broadcast unrecorded).
    #[arg(long, conflicts_with_all = ["collection", "matching"])]
    pub withdrawal: bool,
    /// Withdrawal requests of the workload.
    #[arg(long, default_value_t = 18)]
    pub withdrawal_requests: u64,
    /// The withdrawal world's own faults too (dropped, stuck, reorged transactions, lost and
    /// duplicate webhooks, signer and screener timeouts, ...).
    #[arg(long)]
    pub withdrawal_faults: bool,
}

fn run_one(args: &SimArgs, config: &SimConfig) -> Result<sim::SimReport, sim::SimFailure> {
    if args.collection {
        let world = sim::collection::CollectionSim::new(
            config.seed,
            args.collection_wallets,
            args.collection_relayers,
        );
        sim::run_with_plugins(config, Box::new(world))
    } else if args.matching {
        let world = sim::matching::MatchingSim::new(config.seed, args.matching_orders, args.matching_sellers);
        sim::run_with_plugins(config, Box::new(world))
    } else if args.withdrawal {
        let world = sim::withdrawal::WithdrawalSim::new(
            config.seed,
            args.withdrawal_requests,
            4,
            2,
            args.withdrawal_faults,
        );
        sim::run_with_plugins(config, Box::new(world))
    } else {
        sim::run(config)
    }
}

static CURRENT_SEED: AtomicU64 = AtomicU64::new(0);

fn replay_command(args: &SimArgs, seed: u64) -> String {
    let d = SimConfig::small(0);
    let mut cmd = format!("rtgs sim --seed {seed}");
    if args.centers != d.centers {
        cmd += &format!(" --centers {}", args.centers);
    }
    if args.accounts != d.accounts {
        cmd += &format!(" --accounts {}", args.accounts);
    }
    if args.commands != d.commands {
        cmd += &format!(" --commands {}", args.commands);
    }
    if args.fault_level != d.fault_level {
        cmd += &format!(" --fault-level {}", args.fault_level);
    }
    if args.collection {
        cmd += &format!(
            " --collection --collection-wallets {} --collection-relayers {}",
            args.collection_wallets, args.collection_relayers
        );
    }
    if args.matching {
        cmd += &format!(
            " --matching --matching-orders {} --matching-sellers {}",
            args.matching_orders, args.matching_sellers
        );
    }
    if args.withdrawal {
        cmd += &format!(" --withdrawal --withdrawal-requests {}", args.withdrawal_requests);
        if args.withdrawal_faults {
            cmd += " --withdrawal-faults";
        }
    }
    cmd
}

pub fn run(args: SimArgs) -> anyhow::Result<ExitCode> {
    let config = |seed| SimConfig {
        seed,
        centers: args.centers,
        accounts: args.accounts,
        commands: args.commands,
        fault_level: args.fault_level,
        inject_bug: None,
        guard_off: None,
    };
    let replay_template = replay_command(&args, u64::MAX);
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let seed = CURRENT_SEED.load(Ordering::Relaxed);
        eprintln!(
            "rtgs sim: panic while simulating seed {seed}; replay with: {}",
            replay_template.replace(&u64::MAX.to_string(), &seed.to_string())
        );
        default_hook(info);
    }));

    if let Some(seed) = args.seed {
        CURRENT_SEED.store(seed, Ordering::Relaxed);
        return Ok(match run_one(&args, &config(seed)) {
            Ok(r) => {
                println!("{r:#?}");
                ExitCode::SUCCESS
            }
            Err(f) => {
                eprintln!("{f}\nreplay with: {}", replay_command(&args, f.seed));
                ExitCode::FAILURE
            }
        });
    }

    let started = Instant::now();
    let (mut steps, mut finalized) = (0u64, 0u64);
    let (mut faults, mut recoveries) = (Faults::default(), Recoveries::default());
    for seed in args.from..args.from.saturating_add(args.seeds) {
        CURRENT_SEED.store(seed, Ordering::Relaxed);
        match run_one(&args, &config(seed)) {
            Ok(r) => {
                steps += r.steps;
                finalized += r.finalized;
                faults.add(&r.faults);
                recoveries.add(&r.recoveries);
            }
            Err(f) => {
                eprintln!("{f}\nreplay with: {}", replay_command(&args, f.seed));
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    println!(
        "{} seeds from {} passed in {:.1} s: {steps} steps, {finalized} seqs finalized; {} faults \
         injected: {faults}; recoveries: {recoveries}",
        args.seeds,
        args.from,
        started.elapsed().as_secs_f64(),
        faults.total()
    );
    Ok(ExitCode::SUCCESS)
}
