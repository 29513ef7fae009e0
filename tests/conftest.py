import os

import torch

# Triton kernels run on the CPU through Triton's interpreter when there is no GPU. It is chosen
# when the kernels are decorated, so this must happen before sglang_dflash is imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# The suite is thousands of tiny ops: one intra-op thread avoids OpenMP spin-waits that made a
# tiny model's decode 30x slower on the 2-core CI machine whenever anything else was running.
torch.set_num_threads(1)
