"""analysis/sensitivity_trained.py judges each claim on a probe's own cosines: a synthetic run whose cosines are
known (the claims hold at the end, fail at the start) must give exactly those verdicts, and the probes picked must
be those nearest to 0%, 10%, 50% and 100% of the steps."""
import json
import os
import sys
import tempfile

import h5py
import numpy as np

sys.path.insert(0, sys.argv[1])
import sensitivity_trained as st  # noqa: E402

NAMES = ["conv1", "bn1", "stage1.0.conv1", "stage1.0.bn1", "stage2.0.conv1", "stage3.0.conv1", "fc"]
DELAYS = [1, 2, 4, 8]
PROBES = [0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]


def cosines(probe):
    """[layer, delay]: at probe 0 cosine rises with depth to fc's 0.7 (depth, a and b fail); later it falls with
    depth (depth holds), the stem stays at 0.95 (a holds) and fc is 0.3 (b holds)."""
    c = np.zeros((len(NAMES), len(DELAYS)))
    if probe == 0:
        for i in range(len(NAMES)):
            c[i, :] = 0.4 + 0.05 * i
    else:
        for i in range(len(NAMES)):
            c[i, :] = 0.95 - 0.1 * i
        c[0:2, :] = 0.95
        c[NAMES.index("fc"), :] = 0.3
    return c


def main():
    with tempfile.TemporaryDirectory() as tmp:
        run = os.path.join(tmp, "resnet20-fixed")
        os.makedirs(run)
        with h5py.File(os.path.join(run, "metrics.h5"), "w") as f:
            f.attrs["model"] = "resnet20"
            layers = f.create_group("layers")
            layers.create_dataset("name", data=np.array([n.encode() for n in NAMES]))
            f.create_dataset("sensitivity/cosine", data=np.stack([cosines(p) for p in PROBES]))
            f.create_dataset("sensitivity/delays", data=np.array(DELAYS))
            f.create_dataset("sensitivity/probe_steps", data=np.array(PROBES))
            f.create_dataset("steps", data=np.zeros(1010, dtype=[("lr", "f4")]))
        json.dump({"steps": 1010, "batch": 32, "final_loss": 0.2, "test_accuracy": 0.91}, open(
            os.path.join(run, "summary.json"), "w"))
        doc = st.study(tmp)
        picked = [(p["label"], p["step"]) for p in doc["probes"]]
        assert picked == [("start", 0), ("10%", 100), ("50%", 500), ("end", 1000)], picked
        start, end = doc["probes"][0]["claims"], doc["probes"][-1]["claims"]
        want_start = {"depth": "does not hold", "a": "does not hold", "b": "does not hold"}
        want_end = {"depth": "holds", "a": "holds", "b": "holds"}
        got_start = {k: v["verdict"] for k, v in start.items()}
        got_end = {k: v["verdict"] for k, v in end.items()}
        assert got_start == want_start, got_start
        assert got_end == want_end, got_end
        assert abs(end["b"]["value"] - 0.3) < 1e-12 and end["a"]["best"] in ("stem", "stage1.0"), end
    assert st.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    assert st.spearman([1, 2, 3], [5, 5, 5]) is None
    print("verdicts as built: the claims fail at the start and hold at the end")


if __name__ == "__main__":
    main()
