//! zeroparser-bench: runtime-schema protobuf decoders on the same pre-encoded bytes.
//!
//! Decoders: prost (generated code), prost-reflect `DynamicMessage`, the official Zerobus
//! SDK's zeroparser (`MessageRegistry::from_descriptor` + `ParsedMessage::parse`) and Sluice's
//! zeroparser. Workloads: `proto/zeroparser_bench.proto`, 50 000 records each (see
//! `workloads`). Two modes:
//!
//! - (a) parse and touch every field once (`touch`);
//! - (b) parse into an Arrow RecordBatch (`arrow_peers`): Sluice's real path against
//!   prost-reflect + Arrow builders, beside prost's plain decode and Sluice's own
//!   parse-and-touch rate from (a);
//! - (c) JSON into an Arrow RecordBatch (`json_peers`): Sluice's `append_json` against
//!   arrow-json's `ReaderBuilder` decoder with the same schema, on the same rows (workloads
//!   with BINARY columns are left out);
//! - (d) Avro into an Arrow RecordBatch (`avro_peers`): Sluice's `append_avro` on the same
//!   rows encoded as raw Avro datums by apache-avro, beside apache-avro's own datum decoder
//!   and Sluice's protobuf rows/s from (b) (workloads with BINARY or VARIANT columns are left
//!   out).
//!
//! After the tables, the goals of issue 17 with each one's worst workload (`goals`).
//!
//! Single thread; each number is the median of several trials (default 31 of at least
//! 100 ms) of thread CPU time, in MB/s of input (10^6 bytes of protobuf, or of JSON text in
//! (c), per CPU second). The decoders of a mode run in rounds, one trial each per round
//! (the order rotated), and every ratio is the median of the rounds' ratios
//! (`sluice_bench::contest`).
//!
//! Usage: `zeroparser-bench [--trials N] [--min-trial-ms MS] [--records N] [--filter TEXT]
//! [--only prost,reflect,official,sluice,reflect-arrow,sluice-arrow,arrow-json,sluice-json,
//! apache-avro,sluice-avro]`
//! (a decoder left out shows 0).

mod arrow_peers;
mod avro_peers;
mod generate;
mod goals;
mod json_peers;
mod prost_types_gen;
mod schema_of;
mod touch;
mod workloads;

use std::time::Duration;

use anyhow::{bail, Context};
use databricks_zerobus_ingest_sdk::zeroparser::MessageRegistry;
use sluice_bench::contest::{Contest, Plan};
use sluice_bench::table::Table;
use sluice_zeroparser::{AvroPlan, ProtoPlan, RecordBatchBuilder, TableSchema};

use crate::workloads::Workload;

struct Args {
    plan: Plan,
    records: usize,
    filter: Option<String>,
    /// Decoders to run (all when `None`): prost, reflect, official, sluice, reflect-arrow,
    /// sluice-arrow.
    only: Option<Vec<String>>,
}

impl Args {
    fn runs(&self, decoder: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|only| only.iter().any(|d| d == decoder))
    }
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        plan: Plan {
            trials: 31,
            min_trial: Duration::from_millis(100),
        },
        records: 50_000,
        filter: None,
        only: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--trials" => args.plan.trials = value()?.parse()?,
            "--min-trial-ms" => args.plan.min_trial = Duration::from_millis(value()?.parse()?),
            "--records" => args.records = value()?.parse()?,
            "--filter" => args.filter = Some(value()?),
            "--only" => args.only = Some(value()?.split(',').map(str::to_owned).collect()),
            other => bail!("unknown argument {other}; see the module doc for usage"),
        }
    }
    Ok(args)
}

/// Everything a workload needs compiled once, outside the timed loops.
struct Compiled {
    registry: MessageRegistry,
    official_fields: Vec<touch::OfficialField>,
    schema: TableSchema,
    plan: ProtoPlan,
}

