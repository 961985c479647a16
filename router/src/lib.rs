//! Cluster layer (placement router, membership, load reports, draining). Built by the cluster issue; empty on a single node.
