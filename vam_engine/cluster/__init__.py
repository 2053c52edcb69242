"""Camera shards on a Ray cluster behind the Engine API (router.py). Ray is imported only when a
cluster is connected: ``pip install vam-engine[cluster]``."""
from .app import create_cluster_app  # its server imports are made when it is called
from .catalogue import cluster_id, split_id
from .router import AlertCursor, ClusterEngine, ClusterSearchResult, Partial, ShardDown, connect

__all__ = ["connect", "create_cluster_app", "ClusterEngine", "ClusterSearchResult", "Partial", "AlertCursor",
           "ShardDown", "cluster_id", "split_id"]