/// Type references without the package, as a Zerobus stream's descriptor carries them
/// (`.AllTypes.DayActivitiesEntry`): the official registry resolves only those.
fn strip_package(message: &mut prost_types::DescriptorProto, package: &str) {
    let prefix = format!(".{package}.");
    for field in &mut message.field {
        if let Some(name) = field.type_name.as_mut() {
            if let Some(rest) = name.strip_prefix(&prefix) {
                *name = format!(".{rest}");
            }
        }
    }
    for nested in &mut message.nested_type {
        strip_package(nested, package);
    }
}

fn compile(workload: &Workload) -> anyhow::Result<Compiled> {
    let mut descriptor_proto = workload.descriptor.descriptor_proto().clone();
    strip_package(&mut descriptor_proto, workload.descriptor.package_name());
    let registry = MessageRegistry::from_descriptor(&descriptor_proto);
    let sql = schema_of::table_sql(&workload.descriptor);
    let schema = TableSchema::parse(&sql).with_context(|| format!("schema {sql}"))?;
    let encoded = prost::Message::encode_to_vec(&descriptor_proto);
    let plan = ProtoPlan::compile(&encoded, &schema).context("compiling the Sluice plan")?;
    Ok(Compiled {
        official_fields: touch::official_fields(&workload.descriptor),
        registry,
        schema,
        plan,
    })
}

/// Checks that every decoder accepts every record before anything is timed.
fn check(workload: &Workload, c: &Compiled) -> anyhow::Result<()> {
    let records = &workload.records;
    let n = records.len();
    let official_ok = match records.iter().find_map(|r| {
        databricks_zerobus_ingest_sdk::zeroparser::parser::ParsedMessage::parse(r, &c.registry)
            .err()
    }) {
        None => true,
        Some(e) => {
            eprintln!("official zeroparser: {e}");
            false
        }
    };
    let sluice_ok = records
        .iter()
        .all(|r| c.plan.visit(r, &mut NoVisit).is_ok());
    let rows = arrow_peers::sluice(&mut RecordBatchBuilder::new(&c.schema), &c.plan, records);
    let reflect_rows =
        arrow_peers::prost_reflect(&workload.descriptor, &c.schema.arrow_schema(), records);
    if !official_ok || !sluice_ok || rows != n || reflect_rows != n {
        bail!(
            "{}: a decoder rejected a record (official ok: {official_ok}, sluice visit ok: \
             {sluice_ok}, sluice rows {rows} of {n}, prost-reflect + Arrow rows {reflect_rows})",
            workload.name
        );
    }
    Ok(())
}

