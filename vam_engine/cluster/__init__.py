"""Camera shards on a Ray cluster behind the Engine API (router.py). Ray is imported only when a
cluster is connected: ``pip install vam-engine[cluster]``."""
from .catalogue import cluster_id, split_id
from .router import AlertCursor, ClusterEngine, ClusterSearchResult, Partial, ShardDown, connect

__all__ = ["connect", "ClusterEngine", "ClusterSearchResult", "Partial", "AlertCursor", "ShardDown",
           "cluster_id", "split_id"]
