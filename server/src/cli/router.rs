//! `sluice router`: the producers' endpoint of a cluster (the router crate's
//! proxy), run until SIGINT/SIGTERM.

use sluice_router::tcp_front::{Protocol, TcpFront};

/// The flags of `sluice router`.
#[derive(clap::Args)]
pub struct RouterArgs {
    /// Address producers connect to (gRPC and HTTP).
    #[arg(long, default_value = "127.0.0.1:50050")]
    listen: std::net::SocketAddr,
    /// The meta store: etcd://HOST:PORT[,HOST:PORT…] (etcds:// for TLS).
    #[arg(long, env = "SLUICE_JOIN")]
    join: String,
    #[command(flatten)]
    etcd: sluice_server::etcd_access::EtcdAccess,
    /// Placement policy: p2c (default), least-loaded, round-robin, random.
    #[arg(long, default_value = "p2c")]
    placement: sluice_router::Policy,
    /// Also accept MQTT connections here; each is placed like a stream on a pod that
    /// serves MQTT (`sluice serve --mqtt-listen`) and relayed to it.
    #[arg(long)]
    mqtt_listen: Option<std::net::SocketAddr>,
    /// Also accept Kafka producer connections here, placed and relayed like MQTT's (pods
    /// with `--kafka-listen`; give them `--kafka-advertise` = this address).
    #[arg(long)]
    kafka_listen: Option<std::net::SocketAddr>,
}

/// Binds, connects to the meta store and proxies streams until a signal.
pub async fn run(args: RouterArgs) -> anyhow::Result<()> {
    super::init_tracing();
    sluice_server::metrics_export::install();
    let shutdown = sluice_server::shutdown_signal();
    let listener = sluice_router::proxy::bind(args.listen).await?;
    let mut fronts = Vec::new();
    for (addr, protocol) in [
        (args.mqtt_listen, Protocol::Mqtt),
        (args.kafka_listen, Protocol::Kafka),
    ] {
        if let Some(addr) = addr {
            let listener = sluice_router::proxy::bind(addr).await?;
            fronts.push(TcpFront { listener, protocol });
        }
    }
    let meta = sluice_router::Meta::connect(&args.join, &args.etcd.options()?).await?;
    sluice_router::proxy::run(
        listener,
        fronts,
        meta,
        args.placement,
        sluice_server::metrics_export::render,
        shutdown,
    )
    .await?;
    Ok(())
}