struct NoVisit;
impl<'a> sluice_zeroparser::Visitor<'a> for NoVisit {
    fn scalar(&mut self, _: usize, _: sluice_zeroparser::Scalar<'a>) {}
    fn clear(&mut self, _: usize) {}
    fn element(&mut self, _: usize, _: sluice_zeroparser::Scalar<'a>) {}
    fn map_entry(
        &mut self,
        _: usize,
        _: sluice_zeroparser::Scalar<'a>,
        _: sluice_zeroparser::Scalar<'a>,
    ) {
    }
    fn begin_message(&mut self, _: usize) {}
    fn begin_element(&mut self, _: usize) {}
    fn begin_map_value(&mut self, _: usize, _: sluice_zeroparser::Scalar<'a>) {}
    fn end_message(&mut self) {}
}

/// Adds decoder `name` to `contest` if it is selected (one left out reads 0, its ratios NaN).
fn enter<'a>(
    args: &Args,
    contest: &mut Contest<'a>,
    name: &'static str,
    bytes: usize,
    pass: impl FnMut() + 'a,
) {
    if args.runs(name) {
        contest.add(name, bytes, pass);
    }
}

fn mb(rate: f64) -> String {
    format!("{rate:.0}")
}

fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let workloads: Vec<Workload> = workloads::all(args.records)?
        .into_iter()
        .filter(|w| args.filter.as_deref().is_none_or(|f| w.name.contains(f)))
        .collect();
    let mut touch_table = Table::new(&[
        "workload",
        "bytes/record",
        "prost MB/s",
        "prost-reflect MB/s",
        "official zeroparser MB/s",
        "Sluice zeroparser MB/s",
        "Sluice / official",
    ]);
    let mut arrow_table = Table::new(&[
        "workload",
        "bytes/record",
        "prost plain decode MB/s",
        "prost-reflect + Arrow builders MB/s",
        "Sluice into Arrow MB/s",
        "into Arrow / prost",
        "into Arrow / Sluice parse-and-touch",
        "Sluice / prost-reflect + Arrow",
        "Sluice rows/s",
    ]);
    let mut json_table = Table::new(&[
        "workload",
        "JSON bytes/row",
        "arrow-json MB/s",
        "Sluice append_json MB/s",
        "Sluice / arrow-json",
    ]);
    let mut avro_table = Table::new(&[
        "workload",
        "Avro bytes/row",
        "apache-avro to values MB/s",
        "Sluice append_avro MB/s",
        "Sluice Avro rows/s",
        "Sluice protobuf rows/s",
        "Avro / protobuf rows",
    ]);
    let mut goals = goals::Goals::new();
    for workload in &workloads {
        let c = compile(workload)?;
        check(workload, &c)?;
        let records = &workload.records;
        let bytes = workload.bytes();
        eprintln!("measuring {} ...", workload.name);
        let arrow_schema = c.schema.arrow_schema();
        let mut builder = RecordBatchBuilder::new(&c.schema);
        let mut contest = Contest::new(args.plan);
        enter(&args, &mut contest, "prost", bytes, || {
            std::hint::black_box(touch::prost(workload.message, records));
        });
        enter(&args, &mut contest, "reflect", bytes, || {
            std::hint::black_box(touch::prost_reflect(&workload.descriptor, records));
        });
        enter(&args, &mut contest, "official", bytes, || {
            std::hint::black_box(touch::official(&c.registry, &c.official_fields, records));
        });
        enter(&args, &mut contest, "sluice", bytes, || {
            std::hint::black_box(touch::sluice(&c.plan, records));
        });
        enter(&args, &mut contest, "reflect-arrow", bytes, || {
            std::hint::black_box(arrow_peers::prost_reflect(
                &workload.descriptor,
                &arrow_schema,
                records,
            ));
        });
        enter(&args, &mut contest, "sluice-arrow", bytes, || {
            std::hint::black_box(arrow_peers::sluice(&mut builder, &c.plan, records));
        });
        contest.run();
        let sluice_arrow = contest.rate("sluice-arrow");
        let size = format!("{:.0}", workload.mean_record_bytes());
        touch_table.row(vec![
            workload.name.into(),
            size.clone(),
            mb(contest.rate("prost")),
            mb(contest.rate("reflect")),
            mb(contest.rate("official")),
            mb(contest.rate("sluice")),
            format!("{:.2}×", contest.ratio("sluice", "official")),
        ]);
        let vs_prost = contest.ratio("sluice-arrow", "prost");
        let vs_touch = contest.ratio("sluice-arrow", "sluice");
        let lists = workload.message == workloads::Message::TelemetryList;
        goals.proto(workload.name, lists, vs_prost, vs_touch, sluice_arrow);
        arrow_table.row(vec![
            workload.name.into(),
            size,
            mb(contest.rate("prost")),
            mb(contest.rate("reflect-arrow")),
            mb(sluice_arrow),
            format!("{vs_prost:.2}×"),
            format!("{:.0} %", 100.0 * vs_touch),
            format!("{:.2}×", contest.ratio("sluice-arrow", "reflect-arrow")),
            format!(
                "{:.2} M",
                sluice_arrow * 1e6 / workload.mean_record_bytes() / 1e6
            ),
        ]);
        drop(contest);
        if let Some(rows) = json_peers::rows(&workload.descriptor, records) {
            let batches = json_peers::ndjson_batches(&rows);
            let json_bytes: usize = rows.iter().map(String::len).sum();
            let mut decoder = json_peers::arrow_json_decoder(&arrow_schema)?;
            if json_peers::sluice(&mut builder, &batches) != rows.len()
                || json_peers::arrow_json(&mut decoder, &batches) != rows.len()
            {
                bail!("{}: a JSON decoder rejected a row", workload.name);
            }
            let mut contest = Contest::new(args.plan);
            enter(&args, &mut contest, "arrow-json", json_bytes, || {
                std::hint::black_box(json_peers::arrow_json(&mut decoder, &batches));
            });
            enter(&args, &mut contest, "sluice-json", json_bytes, || {
                std::hint::black_box(json_peers::sluice(&mut builder, &batches));
            });
            contest.run();
            let vs_arrow_json = contest.ratio("sluice-json", "arrow-json");
            goals.json(workload.name, vs_arrow_json);
            json_table.row(vec![
                workload.name.into(),
                format!("{:.0}", json_bytes as f64 / rows.len().max(1) as f64),
                mb(contest.rate("arrow-json")),
                mb(contest.rate("sluice-json")),
                format!("{vs_arrow_json:.2}×"),
            ]);
            drop(contest);
            if let Some(avro) = avro_peers::rows(&c.schema, &rows) {
                let plan = AvroPlan::compile(&avro.schema_json, &c.schema, false)
                    .with_context(|| format!("{}: Avro schema", workload.name))?;
                let datums = &avro.datums;
                let avro_bytes: usize = datums.iter().map(Vec::len).sum();
                if avro_peers::sluice(&mut builder, &plan, datums) != datums.len()
                    || avro_peers::apache(&avro.schema, datums) != datums.len()
                {
                    bail!("{}: an Avro decoder rejected a datum", workload.name);
                }
                let mut contest = Contest::new(args.plan);
                enter(&args, &mut contest, "apache-avro", avro_bytes, || {
                    std::hint::black_box(avro_peers::apache(&avro.schema, datums));
                });
                enter(&args, &mut contest, "sluice-avro", avro_bytes, || {
                    std::hint::black_box(avro_peers::sluice(&mut builder, &plan, datums));
                });
                contest.run();
                let (apache, sluice_avro) =
                    (contest.rate("apache-avro"), contest.rate("sluice-avro"));
                drop(contest);
                let per_row = avro_bytes as f64 / datums.len().max(1) as f64;
                let avro_rows = sluice_avro * 1e6 / per_row;
                let proto_rows = sluice_arrow * 1e6 / workload.mean_record_bytes();
                avro_table.row(vec![
                    workload.name.into(),
                    format!("{per_row:.0}"),
                    mb(apache),
                    mb(sluice_avro),
                    format!("{:.2} M", avro_rows / 1e6),
                    format!("{:.2} M", proto_rows / 1e6),
                    format!("{:.2}×", avro_rows / proto_rows),
                ]);
            }
        }
    }
    println!(
        "zeroparser-bench: {} records per workload, single thread, median of {} trials of \
         >= {:?} thread CPU time each (CPU time, not wall time: this machine, {}, is \
         shared with other builds). MB/s = 10^6 bytes of protobuf input per CPU second. The \
         decoders of a mode run in rounds of one trial each (order rotated per round); a \
         ratio is the median of the rounds' ratios.\n",
        args.records,
        args.plan.trials,
        args.plan.min_trial,
        sluice_bench::host::describe(),
    );
    println!("Mode (a): parse and touch every field once\n");
    println!("{}", touch_table.render());
    println!(
        "Mode (b): parse into an Arrow RecordBatch (equal batches of at most {} rows, finish \
         included)\n",
        arrow_peers::BATCH_ROWS
    );
    println!("{}", arrow_table.render());
    println!(
        "Mode (c): JSON into an Arrow RecordBatch (equal batches of at most {} rows; MB/s of \
         JSON text)\n",
        arrow_peers::BATCH_ROWS
    );
    println!("{}", json_table.render());
    println!(
        "Mode (d): Avro datums into an Arrow RecordBatch (equal batches of at most {} rows; MB/s \
         of Avro datums; rows/s against Sluice's protobuf into Arrow on the same rows)\n",
        arrow_peers::BATCH_ROWS
    );
    println!("{}", avro_table.render());
    println!("Goals (issue 17): the worst workload of each\n");
    println!("{}", goals.render());
    Ok(())
}
