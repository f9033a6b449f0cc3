"""The README's findings, shared part: samples/s of a regime-map cell and the ratios between configs."""
from .common import HISTORY, _load, _rel


# --- what the studies found (README) -------------------------------------------------------------------------------

PAPER_SPEEDUP = "1.49–3.91x"   # the DreamDDP paper's reported speed-up over its baselines (GPT-2 profiles)


def _sps(cell, config, system="ours"):
    r = next((r for r in cell["rows"] if r["system"] == system and r["config"] == config), None)
    return r["samples_per_s"] if r and r["samples_per_s"] else None


# Per-rank batch of experiments/regime_map.py, by model family: the samples behind a run's launch-to-exit time.
REGIME_BATCH = {"mlp": 64, "cnn": 64, "resnet20": 64, "gpt-mini": 8, "resnet18": 32, "resnet50": 32, "gpt2": 1,
                "llama": 1}


def _sps_e2e(cell, config, system="ours"):
    """Samples/s from launch to exit of a configuration in a regime-map cell: the median over its repeats of the
    run's steps x batch x ranks over its launch-to-exit seconds (`run_s`); None where the cell recorded no run_s.
    A dreamddp run reads the cell's profile, made once by a `dreamddp profile` launch that is not in run_s."""
    steps = cell.get("steps_ddp", cell.get("steps")) if config == "ddp" else cell.get("steps")
    b = REGIME_BATCH.get(cell["model"].split(":")[0])
    if not steps or not b:
        return None
    xs = sorted(steps * b * cell["ranks"] / r["run_s"] for r in cell.get("runs", [])
                if r["system"] == system and r["config"] == config and r.get("run_s") and r.get("samples_per_s"))
    if not xs:
        return None
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def _vs_e2e(c, a, b):
    x, y = _sps_e2e(c, a), _sps_e2e(c, b)
    return x / y if x and y else None


def _best_e2e(c, H):
    """dreamddp:h=H from launch to exit over the better of localsgd:k=H and plsgd:h=H (None where not recorded)."""
    dd, ls, pl = (_sps_e2e(c, n % H) for n in ("dreamddp:h=%d", "localsgd:k=%d", "plsgd:h=%d"))
    return dd / max(ls, pl) if dd and ls and pl else None


def _vs(c, a, b):
    """Samples/s of configuration a over configuration b in a regime-map cell (None when either is missing)."""
    x, y = _sps(c, a), _sps(c, b)
    return x / y if x and y else None


def _where(c):
    return "%s, %d ranks at %s" % (c["model"], c["ranks"], c["rate"])


E2E_NOTE = ("from launch to exit (each run's whole `dreamddp launch` command; dreamddp's separate profiling launch "
            "left out, as it was not timed), with the trainer's timed window in brackets")


E2E_SELF_NOTE = ("from launch to exit (each run's whole `dreamddp launch` command; dreamddp profiled itself inside it, "
                 "so nothing is left out), with the trainer's timed window in brackets")


def _regime_e2e(results):
    """The regime map to judge dreamddp by from launch to exit, and how to say what it covers: the self-profiled
    record (regime_map_e2e.json) where there is one, else regime_map.json (dreamddp on a profile made by a separate,
    untimed launch)."""
    d = _load(results, "regime_map_e2e.json")
    if d and d.get("dreamddp_profile") == "self":
        return d, E2E_SELF_NOTE
    return _load(results, "regime_map.json"), E2E_NOTE


def _absent_line(title, page):
    return ("**%s.** _No complete record yet: see [%s](%s) once one exists, and the earlier records on "
            "the [history page](%s)._" % (title, page[:-3], _rel(page), _rel(HISTORY)))
