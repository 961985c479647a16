//! Metric data points into rows of a metrics table: one row per data point of any of the
//! five types, `metric_type` naming it (`gauge`, `sum`, `histogram`,
//! `exponential_histogram`, `summary`). Gauges and sums fill `value` (an integer point
//! as a DOUBLE), sums `is_monotonic`, sums and both histograms `aggregation_temporality`;
//! each histogram type and the summary has a STRUCT column of its own, NULL in the other
//! types' rows. A point is refused — counted in `rejected_data_points`, the rest ingested
//! — when it has no value (number points), a count or time does not fit BIGINT, a
//! histogram's bucket counts are neither empty nor one more than its bounds, or an
//! exemplar's ids are not 16 / 8 bytes (or empty).

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::metrics::v1::exponential_histogram_data_point::Buckets;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::metrics::v1::{
    exemplar, number_data_point, AggregationTemporality, Exemplar, ExponentialHistogramDataPoint,
    HistogramDataPoint, Metric, NumberDataPoint, SummaryDataPoint,
};

use super::columns::Col;
use super::rows::{hex_id, signed, ResourceCtx, Rows, ScopeCtx, COMMON_COLUMNS};
use super::variant;

/// Columns of a metrics table.
pub const COLUMNS: usize = COMMON_COLUMNS + 16;

/// Data points in `request`.
pub fn count(request: &ExportMetricsServiceRequest) -> usize {
    request
        .resource_metrics
        .iter()
        .flat_map(|r| &r.scope_metrics)
        .flat_map(|s| &s.metrics)
        .map(|m| match &m.data {
            Some(Data::Gauge(g)) => g.data_points.len(),
            Some(Data::Sum(s)) => s.data_points.len(),
            Some(Data::Histogram(h)) => h.data_points.len(),
            Some(Data::ExponentialHistogram(h)) => h.data_points.len(),
            Some(Data::Summary(s)) => s.data_points.len(),
            None => 0,
        })
        .sum()
}

