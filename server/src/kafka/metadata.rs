//! The Metadata answer: this pod as the only broker (node 0, the advertised Kafka
//! address), every table a topic with one partition led by it. A named topic that is no
//! table is UNKNOWN_TOPIC_OR_PARTITION, one the caller may not write
//! TOPIC_AUTHORIZATION_FAILED (the write check of a Produce: token scope and grants); no
//! topic list gives every table the caller may write. Topics are never created.

use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::metadata_response::{
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::produce::code;
use crate::auth::Caller;
use crate::pod::Pod;

/// The node id of this pod.
pub const NODE_ID: i32 = 0;

/// Answers `request` for `caller`; `advertise` is the address clients connect to.
pub fn metadata(
    pod: &Pod,
    caller: &Caller,
    request: &MetadataRequest,
    advertise: &(String, u16),
) -> MetadataResponse {
    let names: Vec<String> = match &request.topics {
        Some(topics) => topics
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.0.as_str().to_string()))
            .collect(),
        None => pod
            .catalog
            .tables()
            .unwrap_or_default()
            .into_iter()
            .map(|t| t.full_name)
            .filter(|t| pod.auth.authorize_write(caller, t).is_ok())
            .collect(),
    };
    let topics = names
        .into_iter()
        .map(|name| topic(pod, caller, name))
        .collect();
    MetadataResponse::default()
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(NODE_ID))
            .with_host(StrBytes::from_string(advertise.0.clone()))
            .with_port(i32::from(advertise.1))])
        .with_cluster_id(Some(StrBytes::from_static_str("sluice")))
        .with_controller_id(BrokerId(NODE_ID))
        .with_topics(topics)
}

fn topic(pod: &Pod, caller: &Caller, name: String) -> MetadataResponseTopic {
    let table = name.trim().to_ascii_lowercase();
    let answer =
        MetadataResponseTopic::default().with_name(Some(TopicName(StrBytes::from_string(name))));
    match pod.catalog.table(&table) {
        Ok(Some(_)) => {}
        _ => return answer.with_error_code(code::UNKNOWN_TOPIC_OR_PARTITION),
    }
    if pod.auth.authorize_write(caller, &table).is_err() {
        return answer.with_error_code(code::TOPIC_AUTHORIZATION_FAILED);
    }
    answer.with_partitions(vec![MetadataResponsePartition::default()
        .with_partition_index(0)
        .with_leader_id(BrokerId(NODE_ID))
        .with_leader_epoch(0)
        .with_replica_nodes(vec![BrokerId(NODE_ID)])
        .with_isr_nodes(vec![BrokerId(NODE_ID)])])
}
