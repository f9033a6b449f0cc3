"""One process's PyTorch training step on the CPU in fp32 or under torch.autocast("cpu", bfloat16), on the
peer's model (peers/torch_ddp.py build: the same shapes as ours), AdamW, one fixed synthetic batch.

  torch_autocast_step.py MODEL BATCH STEPS fp32|bf16      prints one JSON line: step_ms (after 2 warm-up steps)
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "peers"))
import torch  # noqa: E402
from torch_ddp import build  # noqa: E402


def main(argv):
    model_spec, batch, steps, precision = argv[0], int(argv[1]), int(argv[2]), argv[3]
    torch.set_num_threads(int(os.environ.get("THREADS", "1")))
    torch.manual_seed(0)
    model, inputs, loss_of = build(model_spec, batch)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    bf16 = precision == "bf16"
    start = None
    for step in range(2 + steps):
        if step == 2:
            start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = model(inputs)
        loss = loss_of(out.float())
        loss.backward()
        opt.step()
    elapsed = time.perf_counter() - start
    print(json.dumps({"torch": torch.__version__, "model": model_spec, "precision": precision, "batch": batch,
                      "steps": steps, "step_ms": round(elapsed / steps * 1e3, 2), "loss": float(loss),
                      "threads": torch.get_num_threads()}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