/// One data point, whatever its type.
enum Point<'a> {
    Number(&'a NumberDataPoint),
    Histogram(&'a HistogramDataPoint),
    Exponential(&'a ExponentialHistogramDataPoint),
    Summary(&'a SummaryDataPoint),
}

/// The metric a point belongs to, written once per metric.
struct MetricCtx<'a> {
    metric: &'a Metric,
    metadata: String,
    kind: &'static str,
    temporality: Option<String>,
    monotonic: Option<bool>,
}

/// Writes every data point of `request` that fits into `rows`.
pub fn transcode(request: &ExportMetricsServiceRequest, rows: &mut Rows) {
    let mut index = 0;
    for rm in &request.resource_metrics {
        let res = ResourceCtx::new(rm.resource.as_ref(), &rm.schema_url, &mut rows.buf);
        for sm in &rm.scope_metrics {
            let scope = ScopeCtx::new(sm.scope.as_ref(), &sm.schema_url, &mut rows.buf);
            for metric in &sm.metrics {
                let (kind, temporality, monotonic, points): (_, _, _, Vec<Point<'_>>) =
                    match &metric.data {
                        Some(Data::Gauge(g)) => (
                            "gauge",
                            None,
                            None,
                            g.data_points.iter().map(Point::Number).collect(),
                        ),
                        Some(Data::Sum(s)) => (
                            "sum",
                            Some(s.aggregation_temporality),
                            Some(s.is_monotonic),
                            s.data_points.iter().map(Point::Number).collect(),
                        ),
                        Some(Data::Histogram(h)) => (
                            "histogram",
                            Some(h.aggregation_temporality),
                            None,
                            h.data_points.iter().map(Point::Histogram).collect(),
                        ),
                        Some(Data::ExponentialHistogram(h)) => (
                            "exponential_histogram",
                            Some(h.aggregation_temporality),
                            None,
                            h.data_points.iter().map(Point::Exponential).collect(),
                        ),
                        Some(Data::Summary(s)) => (
                            "summary",
                            None,
                            None,
                            s.data_points.iter().map(Point::Summary).collect(),
                        ),
                        None => continue,
                    };
                let ctx = MetricCtx {
                    metric,
                    metadata: variant::attributes(&mut rows.buf, &metric.metadata).to_string(),
                    kind,
                    temporality: temporality.map(temporality_name),
                    monotonic,
                };
                for point in points {
                    let offset = rows.next_item();
                    match point.check() {
                        Ok(common) => write(rows, offset, &ctx, &point, &common, &res, &scope),
                        Err(why) => rows.reject(
                            "data point",
                            index,
                            format!("metric `{}`: {why}", metric.name),
                        ),
                    }
                    index += 1;
                }
            }
        }
    }
}

fn temporality_name(code: i32) -> String {
    AggregationTemporality::try_from(code)
        .map(|t| t.as_str_name().to_string())
        .unwrap_or_else(|_| code.to_string())
}

/// The converted fields every point type has.
struct Common<'a> {
    attributes: &'a [KeyValue],
    start: i64,
    time: i64,
    flags: u32,
    exemplars: Vec<(&'a Exemplar, i64, Option<String>, Option<String>)>,
    counts: Vec<i64>,
    negative: Vec<i64>,
    count: Option<i64>,
}

impl<'a> Point<'a> {
    fn check(&self) -> Result<Common<'a>, String> {
        let (attributes, start, time, flags, exemplars) = match *self {
            Point::Number(p) => (
                &p.attributes,
                p.start_time_unix_nano,
                p.time_unix_nano,
                p.flags,
                &p.exemplars[..],
            ),
            Point::Histogram(p) => (
                &p.attributes,
                p.start_time_unix_nano,
                p.time_unix_nano,
                p.flags,
                &p.exemplars[..],
            ),
            Point::Exponential(p) => (
                &p.attributes,
                p.start_time_unix_nano,
                p.time_unix_nano,
                p.flags,
                &p.exemplars[..],
            ),
            Point::Summary(p) => (
                &p.attributes,
                p.start_time_unix_nano,
                p.time_unix_nano,
                p.flags,
                &[][..],
            ),
        };
        let exemplars = exemplars
            .iter()
            .enumerate()
            .map(|(i, e)| {
                Ok((
                    e,
                    signed(e.time_unix_nano, &format!("exemplar {i} time_unix_nano"))?,
                    hex_id(&e.span_id, 8, &format!("exemplar {i} span_id"), false)?,
                    hex_id(&e.trace_id, 16, &format!("exemplar {i} trace_id"), false)?,
                ))
            })
            .collect::<Result<Vec<_>, String>>()?;
        let all_signed = |counts: &[u64], what: &str| {
            counts
                .iter()
                .map(|c| signed(*c, what))
                .collect::<Result<Vec<_>, _>>()
        };
        let (count, counts, negative) = match *self {
            Point::Number(p) => {
                if p.value.is_none() {
                    return Err("the point has no value (as_double or as_int)".into());
                }
                (None, Vec::new(), Vec::new())
            }
            Point::Histogram(p) => {
                if !p.bucket_counts.is_empty()
                    && p.bucket_counts.len() != p.explicit_bounds.len() + 1
                {
                    return Err(format!(
                        "{} bucket counts for {} explicit bounds (expected {})",
                        p.bucket_counts.len(),
                        p.explicit_bounds.len(),
                        p.explicit_bounds.len() + 1
                    ));
                }
                (
                    Some(signed(p.count, "count")?),
                    all_signed(&p.bucket_counts, "bucket count")?,
                    Vec::new(),
                )
            }
            Point::Exponential(p) => {
                signed(p.zero_count, "zero_count")?;
                let side = |b: &Option<Buckets>| {
                    all_signed(
                        b.as_ref().map_or(&[][..], |b| &b.bucket_counts),
                        "bucket count",
                    )
                };
                (
                    Some(signed(p.count, "count")?),
                    side(&p.positive)?,
                    side(&p.negative)?,
                )
            }
            Point::Summary(p) => (Some(signed(p.count, "count")?), Vec::new(), Vec::new()),
        };
        Ok(Common {
            attributes,
            start: signed(start, "start_time_unix_nano")?,
            time: signed(time, "time_unix_nano")?,
            flags,
            exemplars,
            counts,
            negative,
            count,
        })
    }
}

fn write(
    rows: &mut Rows,
    offset: i64,
    ctx: &MetricCtx<'_>,
    point: &Point<'_>,
    common: &Common<'_>,
    res: &ResourceCtx,
    scope: &ScopeCtx,
) {
    rows.begin(offset, common.time, res, scope);
    let buf = &mut rows.buf;
    let c = &mut rows.cols[COMMON_COLUMNS..];
    c[0].str(Some(&ctx.metric.name));
    c[1].str(Some(&ctx.metric.description));
    c[2].str(Some(&ctx.metric.unit));
    c[3].str(Some(&ctx.metadata));
    c[4].str(Some(ctx.kind));
    c[5].str(Some(variant::attributes(buf, common.attributes)));
    c[6].i64(Some(common.start));
    c[7].i64(Some(common.time));
    c[8].i64(Some(common.flags as i64));
    let exemplars = c[9].child(0);
    for (e, time, span_id, trace_id) in &common.exemplars {
        exemplars.child(0).i64(Some(*time));
        exemplars.child(1).f64(e.value.map(|v| match v {
            exemplar::Value::AsDouble(d) => d,
            exemplar::Value::AsInt(i) => i as f64,
        }));
        exemplars.child(2).str(span_id.as_deref());
        exemplars.child(3).str(trace_id.as_deref());
        exemplars
            .child(4)
            .str(Some(variant::attributes(buf, &e.filtered_attributes)));
        exemplars.close();
    }
    c[9].close();
    c[10].f64(match point {
        Point::Number(p) => p.value.map(|v| match v {
            number_data_point::Value::AsDouble(d) => d,
            number_data_point::Value::AsInt(i) => i as f64,
        }),
        _ => None,
    });
    c[11].str(ctx.temporality.as_deref());
    c[12].bool(ctx.monotonic);
    match point {
        Point::Histogram(p) => {
            let h = &mut c[13];
            h.child(0).i64(common.count);
            h.child(1).f64(p.sum);
            h.child(2).f64(p.min);
            h.child(3).f64(p.max);
            int_list(h.child(4), &common.counts);
            let bounds = h.child(5);
            for b in &p.explicit_bounds {
                bounds.child(0).f64(Some(*b));
            }
            bounds.close();
            h.close();
        }
        _ => c[13].null(),
    }
    match point {
        Point::Exponential(p) => {
            let h = &mut c[14];
            h.child(0).i64(common.count);
            h.child(1).f64(p.sum);
            h.child(2).f64(p.min);
            h.child(3).f64(p.max);
            h.child(4).i32(Some(p.scale));
            h.child(5).i64(Some(p.zero_count as i64));
            h.child(6).f64(Some(p.zero_threshold));
            h.child(7)
                .i32(Some(p.positive.as_ref().map_or(0, |b| b.offset)));
            int_list(h.child(8), &common.counts);
            h.child(9)
                .i32(Some(p.negative.as_ref().map_or(0, |b| b.offset)));
            int_list(h.child(10), &common.negative);
            h.close();
        }
        _ => c[14].null(),
    }
    match point {
        Point::Summary(p) => {
            let s = &mut c[15];
            s.child(0).i64(common.count);
            s.child(1).f64(Some(p.sum));
            let quantiles = s.child(2);
            for q in &p.quantile_values {
                let item = quantiles.child(0);
                item.child(0).f64(Some(q.quantile));
                item.child(1).f64(Some(q.value));
                item.close();
            }
            quantiles.close();
            s.close();
        }
        _ => c[15].null(),
    }
}

fn int_list(list: &mut Col, values: &[i64]) {
    for v in values {
        list.child(0).i64(Some(*v));
    }
    list.close();
}
