"""What stores written by earlier releases hold, for the tests that read them back."""

# A version 1 state as stores written before the names were spelled out hold it (one camera's
# committer with a held frame; its key is the pipeline's abbreviated key).
V1_STATE = (
    '{"version": 1, "dim": 4, "ref": [1.0, 0.0, 0.0, 0.0], "held": {"t": 1.0, "emb": [0.9925354803025696, '
    '0.12153495677174321, 0.010127913064311935, 0.0], "key": {"s": 3, "t_rel": 1.0, "t_abs": null, "pts": 1000, '
    '"w": 64, "h": 48, "g": [120.5, 30.25, 0.5, null]}, "d": 0.0074645196974304495}, "dedup_hist": '
    '[0.005062810977501941, 0.0074645196974304495], "event_hist": [], "prev_dk": null, "event_t0": 0.0, '
    '"last_kept_t": 0.0, "last_t": 1.0}')
V1_EMBS = [[1, 0, 0, 0], [0.99, 0.1, 0, 0], [0.98, 0.12, 0.01, 0]]  # pushed at t = 0, 0.5, 1.0 before it was saved
