//! The operators' status page (`GET /` on a pod and on the router). Pure functions and
//! plain data, no I/O: the server and the router feed it Prometheus text and render
//! what it returns.
//!
//! - [`prom`]: the Prometheus text format a pod's `/metrics` answers, parsed into samples;
//! - [`snapshot`]: what one pod's samples say (state, streams, ingress, CPU, WAL, memtables,
//!   tables, refusals), and a cluster of pods;
//! - [`history`]: a ring of snapshots taken every [`history::SAMPLE_EVERY`] over the last
//!   15 minutes, which gives rates (MB/s, rows/s, CPU cores) and the charts' series;
//! - [`svg`]: one small line chart as inline SVG (no script, no CDN);
//! - [`html`]: escaping text into the markup;
//! - [`page`]: the HTML page (and the login form), which refreshes itself.
//!
//! Every number the page shows comes from the samples, so it can be checked against the
//! same pod's `/metrics` (the browser test does).

pub mod error;
pub mod history;
pub mod html;
pub mod page;
pub mod prom;
pub mod snapshot;
pub mod svg;

pub use error::{Result, StatusError};
pub use history::History;
pub use snapshot::{ClusterSnapshot, PodSnapshot};
