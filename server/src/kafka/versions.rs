//! The Kafka APIs and versions this pod serves, and the ApiVersions answer built from
//! them (also the answer to an ApiVersions request of a version it does not serve:
//! UNSUPPORTED_VERSION with the list, in the v0 layout every client reads).
//!
//! Two APIs are *listed but not served*: librdkafka turns record batches v2 on only when
//! the broker lists Fetch v4, zstd only with Fetch v10, and LZ4 only with FindCoordinator
//! v0 (its broker-version proxies, `rdkafka_feature.c`). Listing them makes every Kafka
//! producer send v2 batches in any codec; a Fetch or FindCoordinator request closes the
//! connection like any API this pod does not serve (it is a producer-only broker).

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};
use kafka_protocol::protocol::VersionRange;

/// Error code UNSUPPORTED_VERSION.
pub const UNSUPPORTED_VERSION: i16 = 35;

/// The versions served per API (None: not served).
pub fn served(api: ApiKey) -> Option<VersionRange> {
    let (min, max) = match api {
        // v13 names topics by id; ids are not kept.
        ApiKey::Produce => (3, 12),
        ApiKey::Metadata => (0, 12),
        ApiKey::ApiVersions => (0, 4),
        // v0 is listed because librdkafka 2.0 turns SASL off without it; its raw token
        // exchange (no SaslAuthenticate framing) is not served: that connection closes.
        ApiKey::SaslHandshake => (0, 1),
        ApiKey::SaslAuthenticate => (0, 2),
        ApiKey::InitProducerId => (0, 5),
        _ => return None,
    };
    Some(VersionRange { min, max })
}

/// The versions listed per API: the served ones and the two listed only (module doc).
fn listed(api: ApiKey) -> Option<VersionRange> {
    match api {
        ApiKey::Fetch => Some(VersionRange { min: 4, max: 10 }),
        ApiKey::FindCoordinator => Some(VersionRange { min: 0, max: 0 }),
        other => served(other),
    }
}

/// Every listed API with its versions, in API-key order.
pub fn api_versions(error_code: i16) -> ApiVersionsResponse {
    let api_keys = [
        ApiKey::Produce,
        ApiKey::Fetch,
        ApiKey::Metadata,
        ApiKey::FindCoordinator,
        ApiKey::SaslHandshake,
        ApiKey::ApiVersions,
        ApiKey::InitProducerId,
        ApiKey::SaslAuthenticate,
    ]
    .into_iter()
    .filter_map(|api| {
        listed(api).map(|range| {
            ApiVersion::default()
                .with_api_key(api as i16)
                .with_min_version(range.min)
                .with_max_version(range.max)
        })
    })
    .collect();
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(api_keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_names_each_served_api_once_within_the_crates_versions() {
        let answer = api_versions(0);
        assert_eq!(answer.api_keys.len(), 8);
        for v in &answer.api_keys {
            let api = ApiKey::try_from(v.api_key).expect("known");
            let crate_range = api.valid_versions();
            assert!(v.min_version >= crate_range.min && v.max_version <= crate_range.max);
        }
        assert!(served(ApiKey::Fetch).is_none());
    }
}
