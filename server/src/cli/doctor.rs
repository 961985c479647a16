//! `sluice doctor`: its flags and the report it prints (exit status 1 when a
//! check failed). The checks are the library's `doctor` module.

use std::path::PathBuf;

use sluice_server::config::DEFAULT_DATA_DIR;
use sluice_server::doctor::DoctorOptions;
use sluice_server::warehouse::S3Settings;

/// The flags of `sluice doctor`.
#[derive(clap::Args)]
pub struct DoctorArgs {
    /// Data directory whose `wal` folder to probe.
    #[arg(long, default_value = DEFAULT_DATA_DIR)]
    data_dir: PathBuf,
    /// Warehouse to probe (path, file:// or s3://bucket/prefix URL). Default: <data-dir>/warehouse.
    #[arg(long)]
    warehouse: Option<String>,
    #[command(flatten)]
    s3: S3Settings,
    /// Small probes (seconds instead of tens of seconds); noisier figures.
    #[arg(long)]
    quick: bool,
}

/// Runs every check and prints the report.
pub async fn run(args: DoctorArgs) -> anyhow::Result<()> {
    let mut opts = DoctorOptions::new(args.data_dir, args.warehouse);
    opts.s3 = args.s3;
    if args.quick {
        opts = opts.quick();
    }
    let report = sluice_server::doctor::run(&opts).await;
    print!("{}", report.render());
    if report.failed() {
        anyhow::bail!("sluice doctor: at least one check failed");
    }
    Ok(())
}
